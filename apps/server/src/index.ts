// @mqd/server: the aggregator (buildApp, serve), the per-node agent (startAgent) and the
// seams through which the real MPI reader and job locator are plugged in.
export * from './agent.js';
export * from './agent-messages.js';
export * from './agent-protocol.js';
export * from './agent-protocol-decode.js';
export { type AppOptions, buildApp, type Services } from './app.js';
export { ADMIN_NAME, hashToken } from './auth.js';
export * from './config.js';
export * from './fakes.js';
export { type HungJob, SnapshotService, summarize, type UiEvents } from './fanout.js';
export { AgentHub, type AgentInfo, hostAgentToken, tokenMatches } from './hub.js';
export * from './seams.js';
export { dropSecretsFromEnv, readSecretFile, SECRET_ENV_NAME } from './secrets.js';
export * from './serve.js';
export { type RetentionPolicy, SqliteStore, type StoreOptions } from './store.js';
export type { StorePort } from './store-port.js';
export { MIGRATIONS, type Migration } from './store-schema.js';
export type * from './types.js';
