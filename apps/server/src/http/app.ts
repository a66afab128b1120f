// buildApp: the aggregator as a tree of encapsulated Fastify plugins, apart from listen().
//
//   root            error + not-found handlers, ApiError schema, rate limits, OpenAPI
//   ├─ store        the SQLite store's lifecycle and the periodic retention sweep
//   ├─ agents hub   socket.io on the same HTTP server: /agents (agent token), /ui (user login)
//   └─ api          /api
//      ├─ public    health, login, logout, shared snapshots (no login)
//      └─ authed    every route below needs a user (session cookie, bearer, or trusted proxy)
//         ├─ jobs       list, attach, snapshot, history
//         ├─ snapshots  read, export
//         ├─ shares     create share links
//         └─ admin      agents, activity, hung jobs, users (admins only)
//      └─ fleet     the hang watch: GET /fleet, the admins' watch policy (own login check)
//
// Services (store, auth, hub, snapshot fan-out) are built here once and handed to the plugins
// that need them as plugin options, so each plugin states its dependencies.
import { readFileSync } from 'node:fs';
import { AjvCompiler, type BuildCompilerFromPool } from '@fastify/ajv-compiler';
import rateLimit from '@fastify/rate-limit';
import fastifyStatic from '@fastify/static';
import swagger from '@fastify/swagger';
import { MqdException, mqdError, watchVerdict } from '@mqd/model';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { Server as SocketServer } from 'socket.io';
import { Auth, newToken } from '../auth/auth.js';
import type { ClusterHub } from '../cluster/cluster-hub.js';
import { CLUSTER_NAMESPACE } from '../cluster/cluster-wire.js';
import { Leases } from '../cluster/leases.js';
import {
  attachClusterAdapter,
  type ClusterTiming,
  clusterHub,
  DEFAULT_CLUSTER_TIMING,
  newInstanceId,
} from '../cluster/setup.js';
import { type SnapshotHub, SnapshotService, type UiEvents } from '../fanout/fanout.js';
import { OverviewService, type OverviewServiceOptions } from '../fanout/overviews.js';
import { AgentHub } from '../hub/hub.js';
import { AGENT_NAMESPACE } from '../protocol/agent-protocol.js';
import { Counter, MetricsRegistry, snapshotMetrics, watchMetrics } from '../shared/metrics.js';
import { openStore } from '../store/store-open.js';
import type { StorePort } from '../store/store-port.js';
import { defaultSlurmQuery, type SlurmQuery } from '../watch/end-reason.js';
import type { WatchAgents, WatchVerdictFn } from '../watch/source.js';
import { type Timers, WATCHER, Watcher } from '../watch/watcher.js';
import {
  clusterSecretOf,
  DEFAULT_CONFIG,
  type LogLevel,
  parseCidr,
  SERVER_VERSION,
  type ServerConfig,
  watchPolicyOf,
} from './config.js';
import { errorBody } from './http.js';
import { agentsHubPlugin } from './plugins/agents-hub.js';
import { apiPlugin } from './plugins/api.js';
import type { Services } from './plugins/common.js';
import { fleetPlugin } from './plugins/fleet.js';
import { addServiceGauges, metricsPlugin } from './plugins/metrics.js';
import { storePlugin } from './plugins/store.js';
import { SHARED_SCHEMAS } from './schemas.js';
import { jobRooms, UiSessions } from './ui-sessions.js';

export type { PluginOpts, Services } from './plugins/common.js';

