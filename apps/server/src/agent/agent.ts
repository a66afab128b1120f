// The per-node agent: connects to the aggregator over socket.io (agent-protocol.ts), reports
// its node's health and MPI starters (status.ts), and answers snapshot, locate, counters and
// capture requests (handlers/, one file a request) with the injected RankReader, JobLocator and
// JobDiscovery. It reconnects on its own with exponential backoff and never lets a reader
// failure cost more than the ranks involved: every requested rank is answered, in state error
// when it could not be read. This file is the connection; what a handler needs of it is
// AgentContext (context.ts).
import { hostname } from 'node:os';
import { isErrorCode, type MqdError, mqdError } from '@mqd/model';
import { io, type Socket } from 'socket.io-client';
import {
  AGENT_NAMESPACE,
  AGENT_PROTOCOL_VERSION,
  type AgentHandshake,
  type AgentMessage,
  DEFAULT_KEEPALIVE_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  encodeMessage,
  fromWire,
  WIRE_EVENT,
} from '../protocol/agent-protocol.js';
import { decodeServerMessage } from '../protocol/agent-protocol-decode.js';
import { type AgentContext, toMqdError } from './context.js';
import { handleCapture } from './handlers/capture.js';
import { handleCounters } from './handlers/counters.js';
import { handleLocate } from './handlers/locate.js';
import { handleSnapshot } from './handlers/snapshot.js';
import {
  AGENT_VERSION,
  type AgentEvent,
  type AgentHandle,
  type AgentOptions,
  backoffDelay,
} from './options.js';
import { StatusReporter } from './status.js';

export * from './options.js';

function sanitizeId(s: string): string {
  return s.replace(/[^A-Za-z0-9._:-]/g, '_').slice(0, 64) || 'agent';
}

export function startAgent(opts: AgentOptions): AgentHandle {
  return new AgentConnection(opts).handle();
}

class AgentConnection implements AgentContext {
  readonly host: string;
  readonly agentId: string;
  readonly log: (line: string) => void;
  readonly coreDirs: readonly string[];
  readonly active = new Map<number, AbortController>();
  private readonly listeners = new Set<(e: AgentEvent) => void>();
  private readonly socket: Socket;
  private readonly status: StatusReporter;
  private limit = DEFAULT_MAX_MESSAGE_BYTES;
  private lastError: MqdError | null = null;
  private welcomed = false;
  private disposed = false;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private statusTimer: NodeJS.Timeout | null = null;
  private keepaliveTimer: NodeJS.Timeout | null = null;
  private waiters: (() => void)[] = [];

  constructor(readonly opts: AgentOptions) {
    this.host = opts.host ?? hostname();
    this.agentId = sanitizeId(opts.agentId ?? `${this.host}-${process.pid}`);
    this.log = opts.log ?? (() => {});
    this.coreDirs = opts.coreDirs ?? [];
    this.status = new StatusReporter(this, () => this.lastError);
    const auth: AgentHandshake = {
      token: opts.token,
      protocol: AGENT_PROTOCOL_VERSION,
      agentId: this.agentId,
      host: this.host,
      version: AGENT_VERSION,
    };
    // Reconnection is ours (scheduleRetry), not socket.io's: its manager does not retry after a
    // refused handshake or a server-side disconnect, and one policy for every case is simpler.
    this.socket = io(new URL(AGENT_NAMESPACE, opts.serverUrl).toString(), {
      auth: { ...auth },
      reconnection: false,
      transports: ['websocket'],
      autoConnect: false,
      ...(opts.tls?.ca !== undefined ? { ca: opts.tls.ca } : {}),
      rejectUnauthorized: opts.tls?.rejectUnauthorized ?? true,
    });
    this.socket.on(WIRE_EVENT, (data: unknown) => this.onMessage(data));
    this.socket.on('connect_error', (e: Error & { data?: { code?: unknown } }) => this.onConnectError(e));
    this.socket.on('disconnect', (reason) => this.onDisconnect(reason));
    this.socket.connect();
  }

  maxBytes(): number {
    return this.limit;
  }

  failed(e: unknown): MqdError {
    const m = toMqdError(e, 'MQD_E_INTERNAL');
    this.lastError = m;
    return m;
  }

  send(msg: AgentMessage | Buffer): boolean {
    // Never let socket.io buffer while disconnected: a stale answer after reconnect would only
    // be refused, and the aggregator has already marked those ranks agent-missing.
    if (!this.socket.connected) return false;
    const bytes = Buffer.isBuffer(msg) ? msg : encodeMessage(msg);
    if (bytes.byteLength > this.limit) {
      // Never over the cap: the aggregator's transport cuts a connection that sends more, and
      // with it every other request on it. A reply says why instead (a located job of a
      // starter whose table lists a million ranks with long host names).
      const e = mqdError(
        'MQD_E_TOO_LARGE',
        `the agent on ${this.host} would have sent a message of ${bytes.byteLength} bytes, over the aggregator's ${this.limit}-byte limit (--max-message-bytes)`,
      );
      this.lastError = e;
      this.log(`agent ${this.agentId}: ${e.message}`);
      if (!Buffer.isBuffer(msg) && msg.type === 'reply') {
        this.socket.emit(
          WIRE_EVENT,
          encodeMessage({ type: 'reply', id: msg.id, method: msg.method, ok: false, error: e }),
        );
      }
      return false;
    }
    this.socket.emit(WIRE_EVENT, bytes);
    return true;
  }

