// The hang watch's controls attacked by a real unprivileged user: every "rank" here
// is a real process of uid 65534 (setpriv), `sleep` with Open MPI's libmpi.so preloaded (it maps
// an MPI library) and a rank variable in its environment, scanned by the real discovery
// (packages/mpir discoverJobs through apps/cli ProcJobDiscovery, as root) and watched by a real
// `mqd serve` (the sources, in a child process, its in-process agent, --watch on, period 1 s).
//
// 1. Spoofing: a user's process naming root's Slurm job id and rank 0, with MQD_WATCH=off, and a
//    user's rank under root's starter, are entries of their own (uid 65534), never merged into
//    root's job and never changing its watch mode; root's jobs are still sampled; the user's
//    entries are never stopped.
// 2. Hostile environments and names: megabytes of environment, entries without '=', invalid
//    UTF-8, C0 and C1 control characters, a 1 MB command line, a comm with a newline and ')',
//    SLURM_JOB_ID `1;rm -rf /`, a 10 kB partition, odd MQD_WATCH values: the scan finishes, ids
//    are digits only, texts are clipped and free of control characters, the status fits.
// 3. Races: ranks that exit or exec during repeated scans: no exception, no rank whose start
//    time is not its pid's.
// 4. Counters: another uid's pid, a root pid for a user's job, a reused start time are refused.
// 5. Fleet: a user token sees only its uid's entries and gets 403 on the watch policy; the
//    webhook URL (a secret) is in no API answer, log line or /metrics.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procStartTime } from '@mqd/core';
import type { ApiFleetJob, DiscoveredJob } from '@mqd/model';
import { discoverJobs, localHost, normaliseHost } from '@mqd/mpir';
import {
  type AgentHealth,
  DEFAULT_MAX_MESSAGE_BYTES,
  decodeAgentMessage,
  statusMessage,
} from '@mqd/server/agent';
import { done, mpiPrefix, pending, waitFor } from '@mqd/testkit';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProcJobDiscovery } from '../src/real-discovery.js';

const NOBODY = 65534;
const host = localHost().short;
const ADMIN = 'watch-attack-admin-token-0123456789abcdef';
const HOOK_SECRET = 'T000/B000/hook-secret-4f1c9a7e';
const HOOK = `http://127.0.0.1:9/services/${HOOK_SECRET}?token=${HOOK_SECRET}`;
const LOCAL_SERVE = fileURLToPath(new URL('../src/local-serve.ts', import.meta.url));
const CLI_DIR = fileURLToPath(new URL('..', import.meta.url));
const SETPRIV = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'];

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) {
    try {
      process.kill(-(c.pid ?? 0), 'SIGKILL'); // its own group: a shell's children go too
    } catch {
      // gone already
    }
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const libmpi = () => join(mpiPrefix('openmpi'), 'lib', 'libmpi.so');
const PATH = process.env['PATH'] ?? '/usr/bin:/bin';

function tempDir(prefix: string): string {
  const d = mkdtempSync(`/tmp/${prefix}`);
  chmodSync(d, 0o755);
  dirs.push(d);
  return d;
}

/** `argv` as a process of its own group (root, or uid 65534 with `nobody`), libmpi preloaded. */
function run(
  argv: readonly string[],
  env: Record<string, string>,
  o: { nobody?: boolean } = {},
): ChildProcess {
  const cmd = o.nobody ? [...SETPRIV, ...argv] : [...argv];
  const c = spawn(cmd[0] ?? 'false', cmd.slice(1), {
    env: { PATH, LD_PRELOAD: libmpi(), ...env },
    stdio: 'ignore',
    detached: true,
  });
  children.push(c);
  return c;
}

function commOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'latin1').replace(/\n$/, '');
  } catch {
    return null;
  }
}

/** Waits until `pid` runs `comm` (its exec done, the environment in place). */
function execd(c: ChildProcess, comm = 'sleep'): Promise<number> {
  const pid = c.pid ?? 0;
  return waitFor(() => (commOf(pid) === comm ? done(pid) : pending(`pid ${pid} runs ${commOf(pid)}`)), {
    timeoutMs: 20_000,
    what: `pid ${pid} to exec ${JSON.stringify(comm)}`,
  });
}

