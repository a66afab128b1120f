// A discovered job as GET /api/fleet lists it (packages/model watch-spec.ts ApiFleetJob), for
// the Fleet view's tests: a hung Slurm job of alice's, each field overridable.
import { type ApiFleetJob, JobId, SnapshotId } from '@mqd/model';

export function fleetJob(over: Partial<ApiFleetJob> = {}): ApiFleetJob {
  return {
    key: 'slurm:1234',
    jobId: JobId('j1'),
    kind: 'slurm',
    slurmJob: '1234',
    program: 'ring_ssend',
    command: 'srun ./ring_ssend',
    uid: 1000,
    user: 'alice',
    partition: 'debug',
    account: 'proj42',
    nodes: ['node01', 'node02'],
    rankCount: 4,
    startedAt: '2026-11-27T03:00:00.000Z',
    endedAt: null,
    endReason: null,
    watch: 'on',
    state: 'hung',
    since: '2026-11-27T03:12:00.000Z',
    confidence: 'high',
    leastProgressed: '0-3',
    diagnosis: 'Deadlock: ranks 0-3 wait for each other in MPI_Ssend',
    snapshotId: SnapshotId('s9'),
    history: [],
    samples: 5,
    stopMsThisHour: 12,
    stopBudgetMs: 1000,
    ...over,
  };
}
