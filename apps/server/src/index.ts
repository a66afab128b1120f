// @mqd/server: the aggregator (buildApp, serve), the per-node agent (startAgent) and the
// seams through which the real MPI reader and job locator are plugged in.
export * from './agent/agent.js';
export * from './agent/agent-messages.js';
export { ADMIN_NAME, hashToken } from './auth/auth.js';
export { type HungJob, SnapshotService, summarize, type UiEvents } from './fanout/fanout.js';
export { type AppOptions, buildApp, type Services } from './http/app.js';
export * from './http/config.js';
export * from './http/serve.js';
export { AgentHub, type AgentInfo, hostAgentToken, tokenMatches } from './hub/hub.js';
export * from './protocol/agent-protocol.js';
export * from './protocol/agent-protocol-decode.js';
export { isLoopback } from './shared/loopback.js';
export * from './shared/seams.js';
export { dropSecretsFromEnv, readSecretFile, SECRET_ENV_NAME } from './shared/secrets.js';
export type * from './shared/types.js';
export { SqliteStore, type StoreOptions } from './store/dialect-sqlite.js';
export { openStore } from './store/store-open.js';
export type { RetentionPolicy, StorePort } from './store/store-port.js';
export { MIGRATIONS, type Migration } from './store/store-schema.js';
export * from './synthetic/fakes.js';
export * from './synthetic/synthetic-agents.js';
export { MAX_LIVE_JOBS_PER_UID, MAX_REGISTRATIONS_PER_UID_HOUR } from './watch/watcher.js';
