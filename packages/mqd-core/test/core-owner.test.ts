// A reader that root starts as a core file's owner reads only that owner's file (the
// root-side audit in docs/root-paths.md). Root picks the reader's uid from the path's owner
// (Snapshotter.snapshotCores: stat, then the reader opens the path): a core the user swaps in
// after that stat would otherwise be parsed, and its DLL resolved, by a reader of the old
// owner's uid: root's, when the path first named a root-owned file. The race is replaced here
// by its outcome: a root reader is handed the user's core, a user's reader root's core.
import { chmodSync, chownSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReaderClient } from '../src/reader/client.js';
import { readerIdentity } from '../src/reader/identity.js';
import { Snapshotter } from '../src/snapshotter.js';
import { type Attacker, buildAttacker, NOBODY, startProcess } from './security-kit.js';

let a: Attacker;
let dir = '';
let userCore = '';
let rootCore = '';

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('core-owner.test.ts needs root (setpriv, chown)');
  a = buildAttacker();
  dir = mkdtempSync('/tmp/mqd-core-owner-');
  chmodSync(dir, 0o755);
  chownSync(dir, NOBODY, NOBODY);
  // A real core of the user's fake rank, whose MPIR_dll_name names the user's own library.
  const rank = await startProcess([a.rank, a.evil], { env: { OMPI_COMM_WORLD_RANK: '0' } });
  const s = new Snapshotter();
  try {
    const { captured } = await s.capture([{ pid: rank.pid }], dir, { ownerUid: NOBODY });
    expect(captured[0]).toHaveProperty('core');
  } finally {
    rank.kill();
    await s.dispose();
  }
  userCore = join(dir, 'rank-0.core');
  expect(statSync(userCore).uid).toBe(NOBODY);
  // The same bytes as root's file, readable by everyone.
  rootCore = join(dir, 'root.core');
  copyFileSync(userCore, rootCore);
  chownSync(rootCore, 0, 0);
  chmodSync(rootCore, 0o644);
}, 60_000);

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
  a?.dispose();
});

async function resolveAs(uid: number, path: string) {
  const host = new ReaderClient(null, {}, readerIdentity(uid, uid));
  try {
    const [answer] = await host.resolve([{ pid: -1, ownerUid: uid, allowRoot: true, core: { path } }]);
    return answer;
  } finally {
    await host.dispose();
  }
}

describe('a core read by a reader root started for its owner', () => {
  it("a root reader handed the user's core refuses it with MQD_E_FOREIGN_PROCESS, before parsing it", async () => {
    rmSync(a.out, { force: true });
    const answer = await resolveAs(0, userCore);
    expect(answer).toMatchObject({ pid: -1, error: { code: 'MQD_E_FOREIGN_PROCESS' } });
    expect(answer && 'error' in answer ? answer.error.message : '').toContain(`belongs to uid ${NOBODY}`);
    expect(answer).not.toHaveProperty('dll');
    // Nothing of the user's ran anywhere.
    expect(() => readFileSync(a.out, 'utf8')).toThrow();
  });

  it("a user's reader handed root's (world-readable) core refuses it too", async () => {
    const answer = await resolveAs(NOBODY, rootCore);
    expect(answer).toMatchObject({ error: { code: 'MQD_E_FOREIGN_PROCESS' } });
  });

  it("the owner's own reader reads the same core: the DLL it names is resolved", async () => {
    const answer = await resolveAs(NOBODY, userCore);
    expect(answer).toMatchObject({ pid: -1, dll: a.evil });
  });
});
