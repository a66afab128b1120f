// One simulated rank of a job stuck in a ring exchange, for the aggregator's fake reader, its
// tests and the fan-in benchmark. Every queue is a pure function of (seed, rank, generation),
// so two reads of the same rank give the same bytes unless the generation changes, and a
// merged snapshot can be compared with what was generated. The shapes follow what Open MPI's
// DLL reports for a ring: a pending send to the right neighbour, receives from the left one
// (some with MPI_ANY_SOURCE or MPI_ANY_TAG), a few unexpected messages, and a small
// sub-communicator with its group.
import type { Communicator, Operation, RankSnapshot } from './snapshot-spec.js';
import { prng } from './synthetic.js';

const ROW = 8;

function op(
  status: Operation['status'],
  local: number | null,
  global: number | null,
  tag: number | null,
  length: number,
  buffer: number,
  text: string,
): Operation {
  return {
    status,
    peer: { local, global },
    tag,
    length,
    actual: null,
    extraText: [text],
    buffer: `0x${buffer.toString(16)}`,
    systemBuffer: false,
  };
}

/** The queues of one simulated rank: a pure function of its arguments. */
export function syntheticRingRank(
  rank: number,
  pid: number,
  host: string,
  worldSize: number,
  seed: number,
  generation: number,
): RankSnapshot {
  const rnd = prng(seed * 1_000_003 + rank * 7919 + generation * 104_729);
  const n = Math.max(1, worldSize);
  const right = (rank + 1) % n;
  const left = (rank - 1 + n) % n;
  const base = 0x7ffc_0000_0000 + rank * 0x10000;
  const len = () => 1024 * (1 + Math.floor(rnd() * 64));
  const sends: Operation[] = [];
  const nSends = 1 + Math.floor(rnd() * 2);
  for (let i = 0; i < nSends; i++) {
    sends.push(op('pending', right, right, 100 + i + generation, len(), base + i * 0x1000, 'Send: ring'));
  }
  const receives: Operation[] = [];
  const nRecvs = 1 + Math.floor(rnd() * 2);
  for (let i = 0; i < nRecvs; i++) {
    const wildcard = rnd() < 0.2;
    receives.push(
      op(
        'pending',
        wildcard ? null : left,
        wildcard ? null : left,
        rnd() < 0.1 ? null : 100 + i + generation,
        len(),
        base + 0x8000 + i * 0x1000,
        'Receive: ring',
      ),
    );
  }
  const unexpected: Operation[] = [];
  const nUnexpected = Math.floor(rnd() * 3);
  for (let i = 0; i < nUnexpected; i++) {
    const from = Math.floor(rnd() * n);
    unexpected.push(op('pending', from, from, 900 + i, len(), 0, 'Unexpected: eager'));
  }
  const world: Communicator = {
    id: '0',
    name: 'MPI_COMM_WORLD',
    size: n,
    localRank: rank,
    // The world group is the identity; leaving it null keeps a 16k-rank job from carrying 16k
    // integers per rank (the spec allows null when the peer's global rank is already known).
    group: null,
    sends,
    receives,
    unexpected,
    unavailable: {},
  };
  const rowBase = Math.floor(rank / ROW) * ROW;
  const rowSize = Math.min(ROW, n - rowBase);
  const group = Array.from({ length: rowSize }, (_, i) => rowBase + i);
  const rowLocal = rank - rowBase;
  const rowLeft = (rowLocal - 1 + rowSize) % rowSize;
  const row: Communicator = {
    id: '3',
    name: 'row',
    size: rowSize,
    localRank: rowLocal,
    group,
    sends: [],
    receives:
      rowSize > 1
        ? [op('pending', rowLeft, rowBase + rowLeft, 7, 8, base + 0xf000, 'Receive: row halo')]
        : [],
    unexpected: [],
    unavailable: {},
  };
  return {
    rank,
    pid,
    host,
    state: { kind: 'ok' },
    pausedMicros: 200 + (rank % 97) * 3,
    communicators: [world, row],
  };
}
