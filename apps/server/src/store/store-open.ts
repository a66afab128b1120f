// Which store `mqd serve` opens: `--store URL` / MQD_STORE_URL. A postgres:// or
// postgresql:// URL opens PgStore on that database (shared by every instance pointed at it);
// nothing, `sqlite:` or a directory keeps SqliteStore in --data-dir (or that directory), the
// embedded default. The URL may carry a password: it is never quoted in an error, a log line
// or an API answer (redactStoreUrl gives the form that may be shown), and MQD_STORE_URL leaves
// the environment once read (secrets.ts).
import { MqdException } from '@mqd/model';
import { PgStore } from './dialect-pg.js';
import { SqliteStore } from './dialect-sqlite.js';
import type { RetentionPolicy, StorePort } from './store-port.js';
import { parseStoreUrl, type StoreLocation } from './store-url.js';

export { describeStore, parseStoreUrl, redactStoreUrl, type StoreLocation } from './store-url.js';

export interface OpenStoreOptions {
  /** --store / MQD_STORE_URL; null: SQLite in dataDir. */
  readonly storeUrl: string | null;
  readonly dataDir: string;
  readonly retention: RetentionPolicy;
  readonly clock?: () => number;
}

/** Opens (and migrates) the configured store. */
export async function openStore(o: OpenStoreOptions): Promise<StorePort> {
  const clock = o.clock ?? Date.now;
  const where: StoreLocation =
    o.storeUrl === null
      ? { kind: 'sqlite', dataDir: null }
      : (() => {
          const p = parseStoreUrl(o.storeUrl);
          if (!p.ok) throw new MqdException(p.error);
          return p.value;
        })();
  if (where.kind === 'postgres') return PgStore.open(where.url, o.retention, clock);
  return new SqliteStore({ dataDir: where.dataDir ?? o.dataDir, retention: o.retention, clock });
}
