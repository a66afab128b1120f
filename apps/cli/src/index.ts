export { main } from './main.js';
export { parsePidArg, snapshotCommand } from './snapshot-cmd.js';
export { agentCommand, serveCommand } from './serve-cmd.js';
export { CoreRankReader } from './real-reader.js';
export { MpirJobLocator } from './real-locator.js';
