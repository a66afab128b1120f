// A real PostgreSQL server for tests: Debian's postgresql-15, initialised in a fresh temporary
// directory and listening on a Unix socket in that directory only (no TCP: listen_addresses
// is empty), so tests running side by side never meet. PostgreSQL refuses to run as root, so
// initdb, pg_ctl and pg_isready run as the `postgres` system user (setpriv), which owns the
// directory. Readiness is waited on with pg_isready, never a sleep. `stop()` stops the server
// (pg_ctl -m immediate) and removes the directory; `down()` / `up()` stop and start the same
// server (its data kept) for the tests of a database that goes away and comes back.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { done, pending, waitFor } from './wait.js';

const run = promisify(execFile);

/** Debian's PostgreSQL 15 binaries (postgresql-15, installed by scripts/provision.sh). */
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';
/** The system user the server runs as (it refuses root). */
const PG_USER = 'postgres';

export interface PostgresServer {
  /** postgresql://postgres@/postgres?host=DIR&port=PORT: the superuser on the `postgres` database. */
  readonly url: string;
  /** The URL of another database of this server (create it first: createDatabase). */
  urlOf(database: string): string;
  /** Creates a new, empty database named `prefix` and a number unique on this server; its URL. */
  createDatabase(prefix: string): Promise<string>;
  /** The socket directory (also the server's temporary directory). */
  readonly dir: string;
  readonly port: number;
  /** Stops the server (immediate: like a crash, it recovers on the next start); data kept. */
  down(): Promise<void>;
  /** Starts the server again after down(), and waits until it accepts connections. */
  up(): Promise<void>;
  /** down() then up(). */
  restart(): Promise<void>;
  /** Stops the server and removes its directory; safe to call twice, or after a failed start. */
  stop(): Promise<void>;
}

export function postgresAvailable(): boolean {
  return existsSync(join(POSTGRES_BIN, 'pg_ctl'));
}

function ids(user: string): Promise<{ uid: number; gid: number }> {
  return Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]).then(([u, g]) => ({
    uid: Number(u.stdout.trim()),
    gid: Number(g.stdout.trim()),
  }));
}

/** Runs a PostgreSQL program as the postgres user (setpriv when we are root). */
function postgresArgv(cmd: string, args: readonly string[]): [string, ...string[]] {
  const bin = join(POSTGRES_BIN, cmd);
  return process.getuid?.() === 0
    ? ['setpriv', '--reuid', PG_USER, '--regid', PG_USER, '--init-groups', '--', bin, ...args]
    : [bin, ...args];
}

async function asPostgres(cmd: string, args: readonly string[], cwd: string): Promise<string> {
  const [file, ...rest] = postgresArgv(cmd, args);
  try {
    const r = await run(file, rest, {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: cwd },
      timeout: 60_000,
    });
    return r.stdout;
  } catch (e) {
    const x = e as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${x.message}\n${x.stdout ?? ''}${x.stderr ?? ''}`);
  }
}

/** initdb + pg_ctl start in a fresh temporary directory; stop() it in afterAll. */
export async function startPostgres(): Promise<PostgresServer> {
  if (!postgresAvailable()) {
    throw new Error(`PostgreSQL 15 is not installed (${POSTGRES_BIN}): run scripts/provision.sh`);
  }
  // Short path: a Unix socket's path must fit in 107 bytes.
  const dir = mkdtempSync(join(tmpdir(), 'mqd-pg-'));
  const data = join(dir, 'data');
  // The port only names the socket file (.s.PGSQL.PORT) in our own directory: no TCP.
  const port = 5432;
  let running = false;
  let removed = false;
  const pgctl = (args: readonly string[]) => asPostgres('pg_ctl', ['-D', data, ...args], dir);
  const opts = `-c listen_addresses='' -c unix_socket_directories=${dir} -p ${port} -c fsync=off -c full_page_writes=off`;

  const ready = () =>
    waitFor(
      async () => {
        try {
          await asPostgres(
            'pg_isready',
            ['-h', dir, '-p', String(port), '-U', PG_USER, '-d', 'postgres'],
            dir,
          );
          return done(true);
        } catch (e) {
          return pending((e as Error).message.split('\n')[0]);
        }
      },
      { timeoutMs: 60_000, what: `PostgreSQL accepting connections on ${dir}` },
    );

  const up = async () => {
    await pgctl(['start', '-l', join(dir, 'server.log'), '-o', opts]);
    running = true;
    await ready();
  };
  const down = async () => {
    if (!running) return;
    await pgctl(['stop', '-m', 'immediate', '-w']);
    running = false;
  };
  // A test worker that dies without its afterAll (killed, a hook timeout) still stops the server:
  // a watchdog shell blocks reading a pipe from this process; the pipe's end (this process gone,
  // or stop()) lets it stop the server and remove the directory.
  const [stopFile, ...stopArgs] = postgresArgv('pg_ctl', ['-D', data, 'stop', '-m', 'immediate']);
  const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
  const watchdog = spawn(
    'sh',
    [
      '-c',
      `cat >/dev/null; ${[stopFile, ...stopArgs].map(quote).join(' ')} >/dev/null 2>&1; rm -rf ${quote(dir)}`,
    ],
    { stdio: ['pipe', 'ignore', 'ignore'], detached: true, cwd: '/' },
  );
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void }).unref?.();
  const releaseWatchdog = () => watchdog.stdin?.end();
  const stop = async () => {
    try {
      await down();
    } finally {
      if (!removed) {
        removed = true;
        rmSync(dir, { recursive: true, force: true });
      }
      releaseWatchdog();
    }
  };

  try {
    const { uid, gid } = await ids(PG_USER);
    chmodSync(dir, 0o700);
    if (process.getuid?.() === 0) chownSync(dir, uid, gid);
    mkdirSync(data, { mode: 0o700 });
    if (process.getuid?.() === 0) chownSync(data, uid, gid);
    await asPostgres(
      'initdb',
      ['-D', data, '-U', PG_USER, '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'],
      dir,
    );
    await up();
  } catch (e) {
    await stop().catch(() => undefined);
    throw e;
  }

  const urlOf = (database: string) =>
    `postgresql://${PG_USER}@/${encodeURIComponent(database)}?host=${encodeURIComponent(dir)}&port=${port}`;
  let databases = 0;
  const createDatabase = async (prefix: string) => {
    if (!/^[a-z][a-z0-9_]{0,40}$/.test(prefix)) throw new Error(`not a database name prefix: ${prefix}`);
    const name = `${prefix}_${++databases}`;
    await asPostgres('createdb', ['-h', dir, '-p', String(port), '-U', PG_USER, name], dir);
    return urlOf(name);
  };
  return {
    url: urlOf('postgres'),
    urlOf,
    createDatabase,
    dir,
    port,
    down,
    up,
    restart: async () => {
      await down();
      await up();
    },
    stop,
  };
}