export interface AppOptions {
  /** Over DEFAULT_CONFIG; usually the result of loadConfig(). */
  readonly config?: Partial<ServerConfig>;
  /** Epoch ms; injectable so expiry and retention are tested without waiting. */
  readonly clock?: () => number;
  readonly logger?: FastifyServerOptions['logger'];
  /**
   * An open store to use (and leave open on close); default: opened from config.storeUrl
   * (store-open.ts), SQLite in config.dataDir without one.
   */
  readonly store?: StorePort;
  /** Where snapshots are read; default the hub (tests pass a fake of its snapshot side). */
  readonly snapshotHub?: SnapshotHub;
  /** The hang watch's view of the agents; default the hub (tests pass a fake). */
  readonly watchAgents?: WatchAgents;
  /** The hang verdict; default the model's watchVerdict. */
  readonly watchVerdict?: WatchVerdictFn;
  /** The watch loop's timers; default setTimeout (unref'd). */
  readonly watchTimers?: Timers;
  /** `scontrol` for ended jobs' end reasons; default the real one, null: no Slurm. */
  readonly slurm?: SlurmQuery | null;
  /** How webhooks are POSTed; default global fetch. */
  readonly fetch?: typeof fetch;
  /** Backoff of webhook retries, ms (base; default 1000). */
  readonly webhookBackoffMs?: number;
  /** Several instances on PostgreSQL: how often they speak (default DEFAULT_CLUSTER_TIMING). */
  readonly clusterTiming?: ClusterTiming;
  /** Cluster leases' renewal and lifetime, ms (default 5000 and 15000). */
  readonly leaseMs?: { readonly renew: number; readonly ttl: number };
  /** Snapshot overviews: made on this thread below `inlineBelowRanks` (default 2,000), the worker's heap limit. */
  readonly overviews?: Pick<
    OverviewServiceOptions,
    'inlineBelowRanks' | 'maxHeapMb' | 'eager' | 'busy' | 'aheadQuietMs' | 'aheadRetryMs'
  >;
}

/**
 * The server log (`mqd serve`): Fastify's own logger (pino), one JSON object per line on stderr
 * with `level` as a name, `time` as ISO 8601, `msg`, and the event's fields (`code`, `jobId`...).
 */
export function serverLogger(
  level: LogLevel,
  stream: { write(line: string): unknown } = process.stderr,
): FastifyServerOptions['logger'] {
  return {
    level,
    stream,
    formatters: { level: (label) => ({ level: label }) },
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
  };
}

/** How often every /ui socket's login is checked again (expiry; revocation acts at once). */
const UI_RECHECK_MS = 30_000;

const ajvPool = AjvCompiler();
/**
 * Request bodies are validated without type coercion: with Fastify's default (`coerceTypes:
 * 'array'`) a JSON null in a nullable integer (`{"uid": null}`) became 0, root's uid, and "true"
 * a boolean. Querystrings, params and headers arrive as text and keep the coercion.
 */
const buildValidator: BuildCompilerFromPool = (externalSchemas, options) => {
  const coercing = ajvPool(externalSchemas, options);
  // (JTD schemas, which this server does not use, have no coercion to turn off.)
  const strict =
    options?.mode === 'JTD'
      ? coercing
      : ajvPool(externalSchemas, {
          ...options,
          customOptions: { ...options?.customOptions, coerceTypes: false },
        });
  // Fastify calls the compiler with the route's part (its types say only the schema).
  type Compile = typeof coercing;
  return ((route: { httpPart?: string }) =>
    (route.httpPart === 'body' ? strict : coercing)(route as Parameters<Compile>[0])) as Compile;
};

