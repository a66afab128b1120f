// One rank's snapshot from what one read gave (a stop, or a core): the walk assembled, the
// stacks and the MPI call beside the queues, the OpenMP threads joined to the stacks by tid,
// the DLL that read it. Runs after the resume.
import { type MqdError, ok, type RankSnapshot, type Result, rankNotRead } from '@mqd/model';
import type { UnwoundRank } from '../inferior/unwind.js';
import type { MqsSession } from '../mqs/session.js';
import type { RawWalk, StopRecords } from '../mqs/walk.js';
import { assembleOpenMp, type RawOpenMp } from '../ompd/raw.js';
import type { PythonRead } from '../python/read.js';
import { mergeUcx } from '../ucx/merge.js';
import type { UcxRead } from '../ucx/read.js';
import { type RawMpiArgs, stackFieldsOf } from './mpi-args.js';

/** What one read of a rank gave, before assembly. */
export interface RankRead {
  readonly base: { rank: number; pid: number; host: string };
  readonly walk: Result<RawWalk, MqdError>;
  readonly records: StopRecords;
  /** null: stacks were not asked for. */
  readonly stacks: UnwoundRank | MqdError | null;
  readonly mpiArgs: RawMpiArgs | null;
  /** Microseconds the rank was stopped (0 for a core). */
  readonly paused: number;
  readonly openMp: RawOpenMp | null;
  /** The rank's CPython frames (null: no CPython, or stacks not read). */
  readonly python?: PythonRead | null;
  /** The rank's queues from UCX (null: its PML is not ucx, or it is not Open MPI). */
  readonly ucx?: UcxRead | null;
}

export function rankSnapshotOf(session: MqsSession, read: RankRead): RankSnapshot {
  const { base, walk, records, stacks, mpiArgs, paused, openMp, python = null, ucx = null } = read;
  const comms = walk.ok ? ok(session.assemble(walk.value, records)) : walk;
  const omp = openMp === null ? {} : assembleOpenMp(openMp);
  const stackFields = {
    ...(stacks === null
      ? {}
      : stackFieldsOf(stacks, mpiArgs, comms.ok ? comms.value.communicators : [], base.rank)),
    ...omp,
  };
  if (stackFields.threads && omp.openmp) {
    // The stacks' threads carry their OpenMP state (joined by tid).
    const byTid = new Map(omp.openmp.threads.map((x) => [x.tid, x.state]));
    stackFields.threads = stackFields.threads.map((x) => {
      const state = byTid.get(x.tid);
      return state === undefined ? x : { ...x, ompState: state };
    });
  }
  if (python) {
    // Each thread's Python frames beside its C frames (joined by tid), the version on the rank.
    if (stackFields.threads) {
      stackFields.threads = stackFields.threads.map((x) => {
        const py = python.threads.get(x.tid);
        return py === undefined ? x : { ...x, python: py };
      });
    }
    Object.assign(stackFields, { python: { version: python.version, error: python.error } });
  }
  if (!comms.ok) {
    return { ...rankNotRead(base, comms.error, 'error', paused), ...stackFields, dll: session.dllInfo() };
  }
  const { walkError, statusCorrections } = comms.value;
  let { communicators } = comms.value;
  let queueSource = {};
  if (ucx) {
    // Under the ucx PML the DLL's queues are ob1's empty lists: UCX's take their place.
    const merged = mergeUcx(communicators, ucx, stackFields.mpiCall);
    communicators = merged.communicators;
    queueSource = { queueSource: merged.queueSource };
  }
  return {
    ...base,
    state: walkError ? { kind: 'error', ...walkError } : { kind: 'ok' },
    pausedMicros: paused,
    communicators,
    ...(statusCorrections ? { statusCorrections } : {}),
    ...queueSource,
    ...stackFields,
    dll: session.dllInfo(),
  };
}
