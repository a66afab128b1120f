// PostgreSQL's side of the store (sql-store.ts holds the queries): a pool of node-postgres
// clients, so several aggregators can share one database. The schema is the PostgreSQL side of
// the one migration history (store-schema.ts), applied under an advisory lock so instances
// starting together migrate once. A transaction runs on one client; a read that decides a write
// locks what it read (FOR UPDATE / FOR SHARE, or a transaction-scoped advisory lock for a row
// that does not exist yet), and a serialization failure or deadlock is retried.
//
// Errors: the database out of reach (refused, socket gone, connection terminated, admin
// shutdown: SQLSTATE 57P0x / class 08) is MQD_E_STORE_UNAVAILABLE, answered as a 503 while it
// lasts (the pool reconnects by itself); disk full (53100) or a read-only server (25006) is
// MQD_E_STORE_READONLY, as SQLite's full disk, until a write works again. Epoch-ms BIGINTs
// come back as JS numbers (a per-pool type parser: they stay far below 2^53), bytea as Buffers.
import { MqdException, mqdError } from '@mqd/model';
import pg from 'pg';
import type { Dialect, Executor, Params } from './sql-dialect.js';
import { SqlStore } from './sql-store.js';
import type { RetentionPolicy } from './store-port.js';
import { type Migration, migrationsFor } from './store-schema.js';

/** pg_advisory_lock's key while migrating ("mqd" + "mig" in ASCII). */
const MIGRATION_LOCK = 0x6d7164_6d6967;
/** The first key of the transaction-scoped advisory locks that guard a find-or-create. */
const NAME_LOCK_CLASS = 0x6d7164;

/** Socket-level errors that mean the server is not there (or went away). */
const UNREACHABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOENT',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/** SQLSTATEs of a server that is going or not ready: admin/crash shutdown, cannot connect now. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** Disk full, read-only transaction (a hot standby, default_transaction_read_only), I/O error. */
const READONLY_SQLSTATES = new Set(['53100', '25006', '58030']);
/** Worth retrying the whole transaction: serialization failure, deadlock. */
const RETRY_SQLSTATES = new Set(['40001', '40P01']);

function errCode(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

/** Whether `e` says the database cannot be reached (rather than refusing this statement). */
export function isUnavailable(e: unknown): boolean {
  const code = errCode(e);
  if (code !== undefined && (UNREACHABLE_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code))) return true;
  if (code !== undefined && /^08[0-9A-Z]{3}$/.test(code)) return true;
  const msg = e instanceof Error ? e.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect/i.test(
    msg,
  );
}

/** A pg error as the store's coded error (MqdException), or itself when it is not the store's fault. */
function toStoreError(e: unknown): unknown {
  if (e instanceof MqdException) return e;
  const code = errCode(e);
  const msg = e instanceof Error ? e.message : String(e);
  if (isUnavailable(e)) {
    // The driver's text names the database's host or socket: kept out of the API's answer.
    const why = code ?? (/terminated/i.test(msg) ? 'connection terminated' : 'connection closed');
    return Object.assign(
      new MqdException(mqdError('MQD_E_STORE_UNAVAILABLE', `the PostgreSQL store is out of reach (${why})`)),
      { cause: e },
    );
  }
  if (code !== undefined && READONLY_SQLSTATES.has(code)) {
    return new MqdException(
      mqdError('MQD_E_STORE_READONLY', `PostgreSQL refused the write (${code}: ${msg}); reads still work`),
    );
  }
  return e;
}

