// The "halo" scenario: a deterministic hung job with realistic background traffic, for the
// dashboard's benchmark, its demo mode (?demo=<ranks>) and tests. Same options, same
// snapshot, byte for byte. (The other scenarios are in synthetic.ts; both use its one PRNG.)
//
// The story it tells (so the views have something true to show):
// - every rank runs a halo exchange on a torus: receives posted from its 4 neighbours, a few
//   non-blocking sends still pending; these change from snapshot to snapshot;
// - a band of ranks waits for a message with tag 99 from the "culprit" rank, which never sends
//   it: the culprit sits in an MPI_ANY_SOURCE receive for tag 7 while messages tagged 8 pile up
//   in its unexpected queue (a tag mismatch), and these operations never change;
// - rank 0 gathers with ANY_SOURCE receives and holds unexpected messages from many ranks;
// - some sends on an unnamed communicator have a destination the library cannot map to a world rank;
// - a few ranks could not be read (a DLL timeout, a missing agent).
import type { Communicator, JobSnapshot, MpiLibrary, Operation, RankSnapshot } from './snapshot-spec.js';
import { prng } from './synthetic.js';

export interface HaloOptions {
  readonly ranks: number;
  readonly seed?: number;
  /** openmpi: no unexpected queue, lengths in bytes; mpich: all three queues, element counts. */
  readonly library?: Exclude<MpiLibrary, 'unknown'>;
  /** Position in a series: halo traffic changes with it, the hang does not. */
  readonly step?: number;
}

export const HALO_STUCK_TAG = 99;
export const HALO_CULPRIT_TAG = 7;
export const HALO_MISMATCHED_TAG = 8;

export function haloCulprit(ranks: number): number {
  return Math.floor(ranks / 2);
}

/** The band of ranks stuck waiting for the culprit. */
export function haloStuckBand(ranks: number): { from: number; to: number } {
  const from = Math.floor(ranks / 3);
  return { from, to: Math.min(ranks, from + Math.max(1, Math.floor(ranks / 16))) };
}

