// Rough edges of `mqd snapshot --pid`: a pid that names no process says
// MQD_E_NO_SUCH_PID (as `mqd ranks` does), and a process with no MPI rank is reported as what it
// is, an unidentified process, not as a rank numbered 2147483647.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { type JobSnapshot, validateSnapshot } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { ranksCommand } from '../src/ranks-cmd.js';
import { snapshotCommand } from '../src/snapshot-cmd.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

async function run(cmd: typeof snapshotCommand, argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await cmd(argv, { out: (s) => out.push(s), err: (s) => err.push(s) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** A pid no process has now: one that just exited (and was reaped). */
function deadPid(): number {
  const r = spawnSync('true');
  if (r.pid === undefined) throw new Error('could not spawn true');
  return r.pid;
}

/** A live process that is not an MPI rank (cat waits on its open stdin). */
function bystander(): number {
  const c = spawn('cat', [], { stdio: ['pipe', 'ignore', 'ignore'] });
  children.push(c);
  if (c.pid === undefined) throw new Error('could not spawn cat');
  return c.pid;
}

describe('mqd snapshot --pid edges', () => {
  it('a pid with no process: MQD_E_NO_SUCH_PID, the same code mqd ranks gives', async () => {
    const pid = deadPid();
    const snap = await run(snapshotCommand, ['--pid', String(pid)]);
    expect(snap.code).toBe(1);
    expect(snap.err).toMatch(new RegExp(`^MQD_E_NO_SUCH_PID: no running process ${pid}`));
    expect(snap.out).not.toMatch(/rank 2147483647/);
    const ranks = await run(ranksCommand, ['--pid', String(pid)]);
    expect(ranks.err).toMatch(/^MQD_E_NO_SUCH_PID/);
  });

  it('a live process with no rank is listed as unidentified, never as a made-up rank', async () => {
    const pid = bystander();
    const json = await run(snapshotCommand, ['--pid', String(pid), '--json']);
    expect(json.code).toBe(1);
    const snap = JSON.parse(json.out) as JobSnapshot;
    expect(snap.ranks).toEqual([]);
    const valid = validateSnapshot(snap);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    expect(snap.unidentified?.map((u) => [u.pid, u.error.code])).toEqual([[pid, 'MQD_E_BAD_INPUT']]);
    const text = await run(snapshotCommand, ['--pid', String(pid)]);
    expect(text.out).toMatch(new RegExp(`not a rank: pid ${pid} .*MQD_E_BAD_INPUT: no MPI rank known`));
    expect(text.out).not.toMatch(/2147483647/);
  });

  it('a rank given twice: the second process is unidentified, the first keeps the rank', async () => {
    const a = bystander();
    const b = bystander();
    const json = await run(snapshotCommand, ['--pid', `${a}:0`, '--pid', `${b}:0`, '--json']);
    const snap = JSON.parse(json.out) as JobSnapshot;
    expect(snap.ranks.map((r) => [r.rank, r.pid])).toEqual([[0, a]]);
    expect(snap.unidentified?.map((u) => [u.pid, u.error.message])).toEqual([
      [b, expect.stringMatching(/rank 0 is given twice/)],
    ]);
  });
});
