// @mqd/server/agent: what a compute node's `mqd agent` needs (the agent, its wire protocol and
// the reader/locator seams), without the web server, socket.io server or database that the
// package root brings in. It reaches only the agent, protocol and shared rooms, never the
// aggregator's (scripts/check-imports.mjs fails the build otherwise).
export * from './agent/agent.js';
export * from './agent/agent-messages.js';
export { coreFileAllowed, coreFilesOwner, otherOwner, resolveCoreDir } from './agent/core-dirs.js';
export * from './protocol/agent-protocol.js';
export * from './protocol/agent-protocol-decode.js';
export { isLoopback } from './shared/loopback.js';
export * from './shared/seams.js';
export { dropSecretsFromEnv, readSecretFile, SECRET_ENV_NAME } from './shared/secrets.js';
