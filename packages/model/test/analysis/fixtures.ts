// Hand-built snapshots for the analysis tests: each test spells out every queue entry, so the
// expected cycles, near misses and classes can be written down exactly.
import {
  type Communicator,
  type Frame,
  type JobSnapshot,
  lengthUnitOfLibrary,
  type MpiCall,
  type Operation,
  type RankSnapshot,
} from '@mqd/model';

export interface OpSpec {
  /** Local rank of the peer; null = MPI_ANY_SOURCE. */
  readonly peer: number | null;
  readonly tag: number | null;
  readonly status?: Operation['status'];
  readonly length?: number;
  /** Global rank of the peer; defaults to `peer` (Open MPI fills it; MPICH fixtures pass null). */
  readonly global?: number | null;
  /** Open MPI request address, printed in extra text line 0. */
  readonly request?: string;
  readonly buffer?: string;
}

export function op(s: OpSpec): Operation {
  return {
    status: s.status ?? 'pending',
    peer: { local: s.peer, global: s.global === undefined ? s.peer : s.global },
    tag: s.tag,
    length: s.length ?? 8,
    actual: null,
    extraText: s.request === undefined ? [] : [`Send: ${s.request}`],
    buffer: s.buffer ?? '0x1000',
    systemBuffer: false,
  };
}

export interface Queues {
  readonly sends?: Operation[] | null;
  readonly receives?: Operation[] | null;
  readonly unexpected?: Operation[] | null;
}

const HIDDEN = { code: 'MQD_E_NO_QUEUES', message: 'not shown by this library' };

/** A communicator; a queue left out is empty, except `unexpected`, which is null (Open MPI). */
export function comm(
  name: string,
  size: number,
  localRank: number,
  group: number[] | null,
  q: Queues,
  id = '0',
): Communicator {
  const sends = q.sends === undefined ? [] : q.sends;
  const receives = q.receives === undefined ? [] : q.receives;
  const unexpected = q.unexpected === undefined ? null : q.unexpected;
  return {
    id,
    name,
    size,
    localRank,
    group,
    sends,
    receives,
    unexpected,
    unavailable: {
      ...(sends === null ? { sends: HIDDEN } : {}),
      ...(receives === null ? { receives: HIDDEN } : {}),
      ...(unexpected === null ? { unexpected: HIDDEN } : {}),
    },
  };
}

/** MPI_COMM_WORLD of an n-rank job as rank r sees it (its group is the identity, never listed). */
export function world(n: number, r: number, q: Queues): Communicator {
  return comm('MPI_COMM_WORLD', n, r, null, q);
}

export function rank(r: number, communicators: Communicator[]): RankSnapshot {
  return { rank: r, pid: 1000 + r, host: 'n1', state: { kind: 'ok' }, pausedMicros: 50, communicators };
}

export function failedRank(r: number): RankSnapshot {
  return {
    rank: r,
    pid: 1000 + r,
    host: 'n1',
    state: { kind: 'error', code: 'MQD_E_PTRACE_DENIED', message: 'cannot read pid' },
    pausedMicros: null,
    communicators: [],
  };
}

export function snapshot(
  ranks: RankSnapshot[],
  library: 'openmpi' | 'mpich' = 'openmpi',
  takenAt = '2026-03-01T10:00:00.000Z',
): JobSnapshot {
  return {
    schemaVersion: 1,
    takenAt,
    durationMicros: 1000,
    mpi: { library, dll: null, lengthUnit: lengthUnitOfLibrary(library) },
    ranks,
  };
}

/** An Open MPI job where rank r's world queues are queues(r). */
export function ompiJob(n: number, queues: (r: number) => Queues): JobSnapshot {
  return snapshot(Array.from({ length: n }, (_, r) => rank(r, [world(n, r, queues(r))])));
}

/** The MPI library and the program of the hand-built stacks. */
export const LIBMPI = '/opt/mpi/lib/libmpi.so.40';
export const APP = '/home/u/a.out';

/** A stack frame at a pc of no consequence. */
export function frame(fn: string, file: string | null, line: number | null, module: string): Frame {
  return { pc: '0x401000', function: fn, module, file, line, inlined: false };
}

/** Rank r with its main thread in `fn` (null: computing in `work`), called from main at a.c:line. */
export function at(
  r: RankSnapshot,
  fn: string | null,
  line: number,
  args: MpiCall['args'] = null,
): RankSnapshot {
  const frames =
    fn === null
      ? [frame('work', '/home/u/a.c', line, APP), frame('main', '/home/u/a.c', 90, APP)]
      : [frame(`P${fn}`, null, null, LIBMPI), frame('main', '/home/u/a.c', line, APP)];
  return {
    ...r,
    threads: [{ tid: r.pid, name: 'a.out', main: true, frames, truncated: false, error: null }],
    mpiCall: fn === null ? null : { function: fn, tid: r.pid, args },
  };
}
