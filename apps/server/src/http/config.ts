// The aggregator's configuration, read and validated in one place. Each setting has a CLI
// flag and an MQD_* environment variable; the flag wins over the variable, the variable over
// the default. Nothing else in the server reads process.env.
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { parseArgs } from 'node:util';
import { type ApiWatchPolicy, err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { derivedClusterSecret, MIN_CLUSTER_SECRET_CHARS } from '../cluster/seal.js';
import { isLoopback } from '../shared/loopback.js';
import { readSecretFile } from '../shared/secrets.js';
import { parseStoreUrl } from '../store/store-url.js';

export const SERVER_VERSION = '0.1.0';

import { LOG_LEVELS, type LogLevel, SETTINGS, type Setting } from './settings.js';

export {
  CONFIG_TABLE_BEGIN,
  CONFIG_TABLE_END,
  configTable,
  configTableRows,
  withConfigTable,
} from './config-docs.js';
export { LOG_LEVELS, type LogLevel } from './settings.js';

/** The value each kind of setting holds. */
interface KindValue {
  readonly int: number;
  readonly string: string;
  readonly token: string;
  readonly tokenFile: string;
  readonly clusterSecretFile: string;
  readonly header: string;
  readonly list: readonly string[];
  readonly bool: boolean;
  readonly dirs: readonly string[];
  readonly level: LogLevel;
  readonly onoff: boolean;
  readonly names: readonly string[];
  readonly urls: readonly string[];
  readonly store: string;
}
type Row = (typeof SETTINGS)[number];
/** The aggregator's configuration: one field per key of SETTINGS, null where its default is. */
export type ServerConfig = {
  readonly [R in Row as R['key']]: KindValue[R['kind']] | (R['default'] extends null ? null : never);
};

export const DEFAULT_CONFIG: ServerConfig = Object.fromEntries(
  SETTINGS.map((s) => [s.key, s.default]),
) as unknown as ServerConfig;

/** The watch policy the flags give (the store's until an admin replaces it). */
export function watchPolicyOf(c: ServerConfig): ApiWatchPolicy {
  return {
    enabled: c.watchEnabled,
    periodSeconds: c.watchPeriodSeconds,
    users: [...c.watchUsers],
    partitions: [...c.watchPartitions],
    accounts: [...c.watchAccounts],
    ...(c.watchPrograms.length > 0 ? { programs: [...c.watchPrograms] } : {}),
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
  const credentialFrom = new Map<string, string>();
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
