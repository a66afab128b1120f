// SQLite's side of the store (sql-store.ts holds the queries): better-sqlite3 in WAL mode with
// synchronous=FULL, so a committed snapshot survives a crash of the process or the machine.
// Snapshots are kept as gzip of their JSON plus summary columns, so history and hung-job
// queries never decompress anything.
//
// better-sqlite3 is synchronous: a statement outside a transaction runs whole before any other
// JavaScript does. A transaction spans the awaits of SqlStore's code, so while one is open
// every other statement on the store waits for it (one connection, one transaction at a time):
// nothing outside it runs inside it. A full disk or an I/O error turns the store read-only
// (MQD_E_STORE_READONLY) until a restart; a damaged file is MQD_E_STORE_CORRUPT at open.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { MqdException, mqdError } from '@mqd/model';
import Database from 'better-sqlite3';
import type { Dialect, Executor, Params } from './sql-dialect.js';
import { SqlStore } from './sql-store.js';
import type { RetentionPolicy } from './store-port.js';
import { MIGRATIONS, type Migration } from './store-schema.js';

export interface StoreOptions {
  /** A directory for mqd.sqlite, or ':memory:'. */
  readonly dataDir: string;
  readonly retention: RetentionPolicy;
  readonly clock?: () => number;
  /** For tests of the migration machinery; default MIGRATIONS. */
  readonly migrations?: readonly Migration[];
}

/** SQLite errors that mean the disk, not the request, is at fault. */
const STORAGE_FAILURES = [
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_READONLY',
  'SQLITE_CANTOPEN',
  'SQLITE_CORRUPT',
];

function sqliteCode(e: unknown): string | null {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' && c.startsWith('SQLITE_') ? c : null;
}

/** `fn`'s value as a promise, its throw as a rejection. */
function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

/** Statements run at once, on the connection (inside a transaction when one is open). */
class Now implements Executor {
  constructor(private readonly db: Database.Database) {}

  // Prepared per call, not cached: a request's statements are counted by a test of the fleet's
  // queries (security-watch-fleet.test.ts).
  run(sql: string, params?: Params): Promise<number> {
    return settle(() => {
      const st = this.db.prepare(sql);
      return (params ? st.run(params) : st.run()).changes;
    });
  }

  get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return settle(() => {
      const st = this.db.prepare(sql);
      return (params ? st.get(params) : st.get()) as R | undefined;
    });
  }

  all<R>(sql: string, params?: Params): Promise<R[]> {
    return settle(() => {
      const st = this.db.prepare(sql);
      return (params ? st.all(params) : st.all()) as R[];
    });
  }
}

export class SqliteDialect implements Dialect {
  readonly name = 'sqlite' as const;
  readonly forUpdate = '';
  readonly forShare = '';
  readOnlyReason: string | null = null;
  private readonly now: Now;
  /** Settles when the open transaction ends; null while none is open. */
  private busy: Promise<void> | null = null;

  constructor(
    readonly db: Database.Database,
    readonly migrationsApplied: readonly number[],
  ) {
    this.now = new Now(db);
  }

  get isOpen(): boolean {
    return this.db.open;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  /** `fn` once no transaction is open, with nothing in between (it runs synchronously). */
  private async idle<T>(fn: () => Promise<T>): Promise<T> {
    while (this.busy !== null) await this.busy;
    return fn();
  }

  run(sql: string, params?: Params): Promise<number> {
    return this.busy === null ? this.now.run(sql, params) : this.idle(() => this.now.run(sql, params));
  }

  get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return this.busy === null ? this.now.get<R>(sql, params) : this.idle(() => this.now.get<R>(sql, params));
  }

  all<R>(sql: string, params?: Params): Promise<R[]> {
    return this.busy === null ? this.now.all<R>(sql, params) : this.idle(() => this.now.all<R>(sql, params));
  }

