// @mqd/server/agent: what a compute node's `mqd agent` needs (the agent, its wire protocol and
// the reader/locator seams), without the web server, socket.io server or database that the
// package root brings in. Nothing here may import app.ts, hub.ts, store.ts or fastify.
export * from './agent.js';
export * from './agent-messages.js';
export * from './agent-protocol.js';
export * from './agent-protocol-decode.js';
export { isLoopback } from './config.js';
export { coreFileAllowed, coreFilesOwner, otherOwner, resolveCoreDir } from './core-dirs.js';
export * from './seams.js';
export { dropSecretsFromEnv, readSecretFile, SECRET_ENV_NAME } from './secrets.js';
