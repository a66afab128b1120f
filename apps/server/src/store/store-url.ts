// Where the store is: the --store / MQD_STORE_URL value parsed, and the form of it
// that may be shown. No store code here: the configuration (config.ts, which the agent also
// loads) checks the value without loading SQLite or pg; store-open.ts opens it.
import { isAbsolute } from 'node:path';
import { type MqdError, mqdError } from '@mqd/model';

export type StoreLocation =
  | { readonly kind: 'sqlite'; readonly dataDir: string | null }
  | { readonly kind: 'postgres'; readonly url: string };

/**
 * Where a --store value points, or a usage error that does not quote it. `dataDir` null: the
 * configured --data-dir.
 */
export function parseStoreUrl(
  raw: string,
): { ok: true; value: StoreLocation } | { ok: false; error: MqdError } {
  const v = raw.trim();
  if (/^postgres(ql)?:\/\//i.test(v)) {
    // A Unix socket has no host (postgres://USER@/DB?host=/run/postgresql): checked with one.
    const u = asUrl(v) ?? asUrl(v.replace(/^(postgres(?:ql)?:\/\/(?:[^@/]*@)?)\//i, '$1localhost/'));
    if (u === null || /\s/.test(v)) {
      return {
        ok: false,
        error: mqdError('MQD_E_USAGE', 'the --store URL (MQD_STORE_URL) is not a valid postgres:// URL'),
      };
    }
    return { ok: true, value: { kind: 'postgres', url: v } };
  }
  if (/^sqlite:/i.test(v)) {
    const dir = v.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (dir === '') return { ok: true, value: { kind: 'sqlite', dataDir: null } };
    return sqliteDir(dir);
  }
  if (v === ':memory:' || isAbsolute(v)) return sqliteDir(v);
  return {
    ok: false,
    error: mqdError(
      'MQD_E_USAGE',
      '--store takes postgres://USER@HOST[:PORT]/DATABASE (or postgresql://), sqlite: or an absolute directory',
    ),
  };
}

function asUrl(v: string): URL | null {
  try {
    return new URL(v);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    return null;
  }
}

function sqliteDir(dir: string): { ok: true; value: StoreLocation } | { ok: false; error: MqdError } {
  if (dir !== ':memory:' && (!isAbsolute(dir) || dir.split('/').includes('..'))) {
    return {
      ok: false,
      error: mqdError('MQD_E_USAGE', `--store sqlite:${dir}: the directory must be absolute, without '..'`),
    };
  }
  return { ok: true, value: { kind: 'sqlite', dataDir: dir } };
}

/** The URL as it may be shown: the password (and any password= parameter) replaced by ***. */
export function redactStoreUrl(url: string): string {
  // By pattern, not by URL(): a Unix-socket URL (postgres://USER:PW@/DB?host=/dir) has no host.
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/?#]*):[^/?#]*@/i, '$1:***@')
    .replace(/([?&][^=&#]*(?:pass|secret|key)[^=&#]*=)[^&#]*/gi, '$1***');
}

/** Where the configured store is, for a log line (never the password). */
export function describeStore(storeUrl: string | null, dataDir: string): string {
  if (storeUrl === null) return `sqlite in ${dataDir}`;
  const p = parseStoreUrl(storeUrl);
  if (!p.ok) return '(an invalid store URL)';
  return p.value.kind === 'postgres'
    ? `postgres at ${redactStoreUrl(p.value.url)}`
    : `sqlite in ${p.value.dataDir ?? dataDir}`;
}
