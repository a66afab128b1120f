// The aggregator's configuration, read and validated in one place. Each setting has a CLI
// flag and an MQD_* environment variable; the flag wins over the variable, the variable over
// the default. Nothing else in the server reads process.env.
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type ApiWatchPolicy,
  DEFAULT_WATCH_POLICY,
  err,
  type MqdError,
  mqdError,
  ok,
  type Result,
} from '@mqd/model';
import { derivedClusterSecret, MIN_CLUSTER_SECRET_CHARS } from '../cluster/seal.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../protocol/agent-protocol.js';
import { isLoopback } from '../shared/loopback.js';
import { readSecretFile } from '../shared/secrets.js';
import { parseStoreUrl } from '../store/store-url.js';

export const SERVER_VERSION = '0.1.0';

/** Levels of the server log (pino's), most severe first; `silent` logs nothing. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface ServerConfig {
  /** TCP port; 0 = any free port. */
  readonly port: number;
  /** Address to listen on; 127.0.0.1 unless the aggregator must be reachable from other nodes. */
  readonly host: string;
  /** Directory of mqd.sqlite, or ':memory:' for a store that ends with the process. */
  readonly dataDir: string;
  /**
   * --store / MQD_STORE_URL: postgres://... opens the PostgreSQL store (store-open.ts); null,
   * `sqlite:` or a directory keeps SQLite. A secret (it may hold a password): never shown.
   */
  readonly storeUrl: string | null;
  /** Shared token of the agents; null = generate one at start (printed). */
  readonly agentToken: string | null;
  /** Login token of the admin user; null = generate one at start (printed with the URL). */
  readonly adminToken: string | null;
  /** Bearer token that may read /metrics (and nothing else); null: admins only. */
  readonly metricsToken: string | null;
  /** Request header naming the user, set by a trusted reverse proxy; null = not trusted. */
  readonly proxyUserHeader: string | null;
  /**
   * Addresses or CIDR blocks of the reverse proxies whose proxyUserHeader is believed
   * (comma-separated on the command line); the header from any other peer is ignored.
   */
  readonly trustedProxies: readonly string[];
  /** PEM files of the server's TLS certificate and key; both null = plain HTTP. */
  readonly tlsCert: string | null;
  readonly tlsKey: string | null;
  /** Plain HTTP on a non-loopback address (agent tokens and sessions readable on the wire). */
  readonly allowInsecureHttp: boolean;
  /** Agents may present the shared agent token instead of their per-host token. */
  readonly allowSharedAgentToken: boolean;
  /**
   * The secret every instance of a cluster (one PostgreSQL store) seals its messages to the
   * others with (cluster/seal.ts); null: derived from the agent secret (clusterSecretOf).
   */
  readonly clusterSecret: string | null;
  /** Largest snapshot JSON kept, bytes (MQD_E_TOO_LARGE above it). */
  readonly maxSnapshotBytes: number;
  /** Audit rows and ended jobs older than this are removed by the hourly sweep; 0 = never. */
  readonly auditRetentionSeconds: number;
  /** Base URL for share links; null = derived from each request's Host. */
  readonly publicUrl: string | null;
  /** Directory of the built dashboard to serve at /; null = API only. */
  readonly webRoot: string | null;
  readonly maxSnapshotsPerJob: number;
  readonly maxSnapshotAgeSeconds: number;
  /** Expensive requests (snapshot, attach, share, login) per user per window. */
  readonly rateLimitMax: number;
  readonly rateLimitWindowMs: number;
  /** GET /api/fleet requests per user per rate-limit window. */
  readonly fleetRateLimitMax: number;
  /** Largest agent message accepted, bytes. */
  readonly maxMessageBytes: number;
  /** Snapshot every attached job this often; 0 = never. */
  readonly autoSnapshotSeconds: number;
  /** How long an agent has to answer a snapshot request. */
  readonly snapshotTimeoutMs: number;
  /** A request whose agent says nothing for this long fails with MQD_E_AGENT_SILENT (hub.ts). */
  readonly agentSilenceMs: number;
  /** A job is reported hung when this many consecutive snapshots have equal queues. */
  readonly hungSnapshots: number;
  readonly shareTtlSeconds: number;
  readonly maxShareTtlSeconds: number;
  readonly sessionTtlSeconds: number;
  /** Life of the login tokens given to users (POST /api/admin/users); 0 = never expire. */
  readonly loginTokenTtlSeconds: number;
  /** gzip level of stored snapshots (1 = fastest). */
  readonly gzipLevel: number;
  /**
   * Directories whose core files users may open as jobs (attach `{coresDir}`), each an absolute
   * path; a core directory must resolve (symlinks followed) inside one. Empty: no cores.
   */
  readonly coreDirs: readonly string[];
  /** Least severe level the server log (stderr, one JSON line per event) writes. */
  readonly logLevel: LogLevel;
  // The hang watch (docs/hang-watch.md). These seed the stored policy at the first start;
  // after that the admins' POST /api/admin/watch decides (the store keeps it).
  readonly watchEnabled: boolean;
  readonly watchPeriodSeconds: number;
  readonly watchUsers: readonly string[];
  readonly watchPartitions: readonly string[];
  readonly watchAccounts: readonly string[];
  /** Stop time any one rank may spend stopped by the watcher per hour, ms. */
  readonly watchStopBudgetMs: number;
  readonly watchHungAfter: number;
  /** Where hang notifications are POSTed (never logged or shown whole: they carry secrets). */
  readonly watchWebhooks: readonly string[];
  /**
   * Keep `mqd capture` cores of a job when it becomes hung (once per episode), in a
   * subdirectory of the first --core-dir; refused without a core directory.
   */
  readonly watchCaptureCores: boolean;
}