const entry = (jobs: readonly DiscoveredJob[], pid: number) =>
  jobs.filter((j) => j.ranks.some((r) => r.pid === pid));
const shape = (j: DiscoveredJob) => ({
  key: j.key,
  uid: j.uid,
  watch: j.watch,
  ranks: j.ranks.map((r) => [r.rank, r.pid, r.startTime]),
});

/** Tracer or stop seen in /proc/PID/status (the watcher must never stop an opted-out entry). */
function stoppedOrTraced(pid: number): string | null {
  let st: string;
  try {
    st = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const state = /^State:\s+(\S)/m.exec(st)?.[1] ?? '';
  const tracer = /^TracerPid:\s+(\d+)/m.exec(st)?.[1] ?? '0';
  return state === 't' || state === 'T' || tracer !== '0'
    ? `pid ${pid}: state ${state}, tracer ${tracer}`
    : null;
}

interface Scene {
  /** The scene's directory: its fake `mpirun` and `sleep` (the watch's scope). */
  readonly dir: string;
  /** Root's fake Slurm rank 0 of job 4811. */
  readonly rootSlurm: number;
  /** uid 65534: rank 0 of "Slurm job 4811" with MQD_WATCH=off. */
  readonly spoofSlurm: number;
  /** Root's `mpirun` and its root rank 0. */
  readonly rootStarter: number;
  readonly rootRank: number;
  /** uid 65534 rank 1 under root's mpirun, MQD_WATCH=off. */
  readonly spoofChild: number;
  /** uid 65534's own `mpirun` whose environment names root's starter, and its rank. */
  readonly ownStarter: number;
  readonly ownRank: number;
}

/** Root's two jobs and the user's spoofs around them. */
async function scene(): Promise<Scene> {
  const dir = tempDir('mqd-watch-attack-');
  symlinkSync('/bin/sh', join(dir, 'mpirun'));
  symlinkSync('/bin/sleep', join(dir, 'sleep'));
  const rootSlurm = await execd(
    run([join(dir, 'sleep'), '600'], {
      SLURM_JOB_ID: '4811',
      PMI_RANK: '0',
      PMI_SIZE: '2',
      SLURM_JOB_PARTITION: 'batch',
    }),
  );
  const spoofSlurm = await execd(
    run(
      ['sleep', '600'],
      {
        SLURM_JOB_ID: '4811',
        SLURM_JOBID: '4811',
        SLURM_STEP_ID: '0',
        PMI_RANK: '0',
        PMI_SIZE: '2',
        SLURM_JOB_PARTITION: 'batch',
        SLURM_JOB_USER: 'root',
        SLURM_JOB_UID: '0',
        MQD_WATCH: 'off',
      },
      { nobody: true },
    ),
  );
  // Root's mpirun starts rank 0 as root and rank 1 as uid 65534 (opted out): the user's rank
  // is in root's starter's process tree.
  const script =
    'OMPI_COMM_WORLD_RANK=0 sleep 600 & ' +
    `MQD_WATCH=off OMPI_COMM_WORLD_RANK=1 ${SETPRIV.join(' ')} sleep 600 & wait`;
  const starter = run([join(dir, 'mpirun'), '-c', script], { OMPI_COMM_WORLD_SIZE: '2' });
  const rootStarter = await execd(starter, 'mpirun');
  const kids = await waitFor(
    () => {
      const c = readFileSync(`/proc/${rootStarter}/task/${rootStarter}/children`, 'utf8').trim().split(/\s+/);
      const pids = c.filter((x) => x !== '').map(Number);
      return pids.length === 2 && pids.every((p) => commOf(p) === 'sleep')
        ? done(pids)
        : pending(c.join(','));
    },
    { timeoutMs: 20_000, what: "root's mpirun to start both ranks" },
  );
  const uidOf = (p: number) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1]);
  const rootRank = kids.find((p) => uidOf(p) === 0) ?? -1;
  const spoofChild = kids.find((p) => uidOf(p) === NOBODY) ?? -1;
  // The user's own mpirun, its environment naming root's starter as if it were its server.
  const own = run(
    [join(dir, 'mpirun'), '-c', 'OMPI_COMM_WORLD_RANK=0 sleep 600 & wait'],
    {
      OMPI_COMM_WORLD_SIZE: '2',
      PMIX_SERVER_URI41: `prterun-${host}-${rootStarter}@0.0;tcp4://127.0.0.1:1`,
      OMPI_MCA_orte_hnp_uri: `${rootStarter}.0;tcp://127.0.0.1:1`,
      PMIX_NAMESPACE: `prterun-${host}-${rootStarter}@1`,
      MQD_WATCH: 'off',
    },
    { nobody: true },
  );
  const ownStarter = await execd(own, 'mpirun');
  const ownRank = await waitFor(
    () => {
      const c = readFileSync(`/proc/${ownStarter}/task/${ownStarter}/children`, 'utf8').trim();
      return c !== '' && commOf(Number(c)) === 'sleep' ? done(Number(c)) : pending(c);
    },
    { timeoutMs: 20_000, what: "the user's mpirun to start its rank" },
  );
  return { dir, rootSlurm, spoofSlurm, rootStarter, rootRank, spoofChild, ownStarter, ownRank };
}