  async write<T>(fn: () => Promise<T>): Promise<T> {
    if (this.readOnlyReason !== null) {
      throw new MqdException(
        mqdError('MQD_E_STORE_READONLY', `the store is read-only: ${this.readOnlyReason}`),
      );
    }
    try {
      return await fn();
    } catch (e) {
      const code = sqliteCode(e);
      if (code !== null && STORAGE_FAILURES.some((c) => code.startsWith(c))) {
        this.readOnlyReason = `${code}: ${(e as Error).message}`;
        throw new MqdException(
          mqdError(
            'MQD_E_STORE_READONLY',
            `the store could not write (${this.readOnlyReason}); reads still work: free disk space, then restart`,
          ),
        );
      }
      throw e;
    }
  }

  transaction<T>(fn: (x: Executor) => Promise<T>): Promise<T> {
    return this.write(async () => {
      while (this.busy !== null) await this.busy;
      // From here to BEGIN nothing awaits: no other transaction can start in between.
      let done = (): void => undefined;
      this.busy = new Promise<void>((resolve) => {
        done = resolve;
      });
      try {
        this.db.exec('BEGIN');
        try {
          const r = await fn(this.now);
          this.db.exec('COMMIT');
          return r;
        } catch (e) {
          if (this.db.inTransaction) this.db.exec('ROLLBACK');
          throw e;
        }
      } finally {
        this.busy = null;
        done();
      }
    });
  }

  /** Nothing to do: the open transaction is the only one on the store. */
  async lockRow(): Promise<void> {}

  /** Nothing to do: the open transaction is the only one on the store. */
  async lockName(): Promise<void> {}

  inList(column: string, param: string): string {
    return `${column} IN (SELECT value FROM json_each(@${param}))`;
  }

  list(values: readonly (string | number)[]): unknown {
    return JSON.stringify(values);
  }
}

/** Opens (creating it 0600 in a 0700 directory) and migrates mqd.sqlite. */
function openSqlite(opts: StoreOptions, clock: () => number): SqliteDialect {
  const file = opts.dataDir === ':memory:' ? ':memory:' : join(opts.dataDir, 'mqd.sqlite');
  if (opts.dataDir !== ':memory:') {
    // 0700/0600 also when the directory or file already exists (mkdir's mode does not apply
    // then, and the umask would otherwise decide): snapshots hold other users' memory.
    mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    chmodSync(opts.dataDir, 0o700);
    if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
    for (const side of ['-wal', '-shm']) if (existsSync(file + side)) chmodSync(file + side, 0o600);
  }
  try {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    const check = db.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw Object.assign(new Error(String(check)), { code: 'SQLITE_CORRUPT' });
    return new SqliteDialect(db, migrate(db, opts.migrations ?? MIGRATIONS, clock));
  } catch (e) {
    const code = sqliteCode(e);
    if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
      throw new MqdException(
        mqdError(
          'MQD_E_STORE_CORRUPT',
          `${file} is damaged (${code}: ${(e as Error).message}): stop the server, move the file aside ` +
            `(mv ${file} ${file}.corrupt), then either restore a backup there or salvage it with ` +
            `\`sqlite3 ${file}.corrupt .recover | sqlite3 ${file}\`, and start again`,
        ),
      );
    }
    throw e;
  }
}

function migrate(db: Database.Database, migrations: readonly Migration[], clock: () => number): number[] {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  const current =
    (db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null }).v ?? 0;
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (m.version <= current) continue;
    // Each migration and its version row commit together: a crash leaves the old version.
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(m.version, clock());
    }).immediate();
    applied.push(m.version);
  }
  return applied;
}

/** The store on SQLite in `dataDir` (the embedded default), opened and migrated at construction. */
export class SqliteStore extends SqlStore {
  /** The connection, for tests and integrity checks. */
  readonly db: Database.Database;

  constructor(opts: StoreOptions) {
    const clock = opts.clock ?? Date.now;
    const d = openSqlite(opts, clock);
    super(d, opts.retention, clock);
    this.db = d.db;
  }
}
