// `mqd serve` (root, its in-process agent, from the sources) shut down while its reader is stuck
// in a user's DLL. User 65534 runs a rank-looking process whose MPIR_dll_name names a library of
// theirs whose constructor blocks in open() on their own FIFO, and a starter listing it; the
// admin attaches the starter and asks for a snapshot, which puts a reader (as 65534) in that
// open(). SIGTERM must then end `mqd serve` by itself, with the reader gone and none started
// after it (the reader it killed was once replaced, and the new one blocked again).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type Attacker,
  type BlockingDll,
  buildAttacker,
  buildBlockingDll,
  buildConformance,
  type Started,
  startProcess,
} from '@mqd/core/testing';
import { done, identify, isRunning, pending, readStat, waitFor } from '@mqd/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servedUrl } from './run-mqd.js';

const ADMIN = 'dll-shutdown-admin-token-0123456789abcdef';
const MAIN_TS = fileURLToPath(new URL('../src/main.ts', import.meta.url));

let a: Attacker;
let blocking: BlockingDll;
const started: Started[] = [];
let serve: ChildProcess | null = null;
let dataDir = '';

beforeAll(() => {
  expect(process.getuid?.()).toBe(0);
  a = buildAttacker();
  buildConformance();
  blocking = buildBlockingDll(a);
  dataDir = mkdtempSync('/tmp/mqd-dll-shutdown-');
});
afterAll(() => {
  for (const s of started) s.kill();
  if (serve?.pid !== undefined && serve.exitCode === null && serve.signalCode === null) {
    try {
      process.kill(-serve.pid, 'SIGKILL'); // its own group: what it started goes too
    } catch {
      // gone already
    }
  }
  for (const pid of blocking?.enteredPids() ?? []) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already (what the test expects)
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
  a?.dispose();
});

const api = (url: string, path: string, body?: unknown) =>
  fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ADMIN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('mqd serve with a reader stuck in a DLL', () => {
  it('SIGTERM: it exits by itself, the stuck reader is gone and no reader started after it', async () => {
    const rank = await startProcess([a.rank, blocking.dll], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    started.push(rank);
    const starter = await startProcess([a.starter, String(rank.pid)]);
    started.push(starter);

    // `mqd serve` as a user starts it, from the sources: main() and its signal handling.
    const child = spawn(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { main } from ${JSON.stringify(MAIN_TS)};
         main(process.argv.slice(1)).then((c) => { process.exitCode = c; });`,
        'serve',
        '--port',
        '0',
        '--host',
        '127.0.0.1',
        '--data-dir',
        join(dataDir, 'data'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MQD_ADMIN_TOKEN: ADMIN }, detached: true },
    );
    serve = child;
    let log = '';
    child.stderr?.on('data', (d: Buffer) => {
      log = (log + d.toString()).slice(-20_000);
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const url = await servedUrl(child);

    const attach = await api(url, '/api/jobs/attach', { starterPid: starter.pid });
    const attached = (await attach.json()) as { job?: { id: string } };
    expect(attach.status, JSON.stringify(attached)).toBe(201);
    // Not awaited: it waits on the stuck reader; shutdown must not wait on it for good.
    const snapshot = api(url, `/api/jobs/${attached.job?.id}/snapshots`).then(
      (r) => r.status,
      () => 'no answer',
    );

    const host = await waitFor(
      () => {
        const p = blocking.enteredPids()[0];
        return p !== undefined ? done(p) : pending();
      },
      { timeoutMs: 40_000, what: "the user's DLL constructor to run in a reader" },
    );
    const hostId = identify(host);
    expect(readStat(host)?.ppid).toBe(child.pid);
    expect(readStat(host)?.state).toBe('S'); // blocked in open() on the FIFO

    child.kill('SIGTERM');
    // By itself, within the test's timeout, and cleanly: 0 (the shutdown bound's way out, taken
    // when the close is still waiting after SHUTDOWN_BOUND_MS, answers 1).
    expect(await exited, log).toEqual({ code: 0, signal: null });
    await snapshot;
    await waitFor(() => (hostId === undefined || !isRunning(hostId) ? done(true) : pending()), {
      timeoutMs: 10_000,
      what: `reader ${host} to be gone`,
    });
    expect(blocking.enteredPids()).toEqual([host]);
  });
});
