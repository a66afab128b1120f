// What the route plugins share: the services they are given (built once by buildApp in
// app.ts) and small request helpers. It sits below both app.ts and the plugins, so neither
// imports the other's module for a type (no import cycle).

import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ensureExists } from '@mqd/model';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Server as SocketServer } from 'socket.io';
import type { Auth } from '../../auth/auth.js';
import type { HubPort } from '../../cluster/cluster-hub.js';
import type { Leases } from '../../cluster/leases.js';
import type { SnapshotService, UiEvents } from '../../fanout/fanout.js';
import type { OverviewService } from '../../fanout/overviews.js';
import type { User } from '../../shared/types.js';
import type { StorePort } from '../../store/store-port.js';
import type { Watcher } from '../../watch/watcher.js';
import type { ServerConfig } from '../config.js';
import type { UiSessions } from '../ui-sessions.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authed plugin's hook; null on public routes. */
    user: User | null;
  }
  interface FastifyInstance {
    /** The services and tokens of this aggregator (for serve(), tests and the benchmark). */
    mqd: Services;
  }
}

export interface Services {
  readonly config: ServerConfig;
  readonly clock: () => number;
  readonly store: StorePort;
  readonly auth: Auth;
  /** The agents: this instance's hub, or the cluster's (agents on other instances too). */
  readonly hub: HubPort;
  /** This process's id among the instances sharing a PostgreSQL store. */
  readonly instance: string;
  /** Background work once per cluster: auto-snapshots, retention, the watch's rounds. */
  readonly leases: Leases;
  readonly snapshots: SnapshotService;
  /** Snapshot overviews: what the dashboard draws first (overviews.ts). */
  readonly overviews: OverviewService;
  /** The hang watch (apps/server/src/watch/): the fleet, the policy, the sampling loop. */
  readonly watcher: Watcher;
  readonly ui: UiEvents;
  /** The /ui sockets' logins: recheck() after any change of users, tokens or sessions. */
  readonly uiSessions: UiSessions;
  readonly io: SocketServer;
  /** The tokens in effect (generated when the configuration had none). */
  readonly agentToken: string;
  readonly adminToken: string;
}

export interface PluginOpts {
  readonly s: Services;
}

export const currentUser = (req: FastifyRequest): User => ensureExists(req.user, 'request.user');

/** Every plugin's view of its instance: route types come from the schemas (api-spec.ts). */
export const typed = (app: FastifyInstance) => app.withTypeProvider<TypeBoxTypeProvider>();

export const rateLimited = (p: PluginOpts) => ({
  rateLimit: { max: p.s.config.rateLimitMax, timeWindow: p.s.config.rateLimitWindowMs },
});
