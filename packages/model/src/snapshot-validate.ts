// Validation at the edge: anything that arrives from a DLL host, an agent, a browser or a
// file is checked once against the schema and the invariants the schema cannot express.
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { isWorld } from './analysis/comm.js';
import { type MqdError, mqdError } from './errors.js';
import { err, ok, type Result } from './result.js';
import { JobSnapshot, type RankSnapshot } from './snapshot-spec.js';

const ISO_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (v) => ISO_DATE_TIME.test(v));

export function validateSnapshot(data: unknown): Result<JobSnapshot, MqdError> {
  if (!Value.Check(JobSnapshot, data)) {
    const first = Value.Errors(JobSnapshot, data).First();
    const where = first ? `${first.path || '/'}: ${first.message}` : 'unknown field';
    return err(mqdError('MQD_E_BAD_INPUT', `snapshot does not match schema v1 at ${where}`));
  }
  const seen = new Set<number>();
  let prev = -1;
  for (const r of data.ranks) {
    if (seen.has(r.rank)) return err(mqdError('MQD_E_BAD_INPUT', `rank ${r.rank} appears twice`));
    if (r.rank < prev) return err(mqdError('MQD_E_BAD_INPUT', `ranks are not sorted at rank ${r.rank}`));
    seen.add(r.rank);
    prev = r.rank;
    const omp = openMpInvariant(r);
    if (omp !== null) return err(mqdError('MQD_E_BAD_INPUT', `rank ${r.rank}: ${omp}`));
    for (const c of r.communicators) {
      for (const q of ['sends', 'receives', 'unexpected'] as const) {
        if ((c[q] === null) !== (c.unavailable[q] !== undefined)) {
          return err(
            mqdError(
              'MQD_E_BAD_INPUT',
              `rank ${r.rank} communicator ${c.id}: queue ${q} must be null exactly when a reason is given`,
            ),
          );
        }
      }
      if (isWorld(c) && c.group !== null) {
        return err(
          mqdError(
            'MQD_E_BAD_INPUT',
            `rank ${r.rank}: MPI_COMM_WORLD's group must be null (it is the identity)`,
          ),
        );
      }
      if (c.group !== null && c.group.length !== c.size) {
        return err(
          mqdError(
            'MQD_E_BAD_INPUT',
            `rank ${r.rank} communicator ${c.id}: group has ${c.group.length} entries for size ${c.size}`,
          ),
        );
      }
    }
  }
  return ok(data);
}

/**
 * The OpenMP fields' invariants (issue 15), or null when they hold: openmp and openmpError
 * exclusive (an error means the runtime was not read); one OmpThread per tid; a thread's
 * ompState only with an OpenMP thread of the same tid, and equal to its state.
 */
export function openMpInvariant(r: RankSnapshot): string | null {
  if (r.openmpError !== undefined && r.openmp !== undefined) {
    return 'openmp and openmpError are exclusive (an error means the OpenMP runtime was not read)';
  }
  const states = new Map<number, string>();
  for (const t of r.openmp?.threads ?? []) {
    if (states.has(t.tid)) return `OpenMP thread ${t.tid} is listed twice`;
    states.set(t.tid, t.state);
  }
  for (const t of r.threads ?? []) {
    if (t.ompState === undefined) continue;
    const s = states.get(t.tid);
    if (s === undefined) return `thread ${t.tid} has an ompState but is no OpenMP thread of the rank`;
    if (s !== t.ompState)
      return `thread ${t.tid}'s ompState ${t.ompState} differs from its OpenMP state ${s}`;
  }
  return null;
}
