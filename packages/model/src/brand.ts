// Branded ids and units: each is made by exactly one constructor, so a pid can never be
// passed where a rank is expected (Perfetto ui/src/base/brand.ts does the same).
declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

/** A rank in some communicator (MPI_COMM_WORLD unless the name says otherwise). */
export type Rank = Brand<number, 'Rank'>;
/** A Linux process id. */
export type Pid = Brand<number, 'Pid'>;
/** A communicator id as the MPI library's DLL reports it (unique within one process). */
export type CommId = Brand<string, 'CommId'>;
/** A job id assigned by the aggregator. */
export type JobId = Brand<string, 'JobId'>;
/** A snapshot id assigned by the store. */
export type SnapshotId = Brand<string, 'SnapshotId'>;
/** A duration in microseconds. */
export type Micros = Brand<number, 'Micros'>;

function checkInt(what: string, n: number, min: number, max: number): number {
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new RangeError(`${what} must be an integer in [${min}, ${max}], got ${n}`);
  }
  return n;
}

export const Rank = (n: number): Rank => checkInt('rank', n, 0, 0x7fffffff) as Rank;
export const Pid = (n: number): Pid => checkInt('pid', n, 1, 0x3fffffff) as Pid;
export const CommId = (s: string): CommId => s as CommId;
export const JobId = (s: string): JobId => s as JobId;
export const SnapshotId = (s: string): SnapshotId => s as SnapshotId;
export const Micros = (n: number): Micros =>
  checkInt('micros', Math.round(n), 0, Number.MAX_SAFE_INTEGER) as Micros;