export async function buildApp(opts: AppOptions = {}): Promise<FastifyInstance> {
  const config: ServerConfig = { ...DEFAULT_CONFIG, ...opts.config };
  const clock = opts.clock ?? Date.now;
  const app = Fastify({
    ...(config.tlsCert !== null && config.tlsKey !== null
      ? { https: { cert: readFileSync(config.tlsCert), key: readFileSync(config.tlsKey) } }
      : {}),
    logger: opts.logger ?? false,
    // The log holds what happened (failed snapshots, refused agents, errors), not each request.
    disableRequestLogging: true,
    schemaController: { compilersFactory: { buildValidator } },
    // Router-level client errors (bad URL encoding, an over-long path parameter) answered in
    // the API's own coded shape, like every other refusal.
    frameworkErrors: (e, _req, generic) => {
      const reply = generic as unknown as FastifyReply;
      const status =
        typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 400;
      void reply
        .code(status)
        .headers(securityHeaders(config))
        .send({ ...errorBody(mqdError('MQD_E_BAD_INPUT', e.message)), statusCode: status });
    },
    // Snapshots are big; everything a client posts is small.
    bodyLimit: 64 * 1024,
    // X-Forwarded-* only from the configured proxies (a list of addresses/CIDRs).
    trustProxy: config.trustedProxies.length > 0 ? [...config.trustedProxies] : false,
  });

  // Refused before the store is opened: a cluster without a channel secret of its own (config.ts).
  const agentToken = config.agentToken ?? newToken();
  const clusterSecret = clusterSecretOf(config, agentToken);
  if (!clusterSecret.ok) throw new MqdException(clusterSecret.error);
  const clusterDropped = new Counter(
    'mqd_cluster_dropped_messages_total',
    'Messages on the cluster channel (PostgreSQL NOTIFY) dropped, by reason: unsealed, forged, stale, replayed, wrong-sender, malformed. Any rise means another database role writes to the channel (docs/deploy/postgres.md).',
  );
  const ownsStore = opts.store === undefined;
  const store: StorePort =
    opts.store ??
    (await openStore({
      storeUrl: config.storeUrl,
      dataDir: config.dataDir,
      clock,
      retention: {
        maxSnapshotsPerJob: config.maxSnapshotsPerJob,
        maxAgeSeconds: config.maxSnapshotAgeSeconds,
        auditAgeSeconds: config.auditRetentionSeconds,
      },
    }));
  // The flags seed the watch policy at the first start; then the store's (the admins') holds.
  if ((await store.watchPolicy()) === null && store.readOnlyReason === null) {
    await store.setWatchPolicy(watchPolicyOf(config), {
      who: WATCHER,
      action: 'watch-policy',
      detail: 'seeded from the configuration (--watch flags)',
    });
  }
  const auth = new Auth({
    store,
    clock,
    sessionTtlSeconds: config.sessionTtlSeconds,
    loginTokenTtlSeconds: config.loginTokenTtlSeconds,
    proxyUserHeader: config.proxyUserHeader,
    trustedProxies: config.trustedProxies.flatMap((c) => {
      const p = parseCidr(c);
      return p === null ? [] : [p];
    }),
  });
  const adminToken = await auth.ensureAdmin(config.adminToken);

  const io = new SocketServer(app.server, {
    serveClient: false,
    // A browser page of another origin must not ride the user's cookie into /ui or /agents
    // (agents and API clients send no Origin and are not affected).
    allowRequest: (req, cb) => {
      const origin = req.headers.origin;
      cb(null, origin === undefined || originAllowed(origin, req.headers.host, config));
    },
    // engine.io's hard cap sits above ours, so a message a little over maxMessageBytes is
    // still received and refused with a coded error; far bigger ones just cut the connection.
    maxHttpBufferSize: config.maxMessageBytes + 64 * 1024,
  });
  // Several instances on one PostgreSQL store are one cluster (cluster/setup.ts): the adapter
  // goes in before any namespace is made.
  const instance = newInstanceId();
  const timing = opts.clusterTiming ?? DEFAULT_CLUSTER_TIMING;
  const adapter = await attachClusterAdapter(io, store, config.storeUrl, {
    timing,
    instance,
    secret: clusterSecret.value,
    onError: (e) =>
      app.log.warn({ err: String(e) }, 'the cluster adapter failed (socket.io between instances)'),
    onDrop: (reason) => clusterDropped.inc({ reason }),
    log: app.log,
  });
  const leases = new Leases(store, instance, {
    renewMs: opts.leaseMs?.renew ?? 5000,
    ttlMs: opts.leaseMs?.ttl ?? 15_000,
    log: app.log,
  });
  await leases.start();
  let cluster: ClusterHub | null = null;
  // (The cluster hub closes with the agents hub plugin: s.hub.close().)
  app.addHook('preClose', async () => {
    await leases.stop();
  });
  app.addHook('onClose', async () => {
    await adapter?.close([AGENT_NAMESPACE, '/ui', CLUSTER_NAMESPACE]);
  });
  const uiNsp = io.of('/ui');
  const uiSessions = new UiSessions(uiNsp, auth);
  const ui: UiEvents = {
    toJob: (uid, event, payload) => uiNsp.to(jobRooms(uid)).emit(event, payload),
    toAll: (event, payload) => uiNsp.emit(event, payload),
  };
  // Logins expire while their sockets stay open: checked again periodically (revocation, logout
  // and user changes check at once, where they happen).
  const recheck = setInterval(() => {
    uiSessions
      .recheck({ local: true })
      .catch((e: unknown) => app.log.error({ err: e }, 'rechecking /ui logins failed'));
  }, UI_RECHECK_MS);
  recheck.unref();
  app.addHook('onClose', async () => clearInterval(recheck));
  const hub = new AgentHub(io.of(AGENT_NAMESPACE), {
    agentToken,
    allowSharedToken: config.allowSharedAgentToken,
    maxMessageBytes: config.maxMessageBytes,
    statusIntervalMs: 10_000,
    silenceMs: config.agentSilenceMs,
    clock,
    onEvent: (e) => {
      // The other instances learn at once which agents this one holds.
      if (e.kind !== 'refused') cluster?.publishSoon();
      // Audit rows of agent events are written outside any request: a store failure there is
      // logged (the store turns read-only), never thrown into socket.io's event loop.
      const audit = (a: Parameters<StorePort['audit']>[0]) => {
        if (!store.isOpen) return;
        store.audit(a).catch((x: unknown) => {
          if (x instanceof MqdException) app.log.error({ code: x.error.code }, x.error.message);
          else app.log.error({ err: x }, 'audit of an agent event failed');
        });
      };
      switch (e.kind) {
        case 'connect':
          audit({ who: `agent:${e.agent.host}`, action: 'agent-connect', detail: e.agent.agentId });
          ui.toAll('agent.connected', { host: e.agent.host, agentId: e.agent.agentId });
          return;
        case 'disconnect':
          audit({ who: `agent:${e.agent.host}`, action: 'agent-disconnect', detail: e.reason });
          ui.toAll('agent.disconnected', {
            host: e.agent.host,
            agentId: e.agent.agentId,
            reason: e.reason,
          });
          return;
        case 'refused':
          app.log.warn({ host: e.host, code: e.error.code }, e.error.message);
          return;
      }
    },
  });
  const joined = clusterHub(io, hub, adapter, instance, timing, app.log);
  cluster = joined.cluster;
  if (cluster !== null) {
    // A logout or revocation on any instance drops the /ui sockets of that login on every one.
    const c = cluster;
    uiSessions.tellPeers(() => c.announceLoginsChanged());
    c.onLoginsChanged(() => {
      uiSessions
        .recheck({ local: true })
        .catch((e: unknown) => app.log.error({ err: e }, 'rechecking /ui logins failed'));
    });
  }
  const registry = new MetricsRegistry();
  registry.add(clusterDropped);
  const overviews = new OverviewService({
    // Overviews made ahead wait while a snapshot is gathered here, or read here for another
    // instance to store: both would share this machine's cores with the fan-in.
    busy: () => snapshots.gathering || cluster?.servingSnapshot === true,
    ...opts.overviews,
    store,
    gzipLevel: config.gzipLevel,
    log: app.log,
  });
  cluster?.onServingSnapshot(() => overviews.yieldToSnapshot());
  app.addHook('onClose', async () => overviews.close());
  const snapshots = new SnapshotService({
    store,
    hub: opts.snapshotHub ?? joined.hub,
    ui,
    clock,
    snapshotTimeoutMs: config.snapshotTimeoutMs,
    gzipLevel: config.gzipLevel,
    maxSnapshotBytes: config.maxSnapshotBytes,
    metrics: snapshotMetrics(registry),
    log: app.log,
    onStored: (id, ranks, jobId) => overviews.prepare(id, ranks, jobId),
    onGatherStart: () => overviews.yieldToSnapshot(),
  });
  // Share links in notifications: the public URL, else the address the server listens on.
  const linkBase = (): string | null => {
    if (config.publicUrl !== null) return config.publicUrl;
    const addr = app.server.address();
    if (addr === null || typeof addr === 'string') return null;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    return `${config.tlsCert !== null ? 'https' : 'http'}://${host}:${addr.port}`;
  };
  const watcher: Watcher = new Watcher({
    store,
    agents: opts.watchAgents ?? joined.hub,
    runsHere: () => leases.holds('watch'),
    snapshots,
    ui,
    verdict: opts.watchVerdict ?? watchVerdict,
    policy: (await store.watchPolicy())?.policy ?? watchPolicyOf(config),
    clock,
    ...(opts.watchTimers ? { timers: opts.watchTimers } : {}),
    webhooks: config.watchWebhooks,
    linkBase,
    shareTtlSeconds: config.shareTtlSeconds,
    countersTimeoutMs: config.snapshotTimeoutMs,
    metrics: watchMetrics(registry, () => watcher.jobStates()),
    log: app.log,
    slurm: opts.slurm === undefined ? defaultSlurmQuery : opts.slurm,
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
    ...(opts.webhookBackoffMs === undefined ? {} : { webhookBackoffMs: opts.webhookBackoffMs }),
  });
  const s: Services = {
    config,
    clock,
    store,
    auth,
    hub: joined.hub,
    instance,
    leases,
    snapshots,
    overviews,
    watcher,
    ui,
    uiSessions,
    io,
    agentToken,
    adminToken,
  };
  app.decorate('mqd', s);
  app.decorateRequest('user', null);

  app.addHook('onRequest', async (req, reply) => {
    reply.headers(securityHeaders(config));
    // API answers hold users' data (snapshots, jobs, audit): no browser or proxy keeps them.
    if (req.url.startsWith('/api/')) reply.header('cache-control', 'no-store');
    // State-changing requests from a page of another origin are refused: the session cookie
    // would otherwise act for the user (CSRF). Clients without an Origin (curl, agents, API
    // scripts with a bearer token) are not browsers and pass.
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'OPTIONS') {
      const origin = req.headers.origin;
      if (origin !== undefined && !originAllowed(origin, req.headers.host, config)) {
        const e = mqdError(
          'MQD_E_BAD_ORIGIN',
          `a ${req.method} from origin '${origin.slice(0, 200)}' is refused`,
        );
        return reply.code(403).send(errorBody(e));
      }
    }
  });
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.setErrorHandler((e, req, reply) => {
    if (e instanceof MqdException) return reply.code(errorBody(e.error).statusCode).send(errorBody(e.error));
    const fe = e as {
      validation?: unknown;
      validationContext?: string;
      statusCode?: number;
      message: string;
    };
    if (fe.validation) {
      return reply
        .code(400)
        .send(errorBody(mqdError('MQD_E_BAD_INPUT', `${fe.validationContext ?? 'request'} ${fe.message}`)));
    }
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      // Fastify's own client errors (bad JSON, body too large, wrong content type).
      return reply
        .code(fe.statusCode)
        .send({ ...errorBody(mqdError('MQD_E_BAD_INPUT', fe.message)), statusCode: fe.statusCode });
    }
    req.log.error({ err: e }, 'unhandled error');
    return reply.code(500).send(errorBody(mqdError('MQD_E_INTERNAL', fe.message)));
  });
  app.setNotFoundHandler((req, reply) => {
    // The dashboard is a single-page app: its routes (/s/<shareId>, ...) are index.html.
    const path = req.url.split('?')[0] ?? '';
    if (
      config.webRoot !== null &&
      req.method === 'GET' &&
      !path.startsWith('/api/') &&
      !path.startsWith('/socket.io')
    ) {
      return reply.type('text/html').sendFile('index.html');
    }
    return reply
      .code(404)
      .send(errorBody(mqdError('MQD_E_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`)));
  });

  await app.register(rateLimit, {
    global: false,
    // After the authed plugin's onRequest hook, so limits are per user, not per address.
    hook: 'preHandler',
    keyGenerator: (req) => (req.user ? `user:${req.user.id}` : `ip:${req.ip}`),
    errorResponseBuilder: (_req, ctx) =>
      new MqdException(
        mqdError('MQD_E_RATE_LIMITED', `more than ${ctx.max} expensive requests in ${ctx.after}`),
      ),
  });
  await app.register(swagger, {
    // Shared schemas appear under their $id (ApiError, JobSnapshot), not def-N.
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json['$id'] ?? `def-${i}`) },
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'MQD Dashboard aggregator',
        description: 'Message-queue snapshots of MPI jobs, gathered from per-node agents.',
        version: SERVER_VERSION,
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer' },
          session: { type: 'apiKey', in: 'cookie', name: 'mqd_session' },
        },
      },
    },
  });

  await app.register(storePlugin, { s, ownsStore });
  await app.register(agentsHubPlugin, { s });
  await app.register(apiPlugin, { s, prefix: '/api' });
  await app.register(fleetPlugin, { s, prefix: '/api' });
  watcher.start();
  // The watch loop (and its webhooks) stops before anything closes: it writes to the store.
  app.addHook('preClose', async () => watcher.close());
  addServiceGauges(registry, { s });
  await app.register(metricsPlugin, { s, registry });
  if (config.webRoot !== null) {
    await app.register(fastifyStatic, {
      root: config.webRoot,
      prefix: '/',
      // Vite names each built asset under assets/ by its content hash: a browser keeps those
      // for good, so a returning page reuses them and V8's code cache instead of fetching and
      // compiling ~640 KB again (a slower first render). index.html, which names the current
      // assets, and the unhashed files are asked again each time (a new build shows at once).
      cacheControl: false,
      setHeaders: (res, path) => {
        res.setHeader('cache-control', cacheControlOf(path));
      },
    });
  }
  return app;
}