beforeAll(() => {
  expect(process.getuid?.()).toBe(0);
});

describe('spoofed membership (uid 65534 against root)', () => {
  it("a user's process naming root's Slurm job or living under root's starter is an entry of its own and never turns root's watch off", async () => {
    const s = await scene();
    const st = (p: number) => procStartTime(p) ?? '?';
    for (const jobs of [
      discoverJobs({ host }),
      await new ProcJobDiscovery(host, { slurm: null }).discover(),
    ]) {
      // Slurm job 4811: root's rank 0 alone in root's entry, watched; the spoof its own entry.
      expect(entry(jobs, s.rootSlurm).map(shape)).toEqual([
        { key: 'slurm:4811', uid: 0, watch: 'on', ranks: [[0, s.rootSlurm, st(s.rootSlurm)]] },
      ]);
      expect(entry(jobs, s.spoofSlurm).map(shape)).toEqual([
        { key: 'slurm:4811', uid: NOBODY, watch: 'off', ranks: [[0, s.spoofSlurm, st(s.spoofSlurm)]] },
      ]);
      // Root's mpirun: root's rank 0 in root's entry (watch on); the user's rank under it in an
      // entry of uid 65534 keyed by its own pid, not by root's mpirun.
      const rootKey = `starter:${host}:${s.rootStarter}:${st(s.rootStarter)}`;
      expect(entry(jobs, s.rootRank).map(shape)).toEqual([
        { key: rootKey, uid: 0, watch: 'on', ranks: [[0, s.rootRank, st(s.rootRank)]] },
      ]);
      const [child] = entry(jobs, s.spoofChild);
      expect(child && shape(child)).toEqual({
        key: `starter:${host}:${s.spoofChild}:${st(s.spoofChild)}`,
        uid: NOBODY,
        watch: 'off',
        ranks: [[1, s.spoofChild, st(s.spoofChild)]],
      });
      expect(child?.starterPid).toBe(s.spoofChild);
      // The user's own mpirun whose environment names root's starter: keyed by its own pid.
      expect(entry(jobs, s.ownRank).map(shape)).toEqual([
        {
          key: `starter:${host}:${s.ownStarter}:${st(s.ownStarter)}`,
          uid: NOBODY,
          watch: 'off',
          ranks: [[0, s.ownRank, st(s.ownRank)]],
        },
      ]);
      // Every entry has one uid, and every rank in it is a process of that uid.
      for (const j of jobs) {
        for (const r of j.ranks) {
          let status = ''; // another worker's rank may have ended since the scan
          try {
            status = readFileSync(`/proc/${r.pid}/status`, 'utf8');
          } catch {}
          const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
          if (uid !== undefined && procStartTime(r.pid) === r.startTime)
            expect(Number(uid), `${j.key} rank ${r.rank}`).toBe(j.uid);
        }
      }
    }
  });
});

