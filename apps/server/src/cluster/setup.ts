// How buildApp turns one aggregator into an instance of several. On the PostgreSQL
// store every instance pointed at the same database is one cluster:
//   - socket.io's rooms and serverSideEmit cross instances through PostgreSQL NOTIFY, every
//     message sealed with the cluster secret (sealed-adapter.ts, seal.ts; a pool of its own: its
//     LISTEN connection and NOTIFYs never wait behind store queries), so a browser on instance B
//     gets the progress and done events of a snapshot taken on A;
//   - ClusterHub answers for agents connected to other instances (cluster-hub.ts);
//   - Leases run the background work once per cluster (leases.ts).
// On SQLite there is one instance: no adapter, the local hub, and every lease is held.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import pg from 'pg';
import type { Server as SocketServer } from 'socket.io';
import type { AgentHub } from '../hub/hub.js';
import type { StorePort } from '../store/store-port.js';
import { parseStoreUrl } from '../store/store-url.js';
import { ClusterHub, type HubPort } from './cluster-hub.js';
import { CLUSTER_NAMESPACE, clusterMessageSender } from './cluster-wire.js';
import { Sealer } from './seal.js';
import { createSealedAdapter, type DroppedCounts, type DropReason } from './sealed-adapter.js';

/** The table the adapter keeps payloads over NOTIFY's 8000 bytes in (its default name). */
const ATTACHMENTS = 'socket_io_attachments';

export interface ClusterTiming {
  /** How often an instance tells the others about its agents (and how soon a dead one is dropped: 3x). */
  readonly stateIntervalMs: number;
  /** The adapter's heartbeat between instances. */
  readonly heartbeatMs: number;
}

export const DEFAULT_CLUSTER_TIMING: ClusterTiming = { stateIntervalMs: 2000, heartbeatMs: 2000 };

/**
 * A unique id for this process: its host and a random part (a restarted instance is a new one).
 * No pid: /api/health, which anyone may ask, says it.
 */
export function newInstanceId(): string {
  return `${hostname()}:${randomUUID().slice(0, 8)}`;
}

export interface ClusterAdapterHandle {
  /**
   * Closes the adapters of `namespaces` and of '/' (io.adapter() gave every namespace one, the
   * main one included; the last one closed gives back the LISTEN client) and ends the pool:
   * pool.end() alone would wait for that client forever.
   */
  close(namespaces: readonly string[]): Promise<void>;
  /** Messages on the channel this instance dropped, by why (none sealed with this cluster's secret...). */
  readonly dropped: Readonly<DroppedCounts>;
  /** Messages from other instances opened and accepted. */
  readonly accepted: () => number;
}

export interface ClusterChannelOptions {
  readonly timing: ClusterTiming;
  /** This instance's id (newInstanceId): sealed into its messages. */
  readonly instance: string;
  /** The cluster secret (config.ts clusterSecretOf): every instance of the cluster has the same. */
  readonly secret: string;
  readonly onError: (e: Error) => void;
  /** A message on the channel was dropped (counted in /metrics). */
  readonly onDrop?: (why: DropReason) => void;
  readonly log?: { warn(obj: object, msg: string): void };
}

/**
 * Before any namespace is made: on the PostgreSQL store, socket.io's adapter goes through the
 * database. Returns null on SQLite (one instance, socket.io's in-memory adapter).
 */
export async function attachClusterAdapter(
  io: SocketServer,
  store: StorePort,
  storeUrl: string | null,
  o: ClusterChannelOptions,
): Promise<ClusterAdapterHandle | null> {
  if (store.dialect !== 'postgres' || storeUrl === null) return null;
  const where = parseStoreUrl(storeUrl);
  if (!where.ok || where.value.kind !== 'postgres') return null;
  const pool = new pg.Pool({ connectionString: where.value.url, max: 4 });
  // A client whose server went away (PostgreSQL restarted): an idle one the pool drops, and the
  // adapter's LISTEN client (checked out for good) reconnects by itself on 'end'; neither may
  // raise an unhandled 'error' event, which would end the process.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    client.on('error', (e) => o.onError(e));
  });
  await prepareAttachments(pool);
  const { factory, channel } = createSealedAdapter(pool, new Sealer(o.secret, o.instance), {
    table: ATTACHMENTS,
    heartbeatMs: o.timing.heartbeatMs,
    senderOf: (nsp, packet) => (nsp === CLUSTER_NAMESPACE ? clusterMessageSender(packet) : undefined),
    onError: o.onError,
    ...(o.onDrop ? { onDrop: o.onDrop } : {}),
    ...(o.log ? { log: o.log } : {}),
  });
  io.adapter(factory as unknown as Parameters<SocketServer['adapter']>[0]);
  return {
    close: async (namespaces) => {
      for (const name of ['/', ...namespaces]) await io.of(name).adapter.close();
      await pool.end().catch(() => undefined);
    },
    dropped: channel.dropped,
    accepted: () => channel.accepted,
  };
}

/**
 * The adapter's table of payloads over NOTIFY's limit (a snapshot's folded chunks from another
 * instance: megabytes per 100,000-rank snapshot, gone after the adapter's cleanup interval).
 * UNLOGGED: no write-ahead log for messages that matter for seconds (a crash of PostgreSQL empties
 * the table, and the calls waiting on them fail or retry as when an instance dies). Stored without
 * compression: the payloads are deflated already, and PostgreSQL's own would only cost CPU. A table
 * made by an older version is changed once (`relpersistence` tells).
 */
async function prepareAttachments(pool: pg.Pool): Promise<void> {
  await pool.query(
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${ATTACHMENTS} (id BIGSERIAL UNIQUE, created_at TIMESTAMPTZ DEFAULT NOW(), payload BYTEA)`,
  );
  const r = await pool.query<{ persistence: string; storage: string; acl: string | null }>(
    `SELECT c.relpersistence AS persistence, a.attstorage AS storage, c.relacl::text AS acl
       FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE c.oid = to_regclass($1) AND a.attname = 'payload'`,
    [ATTACHMENTS],
  );
  const row = r.rows[0];
  // Other roles of the database read nothing here, sealed as it is (docs/deploy/postgres.md):
  // a grant to PUBLIC (an aclitem with no grantee, "=r/owner") is taken back.
  if (row?.acl != null && /(^|[{,])=/.test(row.acl))
    await pool.query(`REVOKE ALL ON ${ATTACHMENTS} FROM PUBLIC`);
  if (row?.persistence === 'p') await pool.query(`ALTER TABLE ${ATTACHMENTS} SET UNLOGGED`);
  if (row !== undefined && row.storage !== 'e')
    await pool.query(`ALTER TABLE ${ATTACHMENTS} ALTER COLUMN payload SET STORAGE EXTERNAL`);
}

/** The hub an instance uses: the cluster's when an adapter crosses instances, else its own. */
export function clusterHub(
  io: SocketServer,
  local: AgentHub,
  adapter: ClusterAdapterHandle | null,
  instance: string,
  timing: ClusterTiming,
  log: { warn(obj: object, msg: string): void },
): { hub: HubPort; cluster: ClusterHub | null } {
  if (adapter === null) return { hub: local, cluster: null };
  const cluster = new ClusterHub(local, io.of(CLUSTER_NAMESPACE), {
    instance,
    stateIntervalMs: timing.stateIntervalMs,
    log,
  });
  return { hub: cluster, cluster };
}
