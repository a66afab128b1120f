// socket.io's cluster adapter over PostgreSQL with every message sealed (seal.ts): the adapter's
// own (heartbeats, join/leave, broadcasts, disconnects, fetchSockets and their answers) and the
// instances' serverSideEmit (cluster-hub.ts). @socket.io/postgres-adapter's PostgresAdapter
// does the socket.io side (its base class ClusterAdapterWithHeartbeat); what crosses the
// database is this file's: one LISTEN connection per instance, a NOTIFY per message holding the
// sealed bytes in base64, or, over NOTIFY's 8000 bytes, the sealed bytes in a row of the
// attachments table and the row's id in the NOTIFY. A row id is no secret: a NOTIFY naming a
// row that was already read is a replay, refused by its nonce.
import { PostgresAdapter } from '@socket.io/postgres-adapter';
import type pg from 'pg';
import type { Namespace } from 'socket.io';
import { SEAL_WINDOW_MS, type Sealer, type SealRefusal } from './seal.js';

type ClusterMessage = Parameters<PostgresAdapter['onMessage']>[0];
type ClusterResponse = Parameters<PostgresAdapter['onResponse']>[0];

/** The prefix of the NOTIFY channels (one per namespace): not socket.io's, whose messages are unsealed. */
export const SEALED_CHANNEL_PREFIX = 'mqd-sealed';

/** NOTIFY's payload limit is 8000 bytes; sealed bytes over this go through the table (base64 adds a third). */
const INLINE_SEALED_BYTES = 5800;

/** How often rows older than this are removed from the attachments table, ms. */
const ATTACHMENT_LIFE_MS = 30_000;

/** The adapter's serverSideEmit message type (socket.io-adapter's MessageType.SERVER_SIDE_EMIT). */
const SERVER_SIDE_EMIT = 9;

/** At most one warning about dropped messages this often, ms (a flood must not flood the log). */
const WARN_EVERY_MS = 10_000;

/** Messages dropped, by why (GET /metrics: mqd_cluster_dropped_messages_total). */
export type DropReason = SealRefusal | 'wrong-sender' | 'malformed';
export type DroppedCounts = Record<DropReason, number>;

export interface SealedAdapterOptions {
  readonly table: string;
  readonly heartbeatMs: number;
  /**
   * Who a serverSideEmit of namespace `nsp` says it is from (cluster-hub.ts clusterMessageSender),
   * or undefined when the namespace has no such rule. A message that names another instance than
   * the one that sealed it is dropped: an instance speaks only for itself.
   */
  readonly senderOf?: (nsp: string, packet: unknown) => string | null | undefined;
  readonly onError: (e: Error) => void;
  readonly onDrop?: (why: DropReason) => void;
  readonly log?: { warn(obj: object, msg: string): void };
}

/**
 * socket.io's adapter factory for `io.adapter()`, and what closes it: one sealed channel shared
 * by every namespace of this server.
 */
export function createSealedAdapter(
  pool: pg.Pool,
  sealer: Sealer,
  o: SealedAdapterOptions,
): { factory: (nsp: Namespace) => PostgresAdapter; channel: SealedChannel } {
  const adapters = new Map<string, SealedAdapter>();
  const channel: SealedChannel = new SealedChannel(pool, sealer, o, (nsp, message, sender) => {
    const a = adapters.get(nsp);
    if (a === undefined) return;
    if (typeof message !== 'object' || message === null || (message as { nsp?: unknown }).nsp !== nsp) {
      channel.drop('malformed');
      return;
    }
    const m = message as ClusterMessage;
    if (m.type === SERVER_SIDE_EMIT && o.senderOf !== undefined) {
      const says = o.senderOf(nsp, (m.data as { packet?: unknown } | undefined)?.packet);
      if (says !== undefined && says !== sender) {
        channel.drop('wrong-sender');
        return;
      }
    }
    a.onMessage(m);
  });
  // socket.io calls `new factory(nsp)`: a function declaration (an arrow cannot be called with
  // `new`), whose returned object is the result.
  function factory(nsp: Namespace): PostgresAdapter {
    const a = new SealedAdapter(
      nsp,
      { heartbeatInterval: o.heartbeatMs, heartbeatTimeout: o.heartbeatMs * 3 },
      channel,
    );
    adapters.set(nsp.name, a);
    channel.listen(nsp.name);
    const close = a.close.bind(a);
    a.close = () => {
      adapters.delete(nsp.name);
      if (adapters.size === 0) channel.close();
      close();
    };
    return a;
  }
  return { factory, channel };
}

