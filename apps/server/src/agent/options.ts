// What the agent is started with (AgentOptions), what it tells its listeners (AgentEvent), the
// handle it returns, and its reconnection backoff.
import type { Disposable, MqdError } from '@mqd/model';
import type { JobDiscovery, JobLocator, RankReader } from '../shared/seams.js';

export const AGENT_VERSION = '0.1.0';

export interface BackoffOptions {
  /** First retry delay, ms (default 500). */
  readonly initialMs?: number;
  /** Longest delay, ms (default 30 000). */
  readonly maxMs?: number;
  /** Growth per failed attempt (default 2). */
  readonly factor?: number;
  /** 0..1: the delay is drawn from [d * (1 - jitter), d] so agents of a restarted server do not all come back at once (default 0.5). */
  readonly jitter?: number;
}

/** Delay before reconnect attempt `attempt` (0-based). */
export function backoffDelay(
  attempt: number,
  o: BackoffOptions = {},
  random: () => number = Math.random,
): number {
  const initial = o.initialMs ?? 500;
  const max = o.maxMs ?? 30_000;
  const d = Math.min(max, initial * (o.factor ?? 2) ** Math.min(attempt, 64));
  return Math.round(d * (1 - (o.jitter ?? 0.5) * random()));
}

export type AgentEvent =
  | { readonly kind: 'welcome'; readonly agentId: string }
  | { readonly kind: 'disconnect'; readonly reason: string }
  | { readonly kind: 'connect-error'; readonly error: MqdError; readonly retryInMs: number }
  | { readonly kind: 'refused'; readonly error: MqdError; readonly refId: number | null }
  | {
      readonly kind: 'request';
      readonly method: 'snapshot' | 'locate' | 'counters' | 'capture';
      readonly id: number;
    };

export interface AgentOptions {
  /** Aggregator base URL, e.g. http://head:8080. */
  readonly serverUrl: string;
  /** The shared agent token. */
  readonly token: string;
  readonly reader: RankReader;
  /** Only needed on nodes where starters (mpirun) run. */
  readonly locator?: JobLocator | null;
  /**
   * Finds the node's MPI jobs by itself (status.discovered, rescanned for every status) and
   * reads their ranks' /proc counters (the `counters` request): the hang watch. Absent: the
   * status lists none and counters are refused with MQD_E_AGENT_MISSING.
   */
  readonly discovery?: JobDiscovery | null;
  /**
   * Directories whose core files this agent opens as jobs (`mqd serve --core-dir`); a request
   * for cores anywhere else is refused here with MQD_E_CORE_DIR_FORBIDDEN, whatever the aggregator
   * checked. Empty or absent: no cores are read.
   */
  readonly coreDirs?: readonly string[];
  /** Node name reported for every rank; default os.hostname(). */
  readonly host?: string;
  readonly agentId?: string;
  readonly backoff?: BackoffOptions;
  /** Status reports more often than the aggregator asks (ms); default: as asked. */
  readonly statusIntervalMs?: number;
  readonly log?: (line: string) => void;
  readonly random?: () => number;
  /**
   * TLS towards an https:// aggregator: `ca` (PEM) is the certificate authority the agent
   * trusts; the server's certificate is always verified, except for the in-process agent of
   * `mqd serve` on loopback (rejectUnauthorized false).
   */
  readonly tls?: { readonly ca?: string; readonly rejectUnauthorized?: boolean };
}

export interface AgentHandle extends AsyncDisposable {
  readonly agentId: string;
  readonly host: string;
  /** True between the aggregator's welcome and the next disconnect. */
  readonly connected: boolean;
  /** Resolves at the next welcome (at once if connected now). */
  whenConnected(): Promise<void>;
  onEvent(listener: (e: AgentEvent) => void): Disposable;
  /** Drops the connection as if the network failed; the agent reconnects by itself. */
  simulateDrop(): void;
  dispose(): Promise<void>;
}
