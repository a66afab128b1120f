// The process flood against the hang watch's discovery (discovery-flood.test.ts, and with a
// real hung Open MPI job as the victim discovery-flood.mpi.test.ts): a real unprivileged user,
// uid 65534 (setpriv), starts 1,100 sleeping processes that look like ranks to discovery
// (`sleep` with Open MPI's libmpi.so preloaded, so it maps an MPI library, and
// OMPI_COMM_WORLD_RANK in its environment: each one a job of its own), ahead in /proc order (as
// a scan reads it: pids sorted as names) of the jobs it wants pushed out of the 1,024-entry
// report: a victim's job (uid 65533) and root's (a fake `mpirun` and two ranks, a real process
// tree). A real `mqd serve` (its in-process agent's real /proc discovery, the watch on, period
// 1 s) registered both jobs before the flood; after it, for several rounds: both stay live
// (checked at every look), a snapshot of either is taken (not refused MQD_E_JOB_ENDED), the
// store holds at most the per-uid bound of the flooder's jobs, and the agent and the watch say
// per uid what they left out. Every process is killed by its group's pid at the end, also on
// failure.
import { type ChildProcess, spawn } from 'node:child_process';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procStartTime, readProcStat } from '@mqd/core';
import { MAX_LIVE_JOBS_PER_UID, MAX_REGISTRATIONS_PER_UID_HOUR } from '@mqd/server';
import { done, mpiPrefix, pending, waitFor } from '@mqd/testkit';
import { expect } from 'vitest';

export const FLOODER = 65534;
export const VICTIM = 65533;
const FLOOD = 1100;
const ADMIN = 'discovery-flood-admin-token-0123456789abcdef';
const LOCAL_SERVE = fileURLToPath(new URL('../src/local-serve.ts', import.meta.url));
const CLI_DIR = fileURLToPath(new URL('..', import.meta.url));
const PATH = process.env['PATH'] ?? '/usr/bin:/bin';
const setpriv = (uid: number) => ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];

/** Process groups this file started (each leader's pid), killed in afterAll. */
export const groups: number[] = [];
/** Processes outside those groups (ranks an `mpirun` put in groups of their own), killed by pid. */
export const loose: number[] = [];
const dirs: string[] = [];
function killAll(): void {
  for (const pgid of groups.splice(0)) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }
  for (const pid of loose.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}
/** Kills what is left and removes the directories (the test file's afterAll). */
export function cleanupFlood(): void {
  killAll();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

const libmpi = () => join(mpiPrefix('openmpi'), 'lib', 'libmpi.so');

/** `argv` in a group of its own (as `uid` when given), libmpi preloaded. */
function run(argv: readonly string[], env: Record<string, string>, uid?: number): ChildProcess {
  const cmd = uid === undefined ? [...argv] : [...setpriv(uid), ...argv];
  const c = spawn(cmd[0] ?? 'false', cmd.slice(1), {
    env: { PATH, LD_PRELOAD: libmpi(), ...env },
    stdio: 'ignore',
    detached: true,
  });
  if (c.pid !== undefined) groups.push(c.pid);
  return c;
}

function commOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'latin1').replace(/\n$/, '');
  } catch {
    return null;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((x) => x !== '')
      .map(Number);
  } catch {
    return [];
  }
}

/** Where the kernel hands out the next pids (root in the initial pid namespace); false if refused. */
function nextPidsFrom(pid: number): boolean {
  try {
    writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1));
    return true;
  } catch {
    return false;
  }
}

/** A fake `mpirun` (a shell by that name) with two `sleep` ranks; resolves to [starter, ranks]. */
export async function fakeStarterJob(
  dir: string,
  uid?: number,
): Promise<{ starter: number; ranks: number[] }> {
  const script = 'OMPI_COMM_WORLD_RANK=0 sleep 600 & OMPI_COMM_WORLD_RANK=1 sleep 600 & wait';
  const c = run([join(dir, 'mpirun'), '-c', script], { OMPI_COMM_WORLD_SIZE: '2' }, uid);
  const starter = await waitFor(
    () => (commOf(c.pid ?? 0) === 'mpirun' ? done(c.pid ?? 0) : pending('not exec’d yet')),
    { timeoutMs: 20_000, what: 'the fake mpirun to exec' },
  );
  const ranks = await waitFor(
    () => {
      const kids = childrenOf(starter);
      return kids.length === 2 && kids.every((p) => commOf(p) === 'sleep')
        ? done(kids)
        : pending(kids.join(','));
    },
    { timeoutMs: 20_000, what: 'both ranks of the fake mpirun' },
  );
  return { starter, ranks };
}