type Kind =
  | 'int'
  | 'string'
  | 'token'
  | 'tokenFile'
  | 'clusterSecretFile'
  | 'header'
  | 'list'
  | 'bool'
  | 'dirs'
  | 'level'
  | 'onoff'
  | 'names'
  | 'urls'
  | 'store';
interface Setting {
  readonly key: keyof ServerConfig;
  readonly flag: string;
  readonly env: string;
  readonly kind: Kind;
  readonly min?: number;
  readonly max?: number;
  readonly help: string;
}

const SETTINGS: readonly Setting[] = [
  { key: 'port', flag: 'port', env: 'MQD_PORT', kind: 'int', min: 0, max: 65535, help: 'TCP port' },
  {
    key: 'logLevel',
    flag: 'log-level',
    env: 'MQD_LOG_LEVEL',
    kind: 'level',
    help: 'server log level on stderr (fatal, error, warn, info, debug, trace, silent)',
  },
  { key: 'host', flag: 'host', env: 'MQD_HOST', kind: 'string', help: 'listen address' },
  {
    key: 'dataDir',
    flag: 'data-dir',
    env: 'MQD_DATA_DIR',
    kind: 'string',
    help: "store directory or ':memory:'",
  },
  {
    key: 'storeUrl',
    flag: 'store',
    env: 'MQD_STORE_URL',
    kind: 'store',
    help: 'the store: postgres://USER@HOST/DB shares one PostgreSQL database between instances (prefer the variable: the URL may hold a password); default SQLite in --data-dir',
  },
  // Each credential from a file first (mode 600, ours): a flag shows in `ps`, a variable is
  // inherited by what we start. Both are read once and then dropped from the environment.
  {
    key: 'agentToken',
    flag: 'agent-token-file',
    env: 'MQD_AGENT_TOKEN_FILE',
    kind: 'tokenFile',
    help: 'file holding the agent secret (mode 600)',
  },
  {
    key: 'agentToken',
    flag: 'agent-token',
    env: 'MQD_AGENT_TOKEN',
    kind: 'token',
    help: 'the agent secret itself (prefer the file)',
  },
  {
    key: 'adminToken',
    flag: 'admin-token-file',
    env: 'MQD_ADMIN_TOKEN_FILE',
    kind: 'tokenFile',
    help: 'file holding the admin login token (mode 600)',
  },
  {
    key: 'adminToken',
    flag: 'admin-token',
    env: 'MQD_ADMIN_TOKEN',
    kind: 'token',
    help: 'the admin login token itself (prefer the file)',
  },
  {
    key: 'metricsToken',
    flag: 'metrics-token-file',
    env: 'MQD_METRICS_TOKEN_FILE',
    kind: 'tokenFile',
    help: 'file holding the bearer token for Prometheus to read /metrics (mode 600; admins may too)',
  },
  {
    key: 'metricsToken',
    flag: 'metrics-token',
    env: 'MQD_METRICS_TOKEN',
    kind: 'token',
    help: 'the metrics token itself (prefer the file)',
  },
  {
    key: 'proxyUserHeader',
    flag: 'proxy-user-header',
    env: 'MQD_PROXY_USER_HEADER',
    kind: 'header',
    help: 'trusted reverse-proxy user header, e.g. X-Remote-User',
  },
  {
    key: 'trustedProxies',
    flag: 'trusted-proxy',
    env: 'MQD_TRUSTED_PROXY',
    kind: 'list',
    help: 'proxy addresses/CIDRs whose user header is believed (comma-separated)',
  },
  { key: 'tlsCert', flag: 'tls-cert', env: 'MQD_TLS_CERT', kind: 'string', help: 'TLS certificate (PEM)' },
  { key: 'tlsKey', flag: 'tls-key', env: 'MQD_TLS_KEY', kind: 'string', help: 'TLS private key (PEM)' },
  {
    key: 'allowInsecureHttp',
    flag: 'allow-insecure-http',
    env: 'MQD_ALLOW_INSECURE_HTTP',
    kind: 'bool',
    help: 'plain HTTP on a non-loopback address (1/true)',
  },
  {
    key: 'allowSharedAgentToken',
    flag: 'allow-shared-agent-token',
    env: 'MQD_ALLOW_SHARED_AGENT_TOKEN',
    kind: 'bool',
    help: 'accept the shared agent token from any host (default: per-host tokens only)',
  },
  {
    key: 'clusterSecret',
    flag: 'cluster-secret-file',
    env: 'MQD_CLUSTER_SECRET_FILE',
    kind: 'clusterSecretFile',
    help: 'file holding the secret the instances on one PostgreSQL store seal their messages with (mode 600, the same on every instance; needed with --allow-shared-agent-token)',
  },
  {
    key: 'maxSnapshotBytes',
    flag: 'max-snapshot-bytes',
    env: 'MQD_MAX_SNAPSHOT_BYTES',
    kind: 'int',
    min: 1024,
    max: 16 * 1024 * 1024 * 1024,
    help: 'largest snapshot JSON stored',
  },
  {
    key: 'auditRetentionSeconds',
    flag: 'audit-retention-seconds',
    env: 'MQD_AUDIT_RETENTION_SECONDS',
    kind: 'int',
    min: 0,
    max: 10 * 365 * 86400,
    help: 'drop audit rows and ended jobs older than this (0 = never)',
  },
  {
    key: 'publicUrl',
    flag: 'public-url',
    env: 'MQD_PUBLIC_URL',
    kind: 'string',
    help: 'base URL of share links',
  },
  {
    key: 'webRoot',
    flag: 'web-root',
    env: 'MQD_WEB_ROOT',
    kind: 'string',
    help: 'built dashboard directory',
  },
  {
    key: 'maxSnapshotsPerJob',
    flag: 'max-snapshots-per-job',
    env: 'MQD_MAX_SNAPSHOTS_PER_JOB',
    kind: 'int',
    min: 0,
    max: 1_000_000,
    help: 'snapshots kept per job (0 = all)',
  },
  {
    key: 'maxSnapshotAgeSeconds',
    flag: 'max-snapshot-age-seconds',
    env: 'MQD_MAX_SNAPSHOT_AGE_SECONDS',
    kind: 'int',
    min: 0,
    max: 10 * 365 * 86400,
    help: 'drop snapshots older than this (0 = never)',
  },
  {
    key: 'rateLimitMax',
    flag: 'rate-limit-max',
    env: 'MQD_RATE_LIMIT_MAX',
    kind: 'int',
    min: 1,
    max: 1_000_000,
    help: 'expensive requests per window per user',
  },
  {
    key: 'rateLimitWindowMs',
    flag: 'rate-limit-window-ms',
    env: 'MQD_RATE_LIMIT_WINDOW_MS',
    kind: 'int',
    min: 100,
    max: 86_400_000,
    help: 'rate-limit window',
  },
  {
    key: 'fleetRateLimitMax',
    flag: 'fleet-rate-limit-max',
    env: 'MQD_FLEET_RATE_LIMIT_MAX',
    kind: 'int',
    min: 1,
    max: 1_000_000,
    help: 'GET /api/fleet requests per window per user',
  },
  {
    key: 'maxMessageBytes',
    flag: 'max-message-bytes',
    env: 'MQD_MAX_MESSAGE_BYTES',
    kind: 'int',
    min: 4096,
    max: 1 << 30,
    help: 'largest agent message',
  },
  {
    key: 'autoSnapshotSeconds',
    flag: 'auto-snapshot-seconds',
    env: 'MQD_AUTO_SNAPSHOT_SECONDS',
    kind: 'int',
    min: 0,
    max: 86400,
    help: 'snapshot every attached job this often (0 = off)',
  },
  {
    key: 'snapshotTimeoutMs',
    flag: 'snapshot-timeout-ms',
    env: 'MQD_SNAPSHOT_TIMEOUT_MS',
    kind: 'int',
    min: 100,
    max: 600_000,
    help: 'agent answer deadline',
  },
  {
    key: 'agentSilenceMs',
    flag: 'agent-silence-ms',
    env: 'MQD_AGENT_SILENCE_MS',
    kind: 'int',
    min: 1000,
    max: 600_000,
    help: 'fail an agent silent this long mid-request (frozen): MQD_E_AGENT_SILENT',
  },
  {
    key: 'hungSnapshots',
    flag: 'hung-snapshots',
    env: 'MQD_HUNG_SNAPSHOTS',
    kind: 'int',
    min: 2,
    max: 1000,
    help: 'equal consecutive snapshots that make a job hung',
  },
  {
    key: 'shareTtlSeconds',
    flag: 'share-ttl-seconds',
    env: 'MQD_SHARE_TTL_SECONDS',
    kind: 'int',
    min: 1,
    max: 365 * 86400,
    help: 'default life of a share link',
  },
  {
    key: 'maxShareTtlSeconds',
    flag: 'max-share-ttl-seconds',
    env: 'MQD_MAX_SHARE_TTL_SECONDS',
    kind: 'int',
    min: 1,
    max: 365 * 86400,
    help: 'longest life of a share link',
  },
  {
    key: 'sessionTtlSeconds',
    flag: 'session-ttl-seconds',
    env: 'MQD_SESSION_TTL_SECONDS',
    kind: 'int',
    min: 60,
    max: 365 * 86400,
    help: 'login session life',
  },
  {
    key: 'loginTokenTtlSeconds',
    flag: 'login-token-ttl-seconds',
    env: 'MQD_LOGIN_TOKEN_TTL_SECONDS',
    kind: 'int',
    min: 0,
    max: 10 * 365 * 86400,
    help: 'life of user login tokens (0 = never)',
  },
  {
    key: 'coreDirs',
    flag: 'core-dir',
    env: 'MQD_CORE_DIRS',
    kind: 'dirs',
    help: 'directory whose core files users may open as jobs (repeatable; env: colon-separated)',
  },
  {
    key: 'watchEnabled',
    flag: 'watch',
    env: 'MQD_WATCH_ENABLED',
    kind: 'onoff',
    help: 'hang watch of every discovered MPI job: on or off (seeds the stored policy)',
  },
  {
    key: 'watchPeriodSeconds',
    flag: 'watch-period',
    env: 'MQD_WATCH_PERIOD',
    kind: 'int',
    min: 1,
    max: 86_400,
    help: 'seconds between two samples of a watched job',
  },
  {
    key: 'watchUsers',
    flag: 'watch-users',
    env: 'MQD_WATCH_USERS',
    kind: 'names',
    help: 'watch only these users (comma-separated names; empty: everyone)',
  },
  {
    key: 'watchPartitions',
    flag: 'watch-partitions',
    env: 'MQD_WATCH_PARTITIONS',
    kind: 'names',
    help: 'watch only jobs of these Slurm partitions (comma-separated)',
  },
  {
    key: 'watchAccounts',
    flag: 'watch-accounts',
    env: 'MQD_WATCH_ACCOUNTS',
    kind: 'names',
    help: 'watch only jobs of these Slurm accounts (comma-separated)',
  },
  {
    key: 'watchStopBudgetMs',
    flag: 'watch-stop-budget',
    env: 'MQD_WATCH_STOP_BUDGET',
    kind: 'int',
    min: 0,
    max: 3_600_000,
    help: 'ms any one rank may be stopped by the watcher per hour',
  },
  {
    key: 'watchHungAfter',
    flag: 'watch-hung-after',
    env: 'MQD_WATCH_HUNG_AFTER',
    kind: 'int',
    min: 2,
    max: 1000,
    help: 'samples with nothing moved before a job blocked in MPI is hung',
  },
  {
    key: 'watchWebhooks',
    flag: 'watch-webhook',
    env: 'MQD_WATCH_WEBHOOKS',
    kind: 'urls',
    help: 'http(s) URL hang notifications are POSTed to (repeatable or comma-separated; prefer the variable: URLs carry secrets)',
  },
  {
    key: 'watchCaptureCores',
    flag: 'watch-capture-cores',
    env: 'MQD_WATCH_CAPTURE_CORES',
    kind: 'onoff',
    help: 'keep cores of a job when it hangs (once per hang), as its owner, under the first --core-dir: on or off',
  },
  {
    key: 'gzipLevel',
    flag: 'gzip-level',
    env: 'MQD_GZIP_LEVEL',
    kind: 'int',
    min: 1,
    max: 9,
    help: 'gzip level',
  },
];