class SealedAdapter extends PostgresAdapter {
  constructor(
    nsp: Namespace,
    opts: { heartbeatInterval: number; heartbeatTimeout: number },
    private readonly channel: SealedChannel,
  ) {
    // PostgresAdapter's own client is never used: both publishing methods are this class's.
    super(nsp, opts, undefined as unknown as ConstructorParameters<typeof PostgresAdapter>[2]);
  }

  protected override async doPublish(message: ClusterMessage): Promise<string> {
    await this.channel.publish(message.nsp, message);
    // No connection state recovery: no offsets.
    return '';
  }

  protected override doPublishResponse(_requester: string, response: ClusterResponse): Promise<void> {
    return this.channel.publish(response.nsp, response);
  }
}

/** The instance's end of the sealed NOTIFY channels. */
export class SealedChannel {
  readonly dropped: DroppedCounts = {
    unsealed: 0,
    forged: 0,
    stale: 0,
    replayed: 0,
    'wrong-sender': 0,
    malformed: 0,
  };
  /** Messages opened and accepted from other instances (tests: the wire is alive). */
  accepted = 0;
  private readonly channels = new Map<string, string>();
  /**
   * Attachment rows this instance wrote, until its own NOTIFY of each comes back (then it is not
   * read back: a folded batch is fetched by the other instances only), with when they were written.
   */
  private readonly ownRows = new Map<string, number>();
  private client: pg.PoolClient | null = null;
  private listening: Promise<void> = Promise.resolve();
  private reconnect: NodeJS.Timeout | null = null;
  private readonly cleanup: NodeJS.Timeout;
  private closed = false;
  private lastWarn = Number.NEGATIVE_INFINITY;
  private warnedTotal = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly sealer: Sealer,
    private readonly o: SealedAdapterOptions,
    private readonly deliver: (nsp: string, message: unknown, sender: string) => void,
  ) {
    void this.connect();
    this.cleanup = setInterval(() => {
      pool
        .query(`DELETE FROM ${o.table} WHERE created_at < now() - make_interval(secs => $1)`, [
          Math.max(ATTACHMENT_LIFE_MS, SEAL_WINDOW_MS) / 1000,
        ])
        .catch((e: unknown) => o.onError(e as Error));
    }, ATTACHMENT_LIFE_MS);
    this.cleanup.unref();
  }

  /** The channel name of namespace `nsp`. */
  static channelOf(nsp: string): string {
    return `${SEALED_CHANNEL_PREFIX}#${nsp}`;
  }

  /** Listens for namespace `nsp`'s messages (now if connected, else once connected). */
  listen(nsp: string): void {
    const name = SealedChannel.channelOf(nsp);
    if (this.channels.has(name)) return;
    this.channels.set(name, nsp);
    const c = this.client;
    if (c === null) return;
    // One query at a time on the client (pg queues them, but warns that it will not).
    this.listening = this.listening
      .then(() => c.query(`LISTEN "${name}"`))
      .then(
        () => undefined,
        (e: unknown) => this.o.onError(e as Error),
      );
  }

  async publish(nsp: string, message: ClusterMessage | ClusterResponse): Promise<void> {
    if (this.closed) return;
    const name = SealedChannel.channelOf(nsp);
    try {
      const sealed = this.sealer.seal(name, message);
      if (sealed.length <= INLINE_SEALED_BYTES) {
        await this.pool.query('SELECT pg_notify($1, $2)', [name, `s${sealed.toString('base64')}`]);
        return;
      }
      const row = await this.pool.query<{ id: string }>(
        `INSERT INTO ${this.o.table} (payload) VALUES ($1) RETURNING id`,
        [sealed],
      );
      const id = String(row.rows[0]?.id ?? '');
      const now = performance.now();
      for (const [k, at] of this.ownRows) {
        if (now - at < SEAL_WINDOW_MS) break;
        this.ownRows.delete(k);
      }
      this.ownRows.set(id, now);
      await this.pool.query('SELECT pg_notify($1, $2)', [name, `a${id}`]);
    } catch (e) {
      this.o.onError(e as Error);
    }
  }

  /** Counts (and now and then logs) a message dropped. */
  drop(why: DropReason): void {
    this.dropped[why]++;
    this.o.onDrop?.(why);
    const total = Object.values(this.dropped).reduce((a, b) => a + b, 0);
    const now = performance.now();
    if (now - this.lastWarn < WARN_EVERY_MS) return;
    this.lastWarn = now;
    this.o.log?.warn(
      { dropped: { ...this.dropped }, since: total - this.warnedTotal },
      'messages on the cluster channel that no instance of this cluster sealed were dropped (a database role other than the instances is writing to it: see docs/deploy/postgres.md)',
    );
    this.warnedTotal = total;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.cleanup);
    if (this.reconnect !== null) clearTimeout(this.reconnect);
    const c = this.client;
    this.client = null;
    if (c !== null) {
      c.removeAllListeners('end');
      c.removeAllListeners('notification');
      // Ended, not given back to the pool still listening.
      c.release(true);
    }
  }

  private async connect(): Promise<void> {
    this.reconnect = null;
    if (this.closed) return;
    let c: pg.PoolClient;
    try {
      c = await this.pool.connect();
    } catch {
      // The database is away: try again, as the store's pool does on its own.
      this.retry();
      return;
    }
    if (this.closed) {
      c.release();
      return;
    }
    c.on('notification', (n) => void this.onNotification(n.channel, n.payload));
    c.on('end', () => {
      if (this.client === c) this.client = null;
      this.retry();
    });
    try {
      for (const name of this.channels.keys()) await c.query(`LISTEN "${name}"`);
      this.client = c;
    } catch (e) {
      this.o.onError(e as Error);
      c.release(e as Error);
      this.retry();
    }
  }

  private retry(): void {
    if (this.closed || this.reconnect !== null) return;
    this.reconnect = setTimeout(() => void this.connect(), 1000 + Math.floor(Math.random() * 1000));
    this.reconnect.unref();
  }

  private async onNotification(name: string, payload: string | undefined): Promise<void> {
    const nsp = this.channels.get(name);
    if (nsp === undefined || this.closed) return;
    if (payload === undefined || payload.length < 2) {
      this.drop('unsealed');
      return;
    }
    let sealed: Buffer;
    if (payload[0] === 's') sealed = Buffer.from(payload.slice(1), 'base64');
    else if (payload[0] === 'a' && /^a\d{1,19}$/.test(payload)) {
      if (this.ownRows.delete(payload.slice(1))) return;
      try {
        const r = await this.pool.query<{ payload: Buffer }>(
          `SELECT payload FROM ${this.o.table} WHERE id = $1`,
          [payload.slice(1)],
        );
        const row = r.rows[0];
        if (row === undefined) {
          // Removed by the cleanup: as old as a replay, and treated as one.
          this.drop('stale');
          return;
        }
        sealed = row.payload;
      } catch (e) {
        this.o.onError(e as Error);
        return;
      }
    } else {
      this.drop('unsealed');
      return;
    }
    if (this.closed) return;
    const opened = this.sealer.open(name, sealed);
    if (!opened.ok) {
      this.drop(opened.why);
      return;
    }
    if (opened.value.sender === this.sealer.instance) return;
    this.accepted++;
    this.deliver(nsp, opened.value.body, opened.value.sender);
  }
}
