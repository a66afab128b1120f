import {
  type Frame,
  type JobSnapshot,
  type RankCounters,
  type RankSnapshot,
  syntheticProgressingPair,
  syntheticStacksJob,
  syntheticStuckPair,
  type ThreadStack,
  type WatchSample,
  watchVerdict,
  withUnreadableRanks,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { golden } from '../golden.js';

const PERIOD = 60_000;
const HZ = 100;
const opts = { hungAfterSamples: 3 };

const frame = (fn: string, line: number): Frame => ({
  pc: '0x401000',
  function: fn,
  module: '/home/user/app',
  file: 'app.c',
  line,
  inlined: false,
});
const thread = (tid: number, frames: Frame[]): ThreadStack => ({
  tid,
  name: 'app',
  main: true,
  frames,
  truncated: false,
  error: null,
});

/** The ranks of `snap` placed: in an MPI call (blocked) or outside MPI with these frames. */
function placed(snap: JobSnapshot, where: (rank: number) => string | Frame[]): JobSnapshot {
  return {
    ...snap,
    ranks: snap.ranks.map((r): RankSnapshot => {
      const w = where(r.rank);
      const tid = r.pid;
      if (typeof w === 'string') {
        return {
          ...r,
          threads: [thread(tid, [frame('poll', 0), frame(w, 0), frame('main', 20)])],
          mpiCall: { function: w, tid, args: null },
        };
      }
      return { ...r, threads: [thread(tid, w)], mpiCall: null };
    }),
  };
}

/** Samples PERIOD apart; counters(i, rank) gives the i-th sample's /proc counters of a rank. */
function series(
  snaps: readonly (JobSnapshot | null)[],
  counters: (i: number, rank: number) => Omit<RankCounters, 'rank'> = () => ({
    cpuTicks: 0,
    switches: 0,
    state: 'S',
  }),
  ranks = 4,
): WatchSample[] {
  return snaps.map((snapshot, i) => ({
    at: 1_800_000_000_000 + i * PERIOD,
    clockTicksPerSecond: HZ,
    snapshot,
    counters: Array.from({ length: ranks }, (_, rank) => ({ rank, ...counters(i, rank) })),
  }));
}

const ring = () => syntheticStacksJob({ ranks: 4, scenario: 'ssend-ring' });
/** Every rank blocked in MPI_Recv, the queues of a pipeline that never moves on. */
const stuck = () => placed(syntheticStuckPair({ ranks: 4 })[0], () => 'MPI_Recv');

describe('watchVerdict', () => {
  it('calls a proven deadlock hung on the second agreeing sample, naming the cycle', () => {
    expect(watchVerdict(series([ring()]), opts).state).toBe('unknown');
    const v = watchVerdict(series([ring(), ring()]), opts);
    expect(v.state).toBe('hung');
    expect(v.confidence).toBe('high');
    // Every rank is in the cycle: none is behind the others.
    expect(v.leastProgressedText).toBe('');
    expect(v.diagnosis).toMatch(/^Deadlock: /);
    expect(v.diagnosis).toContain('MPI_Ssend');
    expect(v.sinceIndex).toBe(0);
    expect(v.evidenceIndex).toBe(1);
  });

  it('names the least progressed ranks only where progress differs', () => {
    // wrong_tag: ranks 0-1 wait for each other, 2-3 wait behind them.
    const pair = golden('openmpi', 'wrong_tag');
    expect(watchVerdict(series([pair, pair]), opts).leastProgressedText).toBe('0-1');
    // collective_mismatch: ranks 0-2 in MPI_Barrier wait for rank 3, which never entered it.
    const barrier = golden('mpich', 'collective_mismatch');
    expect(watchVerdict(series([barrier, barrier]), opts).leastProgressedText).toBe('3');
  });

  it('needs hungAfterSamples samples when the snapshot proves nothing by itself', () => {
    const two = watchVerdict(series([stuck(), stuck()]), opts);
    expect(two.state).toBe('waiting');
    expect(two.reason).toContain('hung after 3');
    const three = watchVerdict(series([stuck(), stuck(), stuck()]), opts);
    expect(three.state).toBe('hung');
    expect(three.confidence).toBe('medium');
    expect(three.reason).toContain('over 3 samples');
  });

  it('sees computing: ranks outside MPI burning CPU, even with a rank in MPI', () => {
    const at = (line: number) =>
      placed(ring(), (r) => (r === 3 ? 'MPI_Recv' : [frame('kernel', line), frame('main', 30)]));
    const busy = (i: number) => ({ cpuTicks: i * 60 * HZ, switches: i, state: 'R' });
    const v = watchVerdict(series([at(10), at(11), at(12)], busy), opts);
    expect(v.state).toBe('computing');
    expect(v.sinceIndex).toBe(0);
    expect(v.leastProgressed).toEqual([]);
  });

  it('calls a rank spinning in MPI waiting, not computing', () => {
    const spinning = (i: number) => ({ cpuTicks: i * 60 * HZ, switches: 0, state: 'R' });
    const v = watchVerdict(series([stuck(), stuck()], spinning), opts);
    expect(v.state).toBe('waiting');
  });

  it('sees progress when the queues move', () => {
    const [a, b] = syntheticProgressingPair({ ranks: 4 });
    const v = watchVerdict(series([placed(a, () => 'MPI_Recv'), placed(b, () => 'MPI_Recv')]), opts);
    expect(v.state).toBe('progressing');
  });

  it('never calls a slow job hung while its sender outside MPI wakes up', () => {
    // Rank 0 sleeps between sends (outside MPI, the same stack every time); the others wait in MPI.
    const snap = placed(stuck(), (r) => (r === 0 ? [frame('nanosleep', 0), frame('main', 40)] : 'MPI_Recv'));
    const waking = (i: number, rank: number) => ({
      cpuTicks: i,
      switches: rank === 0 ? 3 * i : 0,
      state: 'S',
    });
    const snaps = Array.from({ length: 12 }, () => snap);
    for (let k = 2; k <= snaps.length; k++) {
      const v = watchVerdict(series(snaps.slice(0, k), waking), opts);
      expect(v.state, `after ${k} samples`).toBe('waiting');
    }
    const v = watchVerdict(series(snaps, waking), opts);
    expect(v.reason).toContain('outside MPI and may still send');
    expect(v.leastProgressedText).toBe('0');
  });

  it('calls it hung, with low confidence, once the rank outside MPI stops waking up', () => {
    const snap = placed(stuck(), (r) => (r === 0 ? [frame('read', 0), frame('main', 40)] : 'MPI_Recv'));
    const dead = () => ({ cpuTicks: 5, switches: 7, state: 'S' });
    const snaps = Array.from({ length: 5 }, () => snap);
    expect(watchVerdict(series(snaps.slice(0, 4), dead), opts).state).toBe('waiting');
    const v = watchVerdict(series(snaps, dead), opts);
    expect(v.state).toBe('hung');
    expect(v.confidence).toBe('low');
  });

  it('does not call a job hung while some ranks cannot be read', () => {
    const partial = withUnreadableRanks(stuck(), [2]);
    const v = watchVerdict(series([partial, partial, partial, partial]), opts);
    expect(v.state).toBe('waiting');
    expect(v.reason).toContain('could not be read');
  });

  it('skips samples without a stop, and says unknown until two samples stopped the ranks', () => {
    expect(watchVerdict(series([null, null]), opts).state).toBe('unknown');
    const v = watchVerdict(series([ring(), null, ring()]), opts);
    expect(v.state).toBe('hung');
    expect(v.evidenceIndex).toBe(2);
  });

  it('starts the run at the first still sample after the job last moved', () => {
    const [a, b] = syntheticProgressingPair({ ranks: 4 });
    const pa = placed(a, () => 'MPI_Recv');
    const pb = placed(b, () => 'MPI_Recv');
    const v = watchVerdict(series([pa, pb, pb, pb]), opts);
    expect(v.state).toBe('hung');
    expect(v.sinceIndex).toBe(1);
  });
});
