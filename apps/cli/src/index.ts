export { type LocalServe, serveWithLocalAgent } from './local-serve.js';
export { main } from './main.js';
export { MpirJobLocator } from './real-locator.js';
export { CoreRankReader } from './real-reader.js';
export { agentCommand, serveCommand } from './serve-cmd.js';
export { parsePidArg, snapshotCommand } from './snapshot-cmd.js';