  private emit(e: AgentEvent): void {
    for (const l of this.listeners) l(e);
  }

  /** Tells the aggregator which requests this agent is still at work on (its silence deadline). */
  private sendAlive(): void {
    if (this.active.size > 0) this.send({ type: 'alive', ids: [...this.active.keys()] });
  }

  private scheduleRetry(): number {
    if (this.disposed || this.retryTimer !== null) return 0;
    const delay = backoffDelay(this.attempt++, this.opts.backoff, this.opts.random);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.disposed && !this.socket.connected) this.socket.connect();
    }, delay);
    return delay;
  }

  private stopTimers(): void {
    if (this.statusTimer) clearInterval(this.statusTimer);
    this.statusTimer = null;
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = null;
  }

  private onMessage(data: unknown): void {
    const m = decodeServerMessage(data, Number.MAX_SAFE_INTEGER);
    if (!m.ok) {
      this.log(
        `agent ${this.agentId}: ignored a malformed message from the aggregator: ${m.error.error.message}`,
      );
      return;
    }
    const msg = m.value;
    switch (msg.type) {
      case 'welcome': {
        this.limit = msg.maxMessageBytes;
        this.welcomed = true;
        this.attempt = 0;
        this.stopTimers();
        this.statusTimer = setInterval(
          () => void this.status.send(),
          this.opts.statusIntervalMs ?? msg.statusIntervalMs,
        );
        this.statusTimer.unref();
        this.keepaliveTimer = setInterval(() => this.sendAlive(), msg.keepaliveMs || DEFAULT_KEEPALIVE_MS);
        this.keepaliveTimer.unref();
        void this.status.send();
        this.log(`agent ${this.agentId}: connected to ${this.opts.serverUrl} as ${this.host}`);
        this.emit({ kind: 'welcome', agentId: msg.agentId });
        const w = this.waiters;
        this.waiters = [];
        for (const f of w) f();
        return;
      }
      case 'request':
        this.emit({ kind: 'request', method: msg.method, id: msg.id });
        if (msg.method === 'snapshot') void handleSnapshot(this, msg.id, msg.params);
        else if (msg.method === 'counters') void handleCounters(this, msg.id, msg.params);
        else if (msg.method === 'capture') void handleCapture(this, msg.id, msg.params);
        else void handleLocate(this, msg.id, msg.params);
        return;
      case 'refused':
        this.log(`agent ${this.agentId}: the aggregator refused a message: ${msg.error.message}`);
        this.emit({ kind: 'refused', error: fromWire(msg.error, 'MQD_E_BAD_INPUT'), refId: msg.refId });
        return;
    }
  }

  private onConnectError(e: Error & { data?: { code?: unknown } }): void {
    // A refused handshake carries the aggregator's coded error; anything else is the network.
    const code = e.data?.code;
    const error: MqdError =
      typeof code === 'string' && isErrorCode(code)
        ? { code, message: e.message }
        : mqdError(
            'MQD_E_AGENT_MISSING',
            `the aggregator at ${this.opts.serverUrl} is unreachable (${e.message})`,
          );
    const retryInMs = this.scheduleRetry();
    this.log(
      `agent ${this.agentId}: cannot connect to ${this.opts.serverUrl}: ${error.message}; retrying in ${retryInMs} ms`,
    );
    this.emit({ kind: 'connect-error', error, retryInMs });
  }

  private onDisconnect(reason: string): void {
    this.welcomed = false;
    this.stopTimers();
    for (const ac of this.active.values()) ac.abort();
    this.emit({ kind: 'disconnect', reason });
    if (!this.disposed) {
      const delay = this.scheduleRetry();
      this.log(`agent ${this.agentId}: disconnected (${reason}); reconnecting in ${delay} ms`);
    }
  }

  private async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.stopTimers();
    for (const ac of this.active.values()) ac.abort();
    this.socket.disconnect();
    this.listeners.clear();
  }

  handle(): AgentHandle {
    const dispose = () => this.dispose();
    const self = this;
    return {
      agentId: this.agentId,
      host: this.host,
      get connected() {
        return self.welcomed && self.socket.connected;
      },
      whenConnected: () => {
        if (this.welcomed && this.socket.connected) return Promise.resolve();
        return new Promise<void>((resolve) => this.waiters.push(resolve));
      },
      onEvent: (listener) => {
        this.listeners.add(listener);
        return { dispose: () => this.listeners.delete(listener) };
      },
      simulateDrop: () => {
        // Closing the engine (not the socket) is what a network failure looks like to both ends.
        this.socket.io.engine?.close();
      },
      dispose,
      [Symbol.asyncDispose]: dispose,
    };
  }
}
