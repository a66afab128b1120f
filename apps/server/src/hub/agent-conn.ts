// One agent's connection as the hub keeps it (AgentConn): its socket and handshake, its open
// requests (Pending, each settled once), what its last status said; and the shapes the hub
// gives of it (AgentInfo) and of its answers (HubCounters, HubCapture).
import type { DiscoveredJob, MqdError, RankCounters, RankSnapshot, Result } from '@mqd/model';
import type { Socket } from 'socket.io';
import type {
  AgentHandshake,
  AgentHealth,
  DiscoveryScanInfo,
  SnapshotResult,
} from '../protocol/agent-protocol.js';
import type { LocatedJob, MpiInfo, SeenStarter } from '../shared/seams.js';

export interface AgentInfo {
  readonly agentId: string;
  readonly host: string;
  readonly version: string;
  readonly connected: boolean;
  readonly connectedAt: number;
  readonly lastSeenAt: number;
  readonly disconnectedAt: number | null;
  readonly health: AgentHealth | null;
  readonly mpi: MpiInfo | null;
  readonly jobs: readonly SeenStarter[];
  readonly messages: number;
  readonly refused: number;
  readonly pending: number;
  /** The aggregator instance holding the agent's connection (set by the cluster hub). */
  readonly instance?: string;
}

/**
 * Where a snapshot request's accepted ranks go as their chunks arrive. `text`, when given, is
 * their JSON as the agent sent it, joined by commas in the order of `ranks` (every rank of the
 * chunk was kept): the fan-in stores it instead of making each rank's JSON again.
 */
export type OnRanks = (ranks: RankSnapshot[], text?: Buffer) => void;

/**
 * What AgentHub.counters gives: the agent's CountersResult with its errors as MqdErrors (a
 * code of ours, else MQD_E_INTERNAL). Every asked rank is in `ranks` or in `errors`.
 */
export interface HubCounters {
  readonly ranks: RankCounters[];
  readonly errors: { rank: number; error: MqdError }[];
  /** USER_HZ of the agent's node: the unit of cpuTicks. */
  readonly clockTicksPerSecond: number;
  /** Epoch ms of the read, on the agent's node. */
  readonly at: number;
}

/** What AgentHub.capture gives: the agent's CaptureResult, its errors as MqdErrors. */
export interface HubCapture {
  readonly dir: string;
  readonly ranks: {
    readonly rank: number;
    readonly pid: number;
    readonly core: string | null;
    readonly bytes: number;
    /** How long the rank was stopped for its core, microseconds. */
    readonly pausedMicros: number;
    readonly error: MqdError | null;
  }[];
}

export type Pending = (
  | {
      readonly method: 'snapshot';
      /** rank -> pid the agent was asked for. */
      readonly expected: Map<number, number>;
      readonly seen: Set<number>;
      readonly onRanks: OnRanks;
      readonly settle: (r: Result<SnapshotResult>) => void;
      readonly timer: NodeJS.Timeout;
    }
  | {
      readonly method: 'locate';
      readonly settle: (r: Result<LocatedJob>) => void;
      readonly timer: NodeJS.Timeout;
    }
  | {
      readonly method: 'counters';
      /** The ranks asked for: an answer for any other is dropped. */
      readonly asked: ReadonlySet<number>;
      readonly settle: (r: Result<HubCounters>) => void;
      readonly timer: NodeJS.Timeout;
    }
  | {
      readonly method: 'capture';
      /** The ranks asked for: an answer for any other is dropped. */
      readonly asked: ReadonlySet<number>;
      readonly settle: (r: Result<HubCapture>) => void;
      readonly timer: NodeJS.Timeout;
    }
) & {
  /** performance.now() when the agent last said something about this request (or it was sent). */
  heardAt: number;
};

export class AgentConn {
  nextId = 1;
  readonly pending = new Map<number, Pending>();
  lastSeenAt: number;
  disconnectedAt: number | null = null;
  health: AgentHealth | null = null;
  mpi: MpiInfo | null = null;
  jobs: readonly SeenStarter[] = [];
  /** The jobs of the last status, when it came (clock ms), and its JSON to see a change. */
  discovered: readonly DiscoveredJob[] = [];
  discoveredAt = 0;
  discoveredJson = '[]';
  /** Whether the last status's list is every job of the node: none came yet, so it is not. */
  discoveryScan: DiscoveryScanInfo = { complete: false, omitted: [] };
  messages = 0;
  refused = 0;
  /** Checks the open requests' silence while there are any. */
  silenceTimer: NodeJS.Timeout | null = null;
  constructor(
    readonly socket: Socket,
    readonly hs: AgentHandshake,
    readonly connectedAt: number,
  ) {
    this.lastSeenAt = connectedAt;
  }
  info(): AgentInfo {
    return {
      agentId: this.hs.agentId,
      host: this.hs.host,
      version: this.hs.version,
      connected: this.disconnectedAt === null,
      connectedAt: this.connectedAt,
      lastSeenAt: this.lastSeenAt,
      disconnectedAt: this.disconnectedAt,
      health: this.health,
      mpi: this.mpi,
      jobs: this.jobs,
      messages: this.messages,
      refused: this.refused,
      pending: this.pending.size,
    };
  }
}
