export { main } from './main.js';
export { parsePidArg, snapshotCommand } from './snapshot-cmd.js';
