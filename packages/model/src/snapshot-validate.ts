// Validation at the edge: anything that arrives from a DLL host, an agent, a browser or a
// file is checked once against the schema and the invariants the schema cannot express.
import { FormatRegistry } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { Value, type ValueError, ValueErrorType } from '@sinclair/typebox/value';
import { type MqdError, mqdError } from './errors.js';
import { isWorld } from './mpi/world.js';
import { err, ok, type Result } from './result.js';
import { JobSnapshot, QUEUE_KINDS, RankSnapshot } from './snapshot-spec.js';

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
    const broken = rankInvariant(r);
    if (broken !== null) return err(mqdError('MQD_E_BAD_INPUT', `rank ${r.rank}: ${broken}`));
  }
  return ok(data);
}

/**
 * The invariants of one rank the schema cannot express, or null when they hold: the OpenMP
 * fields' (openMpInvariant), the corrected statuses' (correctionInvariant), and per
 * communicator: a queue is null exactly when a reason is given, MPI_COMM_WORLD's group is null
 * (the identity), a group has `size` entries.
 */
export function rankInvariant(r: RankSnapshot): string | null {
  const omp = openMpInvariant(r);
  if (omp !== null) return omp;
  const corrections = correctionInvariant(r);
  if (corrections !== null) return corrections;
  for (const c of r.communicators) {
    for (const q of QUEUE_KINDS) {
      if ((c[q] === null) !== (c.unavailable[q] !== undefined)) {
        return `communicator ${c.id}: queue ${q} must be null exactly when a reason is given`;
      }
    }
    if (isWorld(c) && c.group !== null) return "MPI_COMM_WORLD's group must be null (it is the identity)";
    if (c.group !== null && c.group.length !== c.size) {
      return `communicator ${c.id}: group has ${c.group.length} entries for size ${c.size}`;
    }
  }
  return null;
}

/**
 * A rank's corrected statuses and its note on them agree: each reason is noted once, with the
 * number of operations that carry it; an operation's correction is never without its note.
 */
function correctionInvariant(r: RankSnapshot): string | null {
  const notes = r.statusCorrections;
  const counted = new Map<string, number>();
  for (const c of r.communicators) {
    for (const q of QUEUE_KINDS) {
      for (const op of c[q] ?? []) {
        if (op.corrected !== undefined) counted.set(op.corrected, (counted.get(op.corrected) ?? 0) + 1);
      }
    }
  }
  if (notes === undefined) {
    const [reason] = counted.keys();
    return reason === undefined
      ? null
      : `operations corrected for '${reason}' without a statusCorrections note`;
  }
  const seen = new Set<string>();
  for (const n of notes) {
    if (seen.has(n.reason)) return `statusCorrections lists '${n.reason}' twice`;
    seen.add(n.reason);
    const got = counted.get(n.reason) ?? 0;
    if (got !== n.count)
      return `statusCorrections says ${n.count} '${n.reason}' operation(s), the queues have ${got}`;
  }
  for (const reason of counted.keys()) {
    if (!seen.has(reason)) return `operations corrected for '${reason}' without a statusCorrections note`;
  }
  return null;
}

let compiledRank: TypeCheck<typeof RankSnapshot> | null = null;

/** Why a rank is refused: where (a JSON pointer into the rank, '' for the rank itself) and what. */
export interface RankFault {
  readonly path: string;
  readonly message: string;
}

/**
 * One rank checked exactly as validateSnapshot checks each rank of a snapshot (the schema, then
 * rankInvariant): null when valid, else the first fault. For edges that receive ranks one at a
 * time (the agent protocol): whatever passes here is stored and opens in the dashboard. The
 * schema is compiled once, on first use (TypeBox's TypeCompiler: ~2 us per realistic rank,
 * 2.5x faster than the hand-written guard it replaced and 9x faster than Value.Check).
 */
export function checkRank(v: unknown): RankFault | null {
  compiledRank ??= TypeCompiler.Compile(RankSnapshot);
  if (!compiledRank.Check(v)) {
    const first = compiledRank.Errors(v).First();
    return first === undefined ? { path: '', message: 'does not match the snapshot schema' } : fault(first);
  }
  // The OpenMP invariants concern the rank's openmp field; the others name their communicator.
  const omp = openMpInvariant(v);
  if (omp !== null) return { path: '/openmp', message: omp };
  const broken = rankInvariant(v);
  return broken === null ? null : { path: '', message: broken };
}

/** Errors that only say the value has another type than the schema's variant wants. */
const TYPE_MISMATCH: ReadonlySet<ValueErrorType> = new Set([
  ValueErrorType.Null,
  ValueErrorType.String,
  ValueErrorType.Number,
  ValueErrorType.Integer,
  ValueErrorType.Boolean,
  ValueErrorType.Object,
  ValueErrorType.Array,
  ValueErrorType.Literal,
]);

/**
 * A validator error as a fault at the deepest field it concerns: a union (`[...] | null`) says
 * only "Expected union value" at its own path, so the variant whose first error lies deepest
 * is followed (the array of operations, not the null).
 */
function fault(e: ValueError): RankFault {
  if (e.type === ValueErrorType.Union) {
    const consts = (e.schema['anyOf'] as { const?: unknown }[] | undefined)?.map((x) => x.const);
    if (consts?.every((c) => typeof c === 'string')) {
      return { path: e.path, message: `expected one of ${consts.join(', ')}` };
    }
    // Deepest first; at equal depth, a variant of the value's own type (a malformed string
    // rather than "not null").
    const score = (f: ValueError) => f.path.length * 2 + (TYPE_MISMATCH.has(f.type) ? 0 : 1);
    let best: ValueError | undefined;
    for (const variant of e.errors) {
      const f = variant.First();
      if (f !== undefined && score(f) > (best === undefined ? e.path.length * 2 : score(best))) best = f;
    }
    if (best !== undefined) return fault(best);
  }
  const pattern = e.type === ValueErrorType.StringPattern ? e.schema['pattern'] : undefined;
  return { path: e.path, message: typeof pattern === 'string' ? `does not match ${pattern}` : e.message };
}

/**
 * The OpenMP fields' invariants, or null when they hold: openmp and openmpError
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