export const DEFAULT_CONFIG: ServerConfig = {
  port: 8080,
  host: '127.0.0.1',
  dataDir: join(homedir(), '.local', 'share', 'mqd'),
  storeUrl: null,
  agentToken: null,
  adminToken: null,
  metricsToken: null,
  proxyUserHeader: null,
  trustedProxies: [],
  tlsCert: null,
  tlsKey: null,
  allowInsecureHttp: false,
  allowSharedAgentToken: false,
  clusterSecret: null,
  maxSnapshotBytes: 1024 * 1024 * 1024,
  auditRetentionSeconds: 90 * 86400,
  publicUrl: null,
  webRoot: null,
  maxSnapshotsPerJob: 100,
  maxSnapshotAgeSeconds: 7 * 86400,
  rateLimitMax: 30,
  rateLimitWindowMs: 60_000,
  fleetRateLimitMax: 600,
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  autoSnapshotSeconds: 0,
  snapshotTimeoutMs: 30_000,
  agentSilenceMs: 8000,
  hungSnapshots: 3,
  shareTtlSeconds: 7 * 86400,
  maxShareTtlSeconds: 30 * 86400,
  sessionTtlSeconds: 12 * 3600,
  loginTokenTtlSeconds: 30 * 86400,
  gzipLevel: 3,
  coreDirs: [],
  logLevel: 'info',
  watchEnabled: DEFAULT_WATCH_POLICY.enabled,
  watchPeriodSeconds: DEFAULT_WATCH_POLICY.periodSeconds,
  watchUsers: DEFAULT_WATCH_POLICY.users,
  watchPartitions: DEFAULT_WATCH_POLICY.partitions,
  watchAccounts: DEFAULT_WATCH_POLICY.accounts,
  watchStopBudgetMs: DEFAULT_WATCH_POLICY.stopBudgetMsPerRankHour,
  watchHungAfter: DEFAULT_WATCH_POLICY.hungAfterSamples,
  watchWebhooks: [],
  watchCaptureCores: false,
};