const SERVE = `
import { loadConfig } from '@mqd/server';
import { serveWithLocalAgent } from ${JSON.stringify(LOCAL_SERVE)};
const cfg = loadConfig({
  env: process.env,
  argv: ['--watch', 'on', '--watch-period', '1', '--watch-stop-budget', '3600000', '--watch-programs', process.argv[2]],
  overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: process.argv[1] },
});
if (!cfg.ok) throw new Error(cfg.error.message);
const local = await serveWithLocalAgent(cfg.value);
process.stdout.write('URL ' + local.served.url + '\\n');
`;

interface ApiJobRow {
  readonly id: string;
  readonly uid: number;
  readonly starterPid: number;
  readonly endedAt: string | null;
  readonly method: string;
}

/** A victim's job: its starter's pid (its group's leader) and its ranks' pids. */
export interface VictimJob {
  readonly starter: number;
  readonly ranks: readonly number[];
  /** The program it runs when that is not in the scene's directory (the watch's scope). */
  readonly program?: string;
}

/** The whole attack against the victim `startVictim` starts (in `dir`, world-readable). */
export async function floodAgainst(startVictim: (dir: string) => Promise<VictimJob>): Promise<void> {
  const dir = mkdtempSync('/tmp/mqd-flood-');
  dirs.push(dir);
  chmodSync(dir, 0o755);
  symlinkSync('/bin/sh', join(dir, 'mpirun'));
  // The jobs at pids named 9xxx, the flood later at 1xxx-2xxx (when the kernel lets root say
  // where pids go): the flood comes first in /proc order, as the attack had it.
  const ordered = nextPidsFrom(9000);
  const root = await fakeStarterJob(dir);
  const victim = await startVictim(dir);
  const started: { pid: number; startTime: string }[] = [];
  const pin = (pids: readonly number[]) => {
    for (const pid of pids) {
      const startTime = procStartTime(pid);
      if (startTime !== null) started.push({ pid, startTime });
    }
  };
  pin([root.starter, ...root.ranks, victim.starter, ...victim.ranks]);

  const server = spawn(
    process.execPath,
    // The watch samples only this scene's jobs: its fake mpirun's directory and the victim's program.
    [
      ...['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', SERVE, ADMIN],
      [`${dir}/`, ...(victim.program === undefined ? [] : [victim.program])].join(','),
    ],
    { cwd: CLI_DIR, env: { PATH, HOME: '/tmp' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  if (server.pid !== undefined) groups.push(server.pid);
  let flood: number[] = [];
  let log = '';
  server.stdout?.on('data', (x: Buffer) => {
    log += x.toString();
  });
  server.stderr?.on('data', (x: Buffer) => {
    log += x.toString();
  });
  try {
    const url = await waitFor(
      () => {
        const m = /^URL (http:\/\/127\.0\.0\.1:\d+)$/m.exec(log);
        if (m?.[1]) return done(m[1]);
        if (server.exitCode !== null) throw new Error(`mqd serve exited: ${log}`);
        return pending('not listening yet');
      },
      { timeoutMs: 60_000, what: 'mqd serve to listen' },
    );
    const api = async (path: string, method = 'GET') => {
      const r = await fetch(url + path, { method, headers: { authorization: `Bearer ${ADMIN}` } });
      return { status: r.status, text: await r.text() };
    };
    const jobs = async (): Promise<ApiJobRow[]> => {
      const r = await api('/api/jobs');
      if (r.status !== 200) throw new Error(r.text);
      return (JSON.parse(r.text) as { jobs: ApiJobRow[] }).jobs.filter((j) => j.method === 'discovered');
    };
    const samples = async (): Promise<number> => {
      const text = (await api('/metrics')).text;
      return Number(/^mqd_watch_samples_total (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const live = (all: readonly ApiJobRow[], uid: number, starter: number) =>
      all.find((j) => j.uid === uid && j.starterPid === starter && j.endedAt === null);
    await waitFor(
      async () => {
        const all = await jobs();
        return live(all, 0, root.starter) && live(all, VICTIM, victim.starter)
          ? done(true)
          : pending(JSON.stringify(all.map((j) => [j.uid, j.starterPid, j.endedAt])));
      },
      { timeoutMs: 60_000, what: "root's and the victim's jobs to be registered" },
    );

    // The flood: one shell of uid 65534 starting 1,100 look-alike ranks (opted out of the
    // watch's stops, so the machine's two cores are not spent stopping them; discovery lists
    // and registers them the same). The rank variable is the shell's own, so each child names
    // a rank and maps libmpi from its fork on (no scan sees it half-started).
    if (ordered) nextPidsFrom(1000);
    const sh = run(
      ['sh', '-c', `i=0; while [ $i -lt ${FLOOD} ]; do sleep 600 & i=$((i+1)); done; wait`],
      { MQD_WATCH: 'off', OMPI_COMM_WORLD_RANK: '0' },
      FLOODER,
    );
    const shPid = await waitFor(() => (commOf(sh.pid ?? 0) === 'sh' ? done(sh.pid ?? 0) : pending('')), {
      timeoutMs: 20_000,
      what: 'the flooding shell',
    });
    flood = await waitFor(
      () => {
        const kids = childrenOf(shPid);
        const execd = kids.filter((p) => commOf(p) === 'sleep');
        return execd.length === FLOOD ? done(execd) : pending(`${execd.length} of ${FLOOD} sleeping`);
      },
      { timeoutMs: 120_000, what: 'the flood to start' },
    );
    pin([shPid, ...flood]);
    if (ordered) {
      // The flood is first in /proc order: a cut in that order would leave both jobs out.
      const procOrder = readdirSync('/proc').filter((n) => /^\d+$/.test(n));
      const at = (p: number) => procOrder.indexOf(String(p));
      const first = Math.min(...[...root.ranks, ...victim.ranks, root.starter, victim.starter].map(at));
      expect(flood.filter((p) => at(p) >= 0 && at(p) < first).length).toBeGreaterThan(1024);
    }

    // Both jobs live at every look, else the test ends there.
    const bothLive = async (): Promise<ApiJobRow[]> => {
      const all = await jobs();
      if (!live(all, 0, root.starter) || !live(all, VICTIM, victim.starter))
        throw new Error(
          `a job ended under the flood: ${JSON.stringify(all.filter((j) => j.uid !== FLOODER).map((j) => [j.uid, j.starterPid, j.endedAt]))}`,
        );
      return all;
    };
    // The watch has seen the flood (a job of uid 65534 registered), then several rounds pass
    // (at least 10: root's and the victim's jobs each sampled once a round; the agent reports
    // every 10 s).
    await waitFor(
      async () => ((await bothLive()).some((j) => j.uid === FLOODER) ? done(true) : pending('none yet')),
      { timeoutMs: 120_000, what: 'a job of the flood registered' },
    );
    const before = await samples();
    await waitFor(
      async () => {
        await bothLive();
        const n = await samples();
        return n >= before + 20 ? done(n) : pending(`${n - before} samples since the flood`);
      },
      { timeoutMs: 120_000, what: 'watch rounds under the flood' },
    );
    const all = await jobs();
    expect(live(all, 0, root.starter), "root's job").toBeDefined();
    expect(live(all, VICTIM, victim.starter), "the victim's job").toBeDefined();
    const mine = all.filter((j) => j.uid === FLOODER);
    expect(mine.filter((j) => j.endedAt === null).length).toBeLessThanOrEqual(MAX_LIVE_JOBS_PER_UID);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.length).toBeLessThanOrEqual(MAX_REGISTRATIONS_PER_UID_HOUR);
    expect(log).toMatch(new RegExp(`uid ${FLOODER}: \\d+ discovered jobs not registered`));
    // The agent said what its report left out, per uid.
    expect(log).toMatch(/discovery left jobs out of its report[^\n]*of uid 65534/);
    // Snapshots of both jobs are taken, not refused as ended.
    for (const j of [live(all, 0, root.starter), live(all, VICTIM, victim.starter)]) {
      const r = await api(`/api/jobs/${j?.id}/snapshots`, 'POST');
      expect(r.status, r.text).not.toBe(410);
      expect(r.text).not.toContain('MQD_E_JOB_ENDED');
    }
  } finally {
    killAll();
  }
  // Nothing this test started is left: no pid of it runs with the start time it had.
  await waitFor(
    () => {
      const left = started.filter(({ pid, startTime }) => {
        const st = readProcStat(pid);
        return st !== null && st.startTime === startTime && st.state !== 'Z' && st.state !== 'X';
      });
      return left.length === 0
        ? done(true)
        : pending(`${left.length} left: ${left.slice(0, 5).map((x) => x.pid)}`);
    },
    { timeoutMs: 30_000, what: 'every process of the test to be gone' },
  );
}
