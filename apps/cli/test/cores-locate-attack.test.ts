// The agent's core locator (MpirJobLocator.locateCores, run as root) against a real
// unprivileged user (uid 65534 via setpriv), the root-side audit (docs/root-paths.md):
// root reads each core's headers (its pid and command line) to list the job, so a core it
// checked by path and then reopened by path could be another file by then (a root core's
// command line shown to the user). Now each core is opened once without following a link,
// checked and parsed through that descriptor, and the directory is held open and must still be
// at the path the agent checked. The states a race would leave are planted directly: a link
// where a core was, a directory reached through a link above it.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Snapshotter } from '@mqd/core';
import { type Attacker, buildAttacker, NOBODY, startProcess } from '@mqd/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MpirJobLocator } from '../src/real-locator.js';

const SECRET = 'ROOTSECRET-do-not-show';
let a: Attacker;
let base = '';
let allowed = '';

function asNobody(script: string): void {
  execFileSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sh', '-c', script], {
    stdio: 'pipe',
  });
}

/** A real core of a fake rank started as `uid` (argv[0] = `name`), written into `dir` for that owner. */
async function coreOf(uid: number, name: string, dir: string): Promise<string> {
  const argv = ['bash', '-c', `exec -a ${name} ${a.rank} ${a.evil}`];
  const rank = await startProcess(argv, { asRoot: uid === 0, env: { OMPI_COMM_WORLD_RANK: '0' } });
  const s = new Snapshotter();
  try {
    const { captured } = await s.capture([{ pid: rank.pid }], dir, { ownerUid: uid, allowRoot: uid === 0 });
    expect(captured[0], JSON.stringify(captured)).toHaveProperty('core');
  } finally {
    rank.kill();
    await s.dispose();
  }
  const core = join(dir, 'rank-0.core');
  expect(statSync(core).uid).toBe(uid);
  return core;
}

let rootCore = '';

beforeAll(async () => {
  expect(process.getuid?.()).toBe(0); // root's agent reads what the user planted
  a = buildAttacker();
  base = mkdtempSync('/tmp/mqd-locate-attack-');
  chmodSync(base, 0o755);
  allowed = join(base, 'crash');
  mkdirSync(allowed);
  chmodSync(allowed, 0o1777);
  // Root's own crash: a root-only core whose command line is the secret.
  const rootDir = join(base, 'root-only');
  mkdirSync(rootDir, { mode: 0o700 });
  rootCore = await coreOf(0, SECRET, rootDir);
  chmodSync(rootCore, 0o600);
  // The user's own capture, and the attacker's plants.
  asNobody(
    [
      `mkdir ${allowed}/mine`,
      `mkdir ${allowed}/inner && ln -s keep.dat ${allowed}/inner/rank-0.core`,
      `mkdir -p ${allowed}/real/job && ln -s real ${allowed}/alias`,
    ].join(' && '),
  );
  await coreOf(NOBODY, 'myjob', join(allowed, 'mine'));
  await coreOf(NOBODY, 'myjob', join(allowed, 'real', 'job'));
  // Root's core inside the user's directory, as a hard link would put it there (with
  // fs.protected_hardlinks=0) or a crash handler writing into it: the link names it.
  copyFileSync(rootCore, join(allowed, 'inner', 'keep.dat'));
  chownSync(join(allowed, 'inner', 'keep.dat'), 0, 0);
  chmodSync(join(allowed, 'inner', 'keep.dat'), 0o600);
}, 120_000);

afterAll(() => {
  if (base !== '') rmSync(base, { recursive: true, force: true });
  a?.dispose();
});

describe('core directories planted by uid 65534, listed by root', () => {
  const locator = new MpirJobLocator('node0');

  it("the user's own cores: their uid, their command line, the rank from the name", async () => {
    const r = await locator.locateCores(join(allowed, 'mine'));
    expect(r.ok, JSON.stringify(r)).toBe(true);
    if (!r.ok) return;
    expect(r.value).toMatchObject({ uid: NOBODY, method: 'cores', coresDir: join(allowed, 'mine') });
    expect(r.value.command).toMatch(/^1 core files of myjob /);
    expect(r.value.ranks).toEqual([
      expect.objectContaining({ rank: 0, core: join(allowed, 'mine', 'rank-0.core'), host: 'node0' }),
    ]);
  });

  it("a link planted in place of a core, to root's core beside it: never followed (MQD_E_CORE_INVALID), the command line never read", async () => {
    const r = await locator.locateCores(join(allowed, 'inner'));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe('MQD_E_CORE_INVALID');
    expect(r.error.message).toContain(
      `${join(allowed, 'inner', 'rank-0.core')} is a symbolic link (never followed here)`,
    );
    expect(JSON.stringify(r)).not.toContain(SECRET);
  });

  it('a directory reached through a link above it (a parent swapped after the check): MQD_E_CORE_DIR_FORBIDDEN', async () => {
    const r = await locator.locateCores(join(allowed, 'alias', 'job'));
    expect(r).toMatchObject({ ok: false, error: { code: 'MQD_E_CORE_DIR_FORBIDDEN' } });
    expect(r.ok ? '' : r.error.message).toMatch(/moved while it was opened/);
    // The directory itself a link: refused without being entered.
    const self = await locator.locateCores(join(allowed, 'alias'));
    expect(self).toMatchObject({ ok: false, error: { code: 'MQD_E_CORE_DIR_FORBIDDEN' } });
    expect(self.ok ? '' : self.error.message).toMatch(/alias is a symbolic link or not a directory/);
  });
});
