// How the store runs its queries: SqlStore (sql-store.ts, sql-watch.ts) writes each query once,
// naming its parameters @name, and runs it through a Dialect (dialect-sqlite.ts,
// dialect-pg.ts) that says how its database takes it: the placeholders, a list parameter, row
// and advisory locks, transactions, and how a refused write is told.
import type { NewAudit, RetentionPolicy } from './store-port.js';

/** A query's parameters by name (@name in its text). */
export type Params = Readonly<Record<string, unknown>>;

/** Runs one statement at a time: on the whole store, or inside one transaction. */
export interface Executor {
  /** A statement that returns no rows; resolves to the rows it changed. */
  run(sql: string, params?: Params): Promise<number>;
  /** The first row, or undefined. */
  get<R>(sql: string, params?: Params): Promise<R | undefined>;
  all<R>(sql: string, params?: Params): Promise<R[]>;
}

/** What differs between SQLite and PostgreSQL; everything else is SqlStore's. */
export interface Dialect extends Executor {
  readonly name: 'sqlite' | 'postgres';
  /** Versions the open applied. */
  readonly migrationsApplied: readonly number[];
  readOnlyReason: string | null;
  readonly isOpen: boolean;
  close(): Promise<void>;
  /**
   * Every write goes through here: a full disk or a refusing database becomes
   * MQD_E_STORE_READONLY (and readOnlyReason says why) instead of the driver's error.
   */
  write<T>(fn: () => Promise<T>): Promise<T>;
  /** `fn` in one transaction (inside write()): committed when it resolves, else rolled back. */
  transaction<T>(fn: (x: Executor) => Promise<T>): Promise<T>;
  /** Appended to a SELECT in a transaction that writes what it read / that must see it stay. */
  readonly forUpdate: string;
  readonly forShare: string;
  /** Locks the row of `table` with this id until the transaction ends. */
  lockRow(x: Executor, table: 'jobs', id: string): Promise<void>;
  /** Holds a lock named `key` until the transaction ends (a find-or-create of a row not there yet). */
  lockName(x: Executor, key: string): Promise<void>;
  /** `column IN` a list parameter, as SQL: `inList('watch_id', 'ids', 'text')`. */
  inList(column: string, param: string, type: 'text' | 'integer'): string;
  /** The value inList's parameter takes. */
  list(values: readonly (string | number)[]): unknown;
}

/** What every part of the store shares: the dialect, the clock, the retention, the audit. */
export class SqlStoreBase {
  constructor(
    protected readonly d: Dialect,
    protected readonly retention: RetentionPolicy,
    protected readonly clock: () => number,
  ) {}

  get dialect(): 'sqlite' | 'postgres' {
    return this.d.name;
  }

  get migrationsApplied(): readonly number[] {
    return this.d.migrationsApplied;
  }

  get readOnlyReason(): string | null {
    return this.d.readOnlyReason;
  }

  /** Tests put the store in (and out of) the read-only state a failed write leaves. */
  set readOnlyReason(why: string | null) {
    this.d.readOnlyReason = why;
  }

  get isOpen(): boolean {
    return this.d.isOpen;
  }

  async schemaVersion(): Promise<number> {
    return (await this.d.get<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_version'))?.v ?? 0;
  }

  close(): Promise<void> {
    return this.d.close();
  }

  /** A write of one statement; resolves to the rows changed. */
  protected w(sql: string, params: Params): Promise<number> {
    return this.d.write(() => this.d.run(sql, params));
  }

  protected async insertAudit(x: Executor, a: NewAudit): Promise<void> {
    await x.run(
      'INSERT INTO audit (at, who, action, job_id, snapshot_id, detail) VALUES (@at, @who, @action, @jobId, @snapshotId, @detail)',
      {
        at: this.clock(),
        who: a.who,
        action: a.action,
        jobId: a.jobId ?? null,
        snapshotId: a.snapshotId ?? null,
        detail: a.detail ?? '',
      },
    );
  }
}