/** A built asset's name carries its content hash (Vite's `NAME-XXXXXXXX.ext` under assets/). */
const HASHED_ASSET = /[\\/]assets[\\/][^\\/]+-[A-Za-z0-9_-]{8}\.(?:js|css|map|woff2?|svg|png)$/;

/** The cache-control of a file of the dashboard: immutable when its name is its content's hash. */
export function cacheControlOf(path: string): string {
  return HASHED_ASSET.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache';
}

/** The dashboard's own origins: the Host the request came to, and the configured public URL. */
export function originAllowed(origin: string, host: string | undefined, config: ServerConfig): boolean {
  const scheme = config.tlsCert !== null ? 'https' : 'http';
  if (
    host !== undefined &&
    (origin === `${scheme}://${host}` || (origin === `http://${host}` && config.allowInsecureHttp))
  ) {
    return true;
  }
  if (config.publicUrl !== null) {
    try {
      if (new URL(config.publicUrl).origin === origin) return true;
    } catch (e) {
      if (!(e instanceof TypeError)) throw e;
    }
  }
  return false;
}

/** Headers on every answer: what the built dashboard needs and nothing more. */
export function securityHeaders(config: ServerConfig): Record<string, string> {
  const h: Record<string, string> = {
    'content-security-policy': [
      "default-src 'self'",
      "script-src 'self'",
      // React sets style attributes; no inline <style> or <script> is needed.
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data: blob:",
      "connect-src 'self'",
      "worker-src 'self' blob:",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  };
  if (config.tlsCert !== null) h['strict-transport-security'] = 'max-age=31536000';
  return h;
}