/** INT8 (bigint, count(*)) as a JS number; every other type as pg parses it. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

interface Positional {
  readonly text: string;
  readonly names: readonly string[];
}

const positional = new Map<string, Positional>();

/** `@name` placeholders as `$n` (one number per name), remembered per query text. */
function toPositional(sql: string): Positional {
  let p = positional.get(sql);
  if (p === undefined) {
    const names: string[] = [];
    const text = sql.replace(/@([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
      const i = names.indexOf(name);
      if (i >= 0) return `$${i + 1}`;
      names.push(name);
      return `$${names.length}`;
    });
    p = { text, names };
    positional.set(sql, p);
  }
  return p;
}

type Queryable = Pick<pg.ClientBase, 'query'>;

async function query<R extends pg.QueryResultRow>(
  c: Queryable,
  sql: string,
  params?: Params,
): Promise<pg.QueryResult<R>> {
  const p = toPositional(sql);
  const values = p.names.map((n) => {
    if (params === undefined || !(n in params)) throw new Error(`the query's parameter @${n} has no value`);
    return params[n];
  });
  try {
    return await c.query<R>(p.text, values);
  } catch (e) {
    throw toStoreError(e);
  }
}

/** Statements on one client or on the pool. */
class On implements Executor {
  constructor(private readonly c: Queryable) {}

  async run(sql: string, params?: Params): Promise<number> {
    return (await query(this.c, sql, params)).rowCount ?? 0;
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return (await query<R & pg.QueryResultRow>(this.c, sql, params)).rows[0];
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return (await query<R & pg.QueryResultRow>(this.c, sql, params)).rows;
  }
}

export interface PgStoreOptions {
  /** For tests of the migration machinery; default the PostgreSQL side of the history. */
  readonly migrations?: readonly Migration[];
  /** Pool size; default 10. */
  readonly maxConnections?: number;
}

export class PgDialect extends On implements Dialect {
  readonly name = 'postgres' as const;
  readonly forUpdate = ' FOR UPDATE';
  readonly forShare = ' FOR SHARE';
  readOnlyReason: string | null = null;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    readonly migrationsApplied: readonly number[],
  ) {
    super(pool);
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  /** A refusal (disk full, read-only) is remembered in readOnlyReason until a write works. */
  async write<T>(fn: () => Promise<T>): Promise<T> {
    try {
      const r = await fn();
      this.readOnlyReason = null;
      return r;
    } catch (e) {
      const err = toStoreError(e);
      if (err instanceof MqdException && err.code === 'MQD_E_STORE_READONLY')
        this.readOnlyReason = err.message;
      throw err;
    }
  }

  transaction<T>(fn: (x: Executor) => Promise<T>): Promise<T> {
    return this.write(async () => {
      for (let attempt = 1; ; attempt++) {
        const c = await this.pool.connect().catch((e: unknown) => {
          throw toStoreError(e);
        });
        let broken = false;
        try {
          await c.query('BEGIN');
          const r = await fn(new On(c));
          await c.query('COMMIT');
          return r;
        } catch (e) {
          broken = isUnavailable(e) || isUnavailable((e as { cause?: unknown }).cause);
          if (!broken) await c.query('ROLLBACK').catch(() => undefined);
          if (attempt < 5 && RETRY_SQLSTATES.has(errCode(e) ?? '')) continue;
          throw e;
        } finally {
          // A client whose connection broke is destroyed, not returned to the pool.
          c.release(broken);
        }
      }
    });
  }

  async lockRow(x: Executor, table: 'jobs', id: string): Promise<void> {
    await x.get(`SELECT id FROM ${table} WHERE id = @id FOR UPDATE`, { id });
  }

  async lockName(x: Executor, key: string): Promise<void> {
    await x.get('SELECT pg_advisory_xact_lock(@cls, hashtext(@key))', { cls: NAME_LOCK_CLASS, key });
  }

  inList(column: string, param: string, type: 'text' | 'integer'): string {
    return `${column} = ANY(CAST(@${param} AS ${type}[]))`;
  }

  list(values: readonly (string | number)[]): unknown {
    return values;
  }
}

async function migrate(
  pool: pg.Pool,
  migrations: readonly Migration[],
  clock: () => number,
): Promise<number[]> {
  const c = await pool.connect();
  try {
    // Two instances starting together: the second waits here and then finds nothing to do.
    await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      // Created only when missing: a current schema opens without a write (a read-only server).
      const exists = (await c.query<{ e: boolean }>("SELECT to_regclass('schema_version') IS NOT NULL AS e"))
        .rows[0]?.e;
      if (!exists) {
        await c.query(
          'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)',
        );
      }
      const current = (await c.query<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_version'))
        .rows[0]?.v;
      const applied: number[] = [];
      for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
        if (m.version <= (current ?? 0)) continue;
        // Each migration and its version row commit together (PostgreSQL's DDL is transactional).
        await c.query('BEGIN');
        try {
          await c.query(m.sql);
          await c.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)', [
            m.version,
            clock(),
          ]);
          await c.query('COMMIT');
        } catch (e) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw e;
        }
        applied.push(m.version);
      }
      return applied;
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    }
  } finally {
    c.release();
  }
}

/** The store on a PostgreSQL database (shared by every instance pointed at it). */
export class PgStore extends SqlStore {
  /**
   * Connects to the database at `url` (postgres:// or postgresql://; a Unix socket as
   * ?host=/dir) and brings its schema to the current version. Fails with
   * MQD_E_STORE_UNAVAILABLE when the database cannot be reached.
   */
  static async open(
    url: string,
    retention: RetentionPolicy,
    clock: () => number = Date.now,
    opts: PgStoreOptions = {},
  ): Promise<PgStore> {
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.maxConnections ?? 10,
      types: TYPES,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle client whose server went away: the pool drops it; no unhandled 'error' event.
    pool.on('error', () => undefined);
    try {
      const applied = await migrate(pool, opts.migrations ?? migrationsFor('postgres'), clock);
      return new PgStore(new PgDialect(pool, applied), retention, clock);
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw toStoreError(e);
    }
  }
}