export function syntheticHaloJob(o: HaloOptions): JobSnapshot {
  const n = Math.max(1, Math.floor(o.ranks));
  const seed = o.seed ?? 1;
  const step = o.step ?? 0;
  const library = o.library ?? 'mpich';
  const width = Math.max(1, Math.round(Math.sqrt(n)));
  const culprit = haloCulprit(n);
  const band = haloStuckBand(n);
  const moving = prng(seed * 7919 + step * 104729 + 1);
  const fixed = prng(seed * 15485863 + 3);
  const elements = library === 'mpich';
  // Buffers name the rank, a slot, and (for traffic that moves) the step: the hung operations
  // keep their buffer, so the timeline can tell "unchanged" from "re-posted".
  const hex = (v: number, w: number) => (v >>> 0).toString(16).padStart(w, '0').slice(-w);
  const buffer = (r: number, slot: number, moves: boolean) =>
    `0x7f${hex(r, 6)}${hex(slot, 2)}${moves ? hex(step + 1, 4) : '0000'}`;
  const len = (bytes: number) => (elements ? Math.max(1, bytes >> 3) : bytes);
  const op = (
    peerLocal: number | null,
    peerGlobal: number | null,
    tag: number | null,
    length: number,
    buf: string,
    extra: string[] = [],
  ): Operation => ({
    status: 'pending',
    peer: { local: peerLocal, global: peerGlobal },
    tag,
    length,
    actual: null,
    extraText: extra,
    buffer: buf,
    systemBuffer: false,
  });
  const sendText = elements ? ['Non-blocking send'] : [];

  const worldOf = (r: number): Communicator => ({
    id: elements ? '0x44000000' : '0',
    name: 'MPI_COMM_WORLD',
    size: n,
    localRank: r,
    // A world-sized group per rank is O(ranks^2) at scale; global peers are given instead.
    group: null,
    sends: [],
    receives: [],
    unexpected: elements ? [] : null,
    unavailable: elements
      ? {}
      : {
          unexpected: {
            code: 'MQD_E_QUEUE_UNSUPPORTED',
            message: "Open MPI's DLL returns mqs_no_information for unexpected messages",
          },
        },
  });

  // Operations that never change between snapshots are drawn from `fixed`, in rank order.
  const gatherSenders = new Set<number>();
  const gatherCount = Math.min(n - 1, Math.max(0, Math.floor(n / 64)));
  while (gatherSenders.size < gatherCount) gatherSenders.add(1 + Math.floor(fixed() * (n - 1)));
  const broken = new Set<number>();
  if (n >= 64) {
    broken.add(n - 1);
    broken.add(Math.floor(n * 0.9));
  }

  const ranks: RankSnapshot[] = [];
  for (let r = 0; r < n; r++) {
    const pid = 10_000 + r;
    const host = `node${String(Math.floor(r / 64)).padStart(4, '0')}`;
    if (broken.has(r)) {
      const missing = r === n - 1;
      ranks.push({
        rank: r,
        pid,
        host,
        state: missing
          ? {
              kind: 'agent-missing',
              code: 'MQD_E_AGENT_MISSING',
              message: `MQD_E_AGENT_MISSING: no agent on ${host}: start \`mqd agent\` there`,
            }
          : {
              kind: 'error',
              code: 'MQD_E_DLL_TIMEOUT',
              message:
                'MQD_E_DLL_TIMEOUT: the DLL did not answer in 5 s: this snapshot is lost, take another',
            },
        pausedMicros: missing ? null : 5_000_000,
        communicators: [],
      });
      continue;
    }
    const world = worldOf(r);
    const sends: Operation[] = [];
    const receives: Operation[] = [];
    const unexpected: Operation[] = [];
    const inBand = r >= band.from && r < band.to;
    if (r === culprit) {
      receives.push(op(null, null, HALO_CULPRIT_TAG, len(64), buffer(r, 0, false)));
      for (let i = 0; i < 3; i++) {
        const from = (culprit + 1 + i) % n;
        if (elements) unexpected.push(op(from, from, HALO_MISMATCHED_TAG, 0, '0x0'));
      }
    } else if (inBand) {
      receives.push(op(culprit, culprit, HALO_STUCK_TAG, len(4096), buffer(r, 0, false)));
    } else {
      // Halo: receives from the 4 torus neighbours; each is posted with probability 0.8.
      const neighbours = [(r - 1 + n) % n, (r + 1) % n, (r - width + n) % n, (r + width) % n];
      neighbours.forEach((nb, i) => {
        if (moving() < 0.8) receives.push(op(nb, nb, 10 + i, len(8192), buffer(r, i, true)));
      });
      neighbours.forEach((nb, i) => {
        if (moving() < 0.3) sends.push(op(nb, nb, 10 + (i ^ 1), len(8192), buffer(r, 4 + i, true), sendText));
      });
    }
    if (r === 0) {
      for (let i = 0; i < 4; i++) receives.push(op(null, null, 2, len(1024), buffer(r, 16 + i, false)));
      if (elements) for (const s of gatherSenders) unexpected.push(op(s, s, 1, 0, '0x0'));
    }
    world.sends = sends;
    world.receives = receives;
    if (elements) world.unexpected = unexpected;
    const communicators: Communicator[] = [world];
    // A row communicator (named by the application) carries a little of the traffic.
    const row = Math.floor(r / width);
    const rowSize = Math.min(width, n - row * width);
    const rowComm: Communicator = {
      id: elements ? `0x8400${(row & 0xffff).toString(16).padStart(4, '0')}` : String(4 + (row % 2)),
      name: 'row_comm',
      size: rowSize,
      localRank: r % width,
      group: null,
      sends: [],
      receives: [],
      unexpected: elements ? [] : null,
      unavailable: elements
        ? {}
        : {
            unexpected: {
              code: 'MQD_E_QUEUE_UNSUPPORTED',
              message: "Open MPI's DLL returns mqs_no_information for unexpected messages",
            },
          },
    };
    if (rowSize > 1 && moving() < 0.25) {
      const local = ((r % width) + 1) % rowSize;
      rowComm.receives = [op(local, row * width + local, 20, len(256), buffer(r, 8, true))];
    }
    communicators.push(rowComm);
    // 1% of ranks have a send on an unnamed, groupless communicator: destination unknown.
    if (fixed() < 0.01) {
      communicators.push({
        id: elements ? `0xc400${(r & 0xffff).toString(16).padStart(4, '0')}` : '6',
        name: '',
        size: 2,
        localRank: 0,
        group: null,
        sends: [op(1, null, 30, len(512), buffer(r, 9, false), sendText)],
        receives: [],
        unexpected: elements ? [] : null,
        unavailable: elements
          ? {}
          : {
              unexpected: {
                code: 'MQD_E_QUEUE_UNSUPPORTED',
                message: "Open MPI's DLL returns mqs_no_information for unexpected messages",
              },
            },
      });
    }
    ranks.push({
      rank: r,
      pid,
      host,
      state: { kind: 'ok' },
      pausedMicros: 800 + Math.floor(fixed() * 400),
      communicators,
    });
  }
  const t0 = Date.UTC(2026, 0, 15, 9, 0, 0) + step * 30_000;
  return {
    schemaVersion: 1,
    takenAt: new Date(t0).toISOString(),
    durationMicros: 2_000 + n * 40,
    mpi: {
      library,
      dll:
        library === 'mpich'
          ? '/usr/lib/x86_64-linux-gnu/libtvmpich.so'
          : '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so',
      lengthUnit: elements ? 'elements' : 'bytes',
    },
    ranks,
  };
}

export interface HaloEntry {
  readonly id: string;
  readonly takenAt: string;
  readonly snapshot: JobSnapshot;
}

/** `count` snapshots 30 s apart of the same hung job. */
export function syntheticHaloSeries(o: HaloOptions, count: number): HaloEntry[] {
  return Array.from({ length: count }, (_, step) => {
    const snapshot = syntheticHaloJob({ ...o, step });
    return { id: `demo-${o.ranks}-${step}`, takenAt: snapshot.takenAt, snapshot };
  });
}