/** The watch policy the flags give (the store's until an admin replaces it). */
export function watchPolicyOf(c: ServerConfig): ApiWatchPolicy {
  return {
    enabled: c.watchEnabled,
    periodSeconds: c.watchPeriodSeconds,
    users: [...c.watchUsers],
    partitions: [...c.watchPartitions],
    accounts: [...c.watchAccounts],
    stopBudgetMsPerRankHour: c.watchStopBudgetMs,
    hungAfterSamples: c.watchHungAfter,
    ...(c.watchCaptureCores ? { captureCores: true } : {}),
  };
}

/** True when `a` and `b` name one setting (its variable and its flag: the flag wins). */
function sameSetting(a: string, b: string): boolean {
  const named = (x: string) => SETTINGS.find((s) => s.env === x || `--${s.flag}` === x);
  return named(a) === named(b);
}

/** `--flag value` help lines, for the CLI's --help. */
export function configHelp(): string {
  return SETTINGS.map((s) => `  --${s.flag.padEnd(26)} ${s.env.padEnd(30)} ${s.help}`).join('\n');
}

function parseValue(s: Setting, raw: string, from: string): Result<string | number | boolean | string[]> {
  const bad = (why: string) => err(mqdError('MQD_E_USAGE', `${from}: ${why}`));
  switch (s.kind) {
    case 'int': {
      if (!/^\d+$/.test(raw.trim())) return bad(`expected a whole number, got '${raw}'`);
      const n = Number(raw);
      if (n < (s.min ?? 0) || n > (s.max ?? Number.MAX_SAFE_INTEGER)) {
        return bad(`must be in [${s.min ?? 0}, ${s.max ?? Number.MAX_SAFE_INTEGER}], got ${n}`);
      }
      return ok(n);
    }
    case 'string':
      return raw.length === 0 ? bad('must not be empty') : ok(raw);
    case 'token':
      // Tokens guard the job's memory; a short one could be guessed.
      return raw.length < 16 ? bad('a token needs at least 16 characters') : ok(raw);
    case 'tokenFile': {
      const file = readSecretFile(raw);
      if (!file.ok) return bad(file.message);
      // Never quote the file: it is a secret, right or wrong.
      return file.value.length < 16
        ? bad(`the token in ${raw} has fewer than 16 characters`)
        : ok(file.value);
    }
    case 'clusterSecretFile': {
      const file = readSecretFile(raw);
      const refused = (why: string) => err(mqdError('MQD_E_CLUSTER_SECRET', `${from}: ${why}`));
      if (!file.ok) return refused(file.message);
      // Never quote the file: it is a secret, right or wrong.
      return file.value.length < MIN_CLUSTER_SECRET_CHARS
        ? refused(`the secret in ${raw} has fewer than ${MIN_CLUSTER_SECRET_CHARS} characters`)
        : ok(file.value);
    }
    case 'header':
      return /^[A-Za-z0-9-]{1,64}$/.test(raw) ? ok(raw.toLowerCase()) : bad(`'${raw}' is not a header name`);
    case 'level':
      return (LOG_LEVELS as readonly string[]).includes(raw)
        ? ok(raw)
        : bad(`expected one of ${LOG_LEVELS.join(', ')}, got '${raw}'`);
    case 'bool':
      if (/^(1|true|yes)$/i.test(raw)) return ok(true);
      return /^(0|false|no)$/i.test(raw) ? ok(false) : bad(`expected true or false, got '${raw}'`);
    case 'dirs': {
      const dirs = raw.split(':').filter((x) => x.length > 0);
      for (const d of dirs) {
        if (!isAbsolute(d) || d.split('/').includes('..')) {
          return bad(`'${d}' is not an absolute directory path without '..'`);
        }
      }
      return ok(dirs);
    }
    case 'onoff':
      if (/^(on|1|true|yes)$/i.test(raw)) return ok(true);
      return /^(off|0|false|no)$/i.test(raw) ? ok(false) : bad(`expected on or off, got '${raw}'`);
    case 'names': {
      const names = raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x.length > 0);
      for (const x of names) {
        if (x.length > 128 || /[\s"'\\]/.test(x)) return bad(`'${x.slice(0, 40)}' is not a name`);
      }
      return names.length > 1024 ? bad('at most 1024 names') : ok(names);
    }
    case 'urls': {
      const urls = raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x.length > 0);
      for (const x of urls) {
        let u: URL | null = null;
        try {
          u = new URL(x);
        } catch (e) {
          if (!(e instanceof TypeError)) throw e;
        }
        // Never quote the URL: its path or query is often the webhook's secret.
        if (u === null || (u.protocol !== 'http:' && u.protocol !== 'https:')) {
          return bad(`webhook ${urls.indexOf(x) + 1} is not an http(s) URL`);
        }
      }
      return ok(urls);
    }
    case 'store': {
      // Never quote the URL: it may hold the database password.
      const where = parseStoreUrl(raw);
      return where.ok ? ok(raw.trim()) : err(where.error);
    }
    case 'list': {
      const items = raw
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x.length > 0);
      for (const x of items) {
        if (parseCidr(x) === null) return bad(`'${x}' is not an IP address or CIDR block`);
      }
      return ok(items);
    }
  }
}