// --- hostile environments and names --------------------------------------------------------

/** execve(PATH, argv from ARGV_FILE, env from ENV_FILE) byte for byte (NUL-separated files). */
const EXEC_AS_IS = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static char **load(const char *f) {
  FILE *fp = fopen(f, "rb");
  if (!fp) { perror(f); exit(2); }
  size_t cap = 1 << 20, n = 0, r;
  char *buf = malloc(cap);
  while ((r = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += r;
    if (n == cap) { cap *= 2; buf = realloc(buf, cap); }
  }
  fclose(fp);
  size_t count = 0, k = 0, start = 0;
  for (size_t i = 0; i < n; i++) if (buf[i] == 0) count++;
  char **v = calloc(count + 1, sizeof *v);
  for (size_t i = 0; i < n; i++) if (buf[i] == 0) { v[k++] = buf + start; start = i + 1; }
  v[k] = NULL;
  return v;
}
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  char **args = load(argv[2]);
  char **env = load(argv[3]);
  execve(argv[1], args, env);
  perror("execve");
  return 127;
}
`;

const b = (s: string) => Buffer.from(s, 'latin1');
const nulJoin = (parts: readonly Buffer[]) => Buffer.concat(parts.flatMap((p) => [p, Buffer.from([0])]));
/** C0, DEL and C1 control characters: no part of a clipped text. */
const controls = (t: string): string[] =>
  [...t].filter((ch) => {
    const c = ch.charCodeAt(0);
    return c < 0x20 || (c >= 0x7f && c <= 0x9f);
  });

describe('hostile environments and names (uid 65534)', () => {
  it('a scan over megabytes of garbage finishes; ids are digits only, texts clipped and control-free, the status fits', async () => {
    const dir = tempDir('mqd-watch-hostile-');
    const helper = join(dir, 'exec-as-is');
    execFileSync('cc', ['-O2', '-o', helper, '-x', 'c', '-'], { input: EXEC_AS_IS });
    chmodSync(helper, 0o755);
    // A comm with a newline, a ')' and an escape: /proc/PID/stat's name field is hostile.
    const weird = 'r\n) Z 1 (\u001b[2J';
    symlinkSync('/bin/sleep', join(dir, weird));
    const preload = b(`LD_PRELOAD=${libmpi()}`);
    let n = 0;
    const start = (exe: string, argv: readonly Buffer[], env: readonly Buffer[]): ChildProcess => {
      n++;
      const a = join(dir, `argv${n}`);
      const e = join(dir, `env${n}`);
      writeFileSync(a, nulJoin(argv), { mode: 0o644 });
      writeFileSync(e, nulJoin(env), { mode: 0o644 });
      return run([helper, exe, a, e], {}, { nobody: true });
    };
    const garbage = Buffer.from([
      0xff, 0xfe, 0xe2, 0x80, 0xae, 0xc2, 0x9b, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x0a, 0x85,
    ]);
    // A: a shell command as Slurm id, a 10 kB partition, invalid UTF-8 and C1 in the account.
    const a = await execd(
      start(
        '/bin/sleep',
        [b('sleep'), b('600')],
        [
          preload,
          b('OMPI_COMM_WORLD_RANK=0'),
          b('SLURM_JOB_ID=1;rm -rf /'),
          b(`SLURM_JOB_PARTITION=${'p'.repeat(10_000)}\u0007\u001b`),
          Buffer.concat([b('SLURM_JOB_ACCOUNT=acct'), garbage]),
          b('SLURM_JOB_NAME=line1\nline2\r\u001b]0;title\u0007'),
          b('MQD_WATCH=off;rm'),
        ],
      ),
    );
    // B: 1.4 MB of environment, entries without '=' or with no name, the rank named last.
    const big = Array.from({ length: 12 }, (_, i) => b(`BIG${i}=${'x'.repeat(120_000)}`));
    const bEnv = [
      preload,
      ...big,
      Buffer.concat([b('NOEQUALS'), garbage]),
      b('=no-name'),
      Buffer.concat([garbage, b('='), garbage]),
      b('SLURM_JOB_ID=\uff11\uff12'),
      b('MQD_WATCH= OFF '),
      b('OMPI_COMM_WORLD_RANK=0'),
    ];
    const bPid = await execd(start('/bin/sleep', [b('sleep'), b('600')], bEnv));
    // C: a 1 MB command line (argv[0] 100 kB of escapes and invalid UTF-8), the weird comm, a
    // 21-digit Slurm id, MQD_WATCH "of".
    const argv0 = Buffer.concat(Array.from({ length: 7000 }, () => garbage));
    const cArgv = [argv0, b('600'), ...Array.from({ length: 50_000 }, () => b('0'))];
    const c = await execd(
      start(join(dir, weird), cArgv, [
        preload,
        b('PMI_RANK=0'),
        b('PMI_SIZE=99999999999'),
        b('SLURM_JOB_ID=123456789012345678901'),
        b('MQD_WATCH=of'),
      ]),
      weird,
    );
    // D: a 20-digit Slurm id (the longest kept), a rank beyond int32 (no rank: not listed).
    const d = await execd(
      start(
        '/bin/sleep',
        [b('sleep'), b('600')],
        [preload, b('SLURM_JOB_ID=12345678901234567890'), b('PMI_RANK=0')],
      ),
    );
    const e = await execd(start('/bin/sleep', [b('sleep'), b('600')], [preload, b('PMI_RANK=2147483648')]));

    const discovery = new ProcJobDiscovery(host, { slurm: null });
    const jobs = await discovery.discover();
    const one = (pid: number) => {
      const found = entry(jobs, pid);
      expect(found, `pid ${pid}`).toHaveLength(1);
      return found[0] as DiscoveredJob;
    };
    const ja = one(a);
    expect(ja).toMatchObject({
      kind: 'starter',
      key: `starter:${host}:${a}:${procStartTime(a)}`,
      uid: NOBODY,
    });
    expect(ja.slurmJob).toBeUndefined();
    expect(ja.watch).toBe('on'); // "off;rm" is no opt-out
    expect(ja.partition).toMatch(/^p{127}…$/);
    expect(ja.account?.startsWith('acct')).toBe(true);
    expect(ja.jobName).toBe('line1line2]0;title');
    const jb = one(bPid);
    expect(jb).toMatchObject({ kind: 'starter', uid: NOBODY, watch: 'off' }); // " OFF " trimmed
    const jc = one(c);
    expect(jc).toMatchObject({ kind: 'starter', uid: NOBODY, watch: 'on' });
    expect(jc.slurmJob).toBeUndefined();
    expect(jc.worldSize).toBeUndefined();
    expect(jc.command).toHaveLength(4096);
    expect(one(d)).toMatchObject({
      kind: 'slurm',
      key: 'slurm:12345678901234567890',
      slurmJob: '12345678901234567890',
    });
    expect(entry(jobs, e)).toEqual([]);
    for (const j of jobs) {
      expect(j.key).toMatch(/^(slurm:\d{1,20}|starter:[^:]+:\d+:\d+)$/);
      if (j.slurmJob !== undefined) expect(j.slurmJob).toMatch(/^\d{1,20}$/);
      expect(j.command.length).toBeLessThanOrEqual(4096);
      for (const t of [j.command, j.jobName, j.partition, j.account]) {
        if (t === undefined) continue;
        expect(controls(t), JSON.stringify(t.slice(0, 200))).toEqual([]);
      }
      for (const t of [j.jobName, j.partition, j.account]) expect((t ?? '').length).toBeLessThanOrEqual(128);
    }
    // The agent's status message with these entries fits and decodes.
    const health: AgentHealth = {
      rssBytes: 1,
      heapUsedBytes: 1,
      uptimeSeconds: 1,
      loadAverage1m: 0,
      activeRequests: 0,
      lastError: null,
    };
    const msg = statusMessage(health, null, [], DEFAULT_MAX_MESSAGE_BYTES, jobs);
    expect(msg.bytes.byteLength).toBeLessThanOrEqual(DEFAULT_MAX_MESSAGE_BYTES);
    expect(msg.omittedDiscovered).toBe(0);
    const decoded = decodeAgentMessage(msg.bytes, DEFAULT_MAX_MESSAGE_BYTES);
    expect(decoded.ok && decoded.value.type === 'status' && decoded.value.discovered.length).toBe(
      jobs.length,
    );
    // Counters of the hostile ranks read as for any rank.
    const counted = await discovery.counters({
      ownerUid: NOBODY,
      ranks: [a, bPid, c].map((pid, rank) => ({ rank, pid, startTime: procStartTime(pid) ?? '' })),
    });
    expect(counted.errors).toEqual([]);
    expect(counted.ranks.map((r) => r.rank)).toEqual([0, 1, 2]);
  });
});

// --- races ---------------------------------------------------------------------------------

describe('ranks that exit or exec during the scans', () => {
  it('repeated scans over short-lived and exec-ing uid-65534 ranks never throw nor report a pid with another start time', async () => {
    const discovery = new ProcJobDiscovery(host, { slurm: null });
    let seen = 0;
    const durations = ['0.01', '0.03', '0.05', '0.1', '0.2'];
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 6; i++) {
        const t = durations[(round + i) % durations.length] ?? '0.05';
        if (i % 3 === 0) {
          // Names a rank, then execs into a process without one (and then exits).
          run(
            ['sh', '-c', `sleep ${t}; exec env -u OMPI_COMM_WORLD_RANK sleep ${t}`],
            { OMPI_COMM_WORLD_RANK: String(i) },
            { nobody: true },
          );
        } else {
          run(
            ['sleep', t],
            { OMPI_COMM_WORLD_RANK: String(i), SLURM_JOB_ID: i % 2 ? '777' : '' },
            { nobody: true },
          );
        }
      }
      const jobs = await discovery.discover();
      for (const j of jobs) {
        for (const r of j.ranks) {
          seen++;
          const now = procStartTime(r.pid);
          // Gone by now is fine; alive, it must be the process that was scanned.
          if (now !== null) expect(now, `${j.key} rank ${r.rank} pid ${r.pid}`).toBe(r.startTime);
        }
      }
      const mine = jobs.filter((j) => j.uid === NOBODY);
      const counted = await discovery.counters({
        ownerUid: NOBODY,
        ranks: mine.flatMap((j) => j.ranks).slice(0, 64),
      });
      for (const x of counted.errors)
        expect(['MQD_E_PID_EXITED', 'MQD_E_NO_SUCH_PID', 'MQD_E_ZOMBIE', 'MQD_E_PID_REUSED']).toContain(
          x.error.code,
        );
    }
    expect(seen).toBeGreaterThan(0);
  });
});

// --- counters --------------------------------------------------------------------------------

describe("counters of other uids' pids", () => {
  it("refuses another uid's pid, a user's pid for a root job, pid 1 for a user job and a reused start time", async () => {
    const mine = await execd(run(['sleep', '600'], { OMPI_COMM_WORLD_RANK: '0' }, { nobody: true }));
    const roots = await execd(run(['sleep', '600'], { OMPI_COMM_WORLD_RANK: '1' }));
    const discovery = new ProcJobDiscovery(host, { slurm: null });
    const at = (pid: number, rank: number, startTime = procStartTime(pid) ?? '') => ({
      rank,
      pid,
      startTime,
    });
    const user = await discovery.counters({
      ownerUid: NOBODY,
      ranks: [at(mine, 0), at(roots, 1), at(1, 2), at(process.pid, 3), at(mine, 4, '1')],
    });
    expect(user.ranks.map((r) => r.rank)).toEqual([0]);
    expect(user.errors.map((x) => [x.rank, x.error.code])).toEqual([
      [1, expect.stringMatching(/^MQD_E_(FOREIGN|ROOT)_PROCESS$/)],
      [2, expect.stringMatching(/^MQD_E_(FOREIGN|ROOT)_PROCESS$/)],
      [3, expect.stringMatching(/^MQD_E_(FOREIGN|ROOT)_PROCESS$/)],
      [4, 'MQD_E_PID_REUSED'],
    ]);
    // A root job's counters may read root's ranks, never a user's pid claimed as one of them.
    const root = await discovery.counters({ ownerUid: 0, ranks: [at(roots, 0), at(mine, 1)] });
    expect(root.ranks.map((r) => r.rank)).toEqual([0]);
    expect(root.errors.map((x) => [x.rank, x.error.code])).toEqual([[1, 'MQD_E_FOREIGN_PROCESS']]);
    expect([mine, roots].map(stoppedOrTraced)).toEqual([null, null]);
  });
});

// --- a real aggregator: fleet visibility, the watch of root's jobs, the webhook secret ----------

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

/** Runs a request script as uid 65534 (setpriv): the attacker's own HTTP client. */
function asAttacker(script: string, args: readonly string[]): unknown {
  const dir = tempDir('mqd-watch-client-');
  const file = join(dir, 'client.mjs');
  writeFileSync(file, script, { mode: 0o644 });
  const out = execFileSync('setpriv', [...SETPRIV.slice(1), process.execPath, file, ...args], {
    encoding: 'utf8',
    env: { PATH, HOME: '/tmp' },
    timeout: 60_000,
  });
  return JSON.parse(out.trim().split('\n').pop() ?? 'null');
}

const CLIENT = `
const [url, token] = process.argv.slice(2);
const auth = { authorization: 'Bearer ' + token };
const fleet = await fetch(url + '/api/fleet', { headers: auth });
const policy = await fetch(url + '/api/admin/watch', { headers: auth });
const set = await fetch(url + '/api/admin/watch', {
  method: 'POST',
  headers: { ...auth, 'content-type': 'application/json' },
  body: JSON.stringify({ enabled: false, periodSeconds: 60, users: [], partitions: [], accounts: [], stopBudgetMsPerRankHour: 0, hungAfterSamples: 2 }),
});
const metrics = await fetch(url + '/metrics', { headers: auth });
console.log(JSON.stringify({ uid: process.getuid(), fleet: fleet.status, jobs: (await fleet.json()).jobs, policy: policy.status, policyBody: await policy.text(), set: set.status, setBody: await set.text(), metrics: metrics.status }));
`;

describe('a real mqd serve watching the spoofed node', () => {
  it("watches root's jobs, never stops the user's opted-out entries, shows a user only its uid, keeps the webhook secret", async () => {
    const s = await scene();
    // The watch samples only the scene's programs: other jobs on the machine are not the test's.
    const server = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', SERVE, ADMIN, `${s.dir}/`],
      {
        cwd: CLI_DIR,
        env: { PATH, HOME: '/tmp', MQD_WATCH_WEBHOOKS: HOOK },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      },
    );
    children.push(server);
    let log = '';
    server.stdout?.on('data', (x: Buffer) => {
      log += x.toString();
    });
    server.stderr?.on('data', (x: Buffer) => {
      log += x.toString();
    });
    const url = await waitFor(
      () => {
        const m = /^URL (http:\/\/127\.0\.0\.1:\d+)$/m.exec(log);
        if (m?.[1]) return done(m[1]);
        if (server.exitCode !== null) throw new Error(`mqd serve exited: ${log}`);
        return pending('not listening yet');
      },
      { timeoutMs: 60_000, what: 'mqd serve to listen' },
    );
    const api = async (path: string, init: RequestInit = {}, token = ADMIN) => {
      const r = await fetch(url + path, {
        ...init,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      });
      return { status: r.status, text: await r.text() };
    };
    const spoofs = [s.spoofSlurm, s.spoofChild, s.ownRank];
    const stops: string[] = [];
    const rootKey = `starter:${normaliseHost(host)}:${s.rootStarter}:${procStartTime(s.rootStarter)}`;
    const find = (jobs: readonly ApiFleetJob[], key: string, uid: number) =>
      jobs.find(
        (j) =>
          j.key.replace(/^starter:[^:]+:/, 'starter:x:') === key.replace(/^starter:[^:]+:/, 'starter:x:') &&
          j.uid === uid &&
          j.endedAt === null,
      );
    // Root's two jobs get sampled (watch on); the user's entries stay off-by-job with no sample.
    const jobs = await waitFor(
      async () => {
        for (const p of spoofs) {
          const x = stoppedOrTraced(p);
          if (x !== null) stops.push(x);
        }
        const r = await api('/api/fleet');
        if (r.status !== 200) throw new Error(r.text);
        const all = (JSON.parse(r.text) as { jobs: ApiFleetJob[] }).jobs;
        const rootSlurm = find(all, 'slurm:4811', 0);
        const rootStarter = find(all, rootKey, 0);
        return rootSlurm !== undefined &&
          rootSlurm.samples > 0 &&
          rootStarter !== undefined &&
          rootStarter.samples > 0
          ? done(all)
          : pending(JSON.stringify(all.map((j) => [j.key, j.uid, j.watch, j.samples])));
      },
      { timeoutMs: 90_000, what: "root's jobs to be sampled" },
    );
    expect(find(jobs, 'slurm:4811', 0)).toMatchObject({ watch: 'on', rankCount: 1 });
    expect(find(jobs, rootKey, 0)).toMatchObject({ watch: 'on', rankCount: 1 });
    const childKey = `starter:${host}:${s.spoofChild}:${procStartTime(s.spoofChild)}`;
    for (const key of ['slurm:4811', childKey]) {
      expect(find(jobs, key, NOBODY), key).toMatchObject({
        watch: 'off-by-job',
        samples: 0,
        stopMsThisHour: 0,
        rankCount: 1,
      });
    }
    for (const p of spoofs) {
      const x = stoppedOrTraced(p);
      if (x !== null) stops.push(x);
    }
    expect(stops).toEqual([]);

    // A user token of uid 65534, used from a process of uid 65534.
    const made = await api('/api/admin/users', {
      method: 'POST',
      body: JSON.stringify({ name: 'mallory', uid: NOBODY }),
    });
    expect(made.status, made.text).toBe(201);
    const { token } = JSON.parse(made.text) as { token: string };
    const u = asAttacker(CLIENT, [url, token]) as {
      uid: number;
      fleet: number;
      jobs: ApiFleetJob[];
      policy: number;
      policyBody: string;
      set: number;
      setBody: string;
      metrics: number;
    };
    expect(u.uid).toBe(NOBODY);
    expect(u.fleet).toBe(200);
    expect(u.jobs.length).toBeGreaterThanOrEqual(3);
    expect(new Set(u.jobs.map((j) => j.uid))).toEqual(new Set([NOBODY]));
    expect([u.policy, u.set]).toEqual([403, 403]);
    expect(u.metrics).not.toBe(200);
    // The refused POST changed nothing.
    const policy = await api('/api/admin/watch');
    expect(JSON.parse(policy.text)).toMatchObject({ enabled: true, periodSeconds: 1 });

    // The webhook URL is configuration only: in no answer, no log line, not in /metrics.
    const answers = [
      JSON.stringify(jobs),
      JSON.stringify(u),
      policy.text,
      (await api('/api/fleet')).text,
      (await api('/api/health')).text,
      (await api('/metrics')).text,
    ];
    expect(answers[5]).toMatch(/mqd_job_state/);
    for (const text of [...answers, log]) {
      expect(text).not.toContain(HOOK_SECRET);
      expect(text).not.toContain('127.0.0.1:9/');
    }
  });
});
