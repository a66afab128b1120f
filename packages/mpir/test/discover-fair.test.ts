// discoverNode's caps on a synthetic /proc table (ProcSource): one uid's 1,100 look-alike ranks
// listed first in /proc order cannot push another uid's job or root's out of the report; each
// uid keeps its oldest jobs scan after scan; a report cut at a cap says so, per uid; a /proc
// that cannot be listed is an incomplete report, never an empty complete one.
import { describe, expect, it } from 'vitest';
import {
  DISCOVERY_LIMITS,
  DiscoveryCache,
  discoverNode,
  fairShare,
  type Proc,
  type ProcSource,
} from '../src/index.js';

const FLOODER = 65534;
const VICTIM = 1000;

interface FakeProc extends Proc {
  readonly uid: number;
  readonly env: Record<string, string>;
  readonly mpi: boolean;
  readonly cmdline: string;
}

/** A ProcSource over a fixed table (what /proc would show), in the table's order. */
function table(procs: readonly FakeProc[]): ProcSource & { maps: number } {
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const src = {
    maps: 0,
    list: () => procs,
    environ: (pid: number) => {
      const p = byPid.get(pid);
      return p === undefined ? null : new Map(Object.entries(p.env));
    },
    mapsMpi: (pid: number) => {
      src.maps++;
      return byPid.get(pid)?.mpi ?? null;
    },
    uid: (pid: number) => byPid.get(pid)?.uid ?? null,
    cmdline: (pid: number) => byPid.get(pid)?.cmdline ?? null,
  };
  return src;
}

const proc = (
  pid: number,
  ppid: number,
  comm: string,
  uid: number,
  start: number,
  rank?: number,
): FakeProc => ({
  pid,
  ppid,
  comm,
  startTime: String(start),
  uid,
  env: rank === undefined ? {} : { OMPI_COMM_WORLD_RANK: String(rank), OMPI_COMM_WORLD_SIZE: '2' },
  mpi: rank !== undefined,
  cmdline: `${comm}\0-x\0`,
});

/**
 * The attack's node: the flooder's shell (pid 100) and its 1,100 `sleep`s (pids 101..1200, each
 * a job of its own), listed before a victim's mpirun job (uid 1000) and root's, which started
 * later (the flood cannot be older than what it wants pushed out, but it comes first in /proc).
 */
function floodedNode(): FakeProc[] {
  const procs: FakeProc[] = [proc(1, 0, 'init', 0, 1), proc(100, 1, 'sh', FLOODER, 10)];
  for (let i = 0; i < 1100; i++) procs.push(proc(101 + i, 100, 'sleep', FLOODER, 20 + i, 0));
  procs.push(proc(5000, 1, 'mpirun', VICTIM, 5000), proc(5001, 5000, 'ring', VICTIM, 5001, 0));
  procs.push(proc(5002, 5000, 'ring', VICTIM, 5002, 1));
  procs.push(proc(6000, 1, 'mpirun', 0, 6000), proc(6001, 6000, 'ring', 0, 6001, 0));
  procs.push(proc(6002, 6000, 'ring', 0, 6002, 1));
  return procs;
}

describe('discoverNode: caps per uid before the node cap', () => {
  it('keeps the victim and root jobs under a 1,100-process flood, says what it left out per uid', () => {
    const fs = table(floodedNode());
    const scan = discoverNode({ host: 'n1', procfs: fs });
    const victim = scan.jobs.find((j) => j.uid === VICTIM);
    const root = scan.jobs.find((j) => j.uid === 0);
    expect(victim).toMatchObject({ key: 'starter:n1:5000:5000', starterPid: 5000 });
    expect(victim?.ranks.map((r) => r.pid)).toEqual([5001, 5002]);
    expect(root).toMatchObject({ key: 'starter:n1:6000:6000', starterPid: 6000 });
    const flood = scan.jobs.filter((j) => j.uid === FLOODER);
    expect(flood).toHaveLength(DISCOVERY_LIMITS.jobsPerUid);
    // The flooder's oldest: the same ones every scan, so the report does not churn.
    expect(flood.map((j) => j.starterPid)).toEqual(
      Array.from({ length: DISCOVERY_LIMITS.jobsPerUid }, (_, i) => 101 + i),
    );
    expect(scan.complete).toBe(false);
    expect(scan.omitted).toEqual([{ uid: FLOODER, jobs: 1100 - DISCOVERY_LIMITS.jobsPerUid }]);
    // A prefix of the list is fair too (the agent may cut it for its message size): uid order,
    // one job of each uid in turn.
    expect(scan.jobs.slice(0, 3).map((j) => j.uid)).toEqual([0, VICTIM, FLOODER]);
  });

  it('shares the node cap between uids: small uids keep all, the floods split the rest', () => {
    const procs = floodedNode();
    // A second flooder (uid 2000) with as many processes.
    for (let i = 0; i < 1100; i++) procs.push(proc(10_000 + i, 100, 'sleep', 2000, 9000 + i, 0));
    const scan = discoverNode({ host: 'n1', procfs: table(procs), limits: { jobs: 10, jobsPerUid: 8 } });
    const count = (uid: number) => scan.jobs.filter((j) => j.uid === uid).length;
    expect([count(0), count(VICTIM), count(2000), count(FLOODER)]).toEqual([1, 1, 4, 4]);
    expect(scan.omitted).toEqual([
      { uid: 2000, jobs: 1096 },
      { uid: FLOODER, jobs: 1096 },
    ]);
  });

  it('is complete under the caps; a /proc that cannot be listed is incomplete', () => {
    const procs = floodedNode().filter((p) => p.uid !== FLOODER || p.pid < 105);
    const cache = new DiscoveryCache();
    const fs = table(procs);
    const scan = discoverNode({ host: 'n1', procfs: fs, cache });
    expect(scan).toMatchObject({ complete: true, omitted: [] });
    expect(scan.jobs).toHaveLength(2 + 4);
    const maps = fs.maps;
    expect(discoverNode({ host: 'n1', procfs: fs, cache }).jobs).toEqual(scan.jobs);
    expect(fs.maps).toBe(maps); // a steady node: no maps read again
    const lines: string[] = [];
    const broken: ProcSource = { ...fs, list: () => null };
    expect(discoverNode({ host: 'n1', procfs: broken, log: (l) => lines.push(l) })).toEqual({
      jobs: [],
      complete: false,
      omitted: [],
    });
    expect(lines.join('\n')).toMatch(/could not be listed/);
  });
});

describe('fairShare', () => {
  const c = (uid: number, start: number) => ({ uid, start: BigInt(start), pid: start });
  it('gives what is left by small uids to the others, lowest uid first on a remainder', () => {
    const cands = [c(5, 1), c(5, 2), c(5, 3), c(5, 4), c(3, 9), c(3, 8), c(3, 7), c(1, 5)];
    const r = fairShare(cands, { jobs: 6, jobsPerUid: 100 });
    // uid 1 wants 1 (gets it), 5 left for uids 3 and 5: 3 to uid 3, 2 to uid 5.
    expect(r.kept.map((x) => [x.uid, Number(x.start)])).toEqual([
      [1, 5],
      [3, 7],
      [5, 1],
      [3, 8],
      [5, 2],
      [3, 9],
    ]);
    expect(r.omitted).toEqual([{ uid: 5, jobs: 2 }]);
    expect(fairShare(cands, { jobs: 0, jobsPerUid: 1 }).kept).toEqual([]);
    expect(fairShare([], { jobs: 10, jobsPerUid: 1 })).toEqual({ kept: [], omitted: [] });
  });
});