export interface ConfigSources {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly argv?: readonly string[];
  /** Applied last (tests, embedding); not validated beyond the type. */
  readonly overrides?: Partial<ServerConfig>;
}

/** The configuration from defaults, MQD_* variables and CLI flags, or the first problem. */
export function loadConfig(src: ConfigSources = {}): Result<ServerConfig, MqdError> {
  const out: Record<string, unknown> = { ...DEFAULT_CONFIG };
  const env = src.env ?? {};
  // A credential given both itself and as a file: which one is meant is not guessed.
  const credentialFrom = new Map<keyof ServerConfig, string>();
  const conflict = (s: Setting, from: string): MqdError | null => {
    if (s.kind !== 'token' && s.kind !== 'tokenFile' && s.kind !== 'clusterSecretFile') return null;
    const before = credentialFrom.get(s.key);
    credentialFrom.set(s.key, from);
    return before === undefined || before === from || sameSetting(before, from)
      ? null
      : mqdError('MQD_E_USAGE', `${before} and ${from} both give the ${s.key}: keep one (the file)`);
  };
  for (const s of SETTINGS) {
    const raw = env[s.env];
    if (raw === undefined || raw === '') continue;
    const clash = conflict(s, s.env);
    if (clash) return err(clash);
    const v = parseValue(s, raw, s.env);
    if (!v.ok) return v;
    out[s.key] = v.value;
  }
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    values = parseArgs({
      args: [...(src.argv ?? [])],
      options: Object.fromEntries(
        SETTINGS.map((s) =>
          s.kind === 'bool'
            ? [s.flag, { type: 'boolean' as const }]
            : s.kind === 'dirs' || s.kind === 'urls'
              ? [s.flag, { type: 'string' as const, multiple: true }]
              : [s.flag, { type: 'string' as const }],
        ),
      ),
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (e) {
    // parseArgs throws for unknown flags: that is a usage error, reported as a value.
    return err(mqdError('MQD_E_USAGE', (e as Error).message));
  }
  for (const s of SETTINGS) {
    const raw = values[s.flag];
    if (s.kind === 'bool' && raw === true) {
      out[s.key] = true;
      continue;
    }
    if (s.kind === 'dirs' && Array.isArray(raw)) {
      // Repeated flags add up; the flags, when given, replace the variable's list.
      const dirs: string[] = [];
      for (const one of raw) {
        const v = typeof one === 'string' && !one.includes(':') ? parseValue(s, one, `--${s.flag}`) : null;
        if (v === null)
          return err(mqdError('MQD_E_USAGE', `--${s.flag} takes one directory, got '${String(one)}'`));
        if (!v.ok) return v;
        dirs.push(...(v.value as string[]));
      }
      out[s.key] = dirs;
      continue;
    }
    if (s.kind === 'urls' && Array.isArray(raw)) {
      // Repeated or comma-separated; the flags, when given, replace the variable's list.
      const urls: string[] = [];
      for (const one of raw) {
        const v = parseValue(s, String(one), `--${s.flag}`);
        if (!v.ok) return v;
        urls.push(...(v.value as string[]));
      }
      out[s.key] = urls;
      continue;
    }
    if (typeof raw !== 'string') continue;
    const clash = conflict(s, `--${s.flag}`);
    if (clash) return err(clash);
    const v = parseValue(s, raw, `--${s.flag}`);
    if (!v.ok) return v;
    out[s.key] = v.value;
  }
  const cfg = { ...(out as unknown as ServerConfig), ...src.overrides };
  if ((cfg.tlsCert === null) !== (cfg.tlsKey === null)) {
    return err(mqdError('MQD_E_USAGE', '--tls-cert and --tls-key go together'));
  }
  if (cfg.tlsCert === null && !cfg.allowInsecureHttp && !isLoopback(cfg.host)) {
    return err(
      mqdError(
        'MQD_E_INSECURE',
        `plain HTTP on ${cfg.host} would send agent tokens and sessions in clear: pass --tls-cert and --tls-key, ` +
          'or --allow-insecure-http behind a TLS-terminating proxy',
      ),
    );
  }
  if (cfg.watchCaptureCores && cfg.coreDirs.length === 0) {
    return err(
      mqdError(
        'MQD_E_USAGE',
        '--watch-capture-cores on keeps cores under the first --core-dir, and none is given: add --core-dir DIR (MQD_CORE_DIRS), or leave --watch-capture-cores off',
      ),
    );
  }
  if (cfg.agentToken !== null) {
    const cluster = clusterSecretOf(cfg, cfg.agentToken);
    if (!cluster.ok) return cluster;
  }
  if (cfg.shareTtlSeconds > cfg.maxShareTtlSeconds) {
    return err(mqdError('MQD_E_USAGE', 'share-ttl-seconds must not exceed max-share-ttl-seconds'));
  }
  return ok(cfg);
}

/**
 * The secret this instance seals its messages to the other instances of its cluster with, when
 * its store is PostgreSQL (cluster/seal.ts); `agentSecret` is the agent secret in use (given, or
 * generated at start). The file's when given. Otherwise derived from the agent secret, which
 * the agents do not hold when they present per-host tokens; when the shared agent token is
 * allowed they do, and a file is required.
 */
export function clusterSecretOf(
  cfg: Pick<ServerConfig, 'storeUrl' | 'allowSharedAgentToken' | 'clusterSecret'>,
  agentSecret: string,
): Result<string, MqdError> {
  if (cfg.clusterSecret !== null) {
    return cfg.clusterSecret.length < MIN_CLUSTER_SECRET_CHARS
      ? err(
          mqdError(
            'MQD_E_CLUSTER_SECRET',
            `the cluster secret has fewer than ${MIN_CLUSTER_SECRET_CHARS} characters`,
          ),
        )
      : ok(cfg.clusterSecret);
  }
  const where = cfg.storeUrl === null ? null : parseStoreUrl(cfg.storeUrl);
  if (cfg.allowSharedAgentToken && where?.ok === true && where.value.kind === 'postgres') {
    return err(
      mqdError(
        'MQD_E_CLUSTER_SECRET',
        '--allow-shared-agent-token on a PostgreSQL store gives every agent the agent secret, from which the instances would otherwise derive the secret of their own channel',
      ),
    );
  }
  return ok(derivedClusterSecret(agentSecret));
}

/** An address or CIDR block as [address, prefix, family], or null when it is neither. */
export function parseCidr(v: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [addr = '', bits] = v.split('/');
  const family = isIP(addr);
  if (family === 0) return null;
  const maxBits = family === 4 ? 32 : 128;
  const prefix = bits === undefined ? maxBits : /^\d+$/.test(bits) ? Number(bits) : -1;
  if (prefix < 0 || prefix > maxBits) return null;
  return { address: addr, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}
