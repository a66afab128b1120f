export { agentCommand } from './agent-cmd.js';
export {
  type LocalSeams,
  SYNTHETIC_COMMAND,
  SYNTHETIC_STARTER_PID,
  syntheticDemoJob,
  withSyntheticJobs,
} from './demo-seams.js';
export { type LocalServe, serveWithLocalAgent } from './local-serve.js';
export { main } from './main.js';
export { parsePidArg } from './pid-arg.js';
export { MpirJobLocator } from './real-locator.js';
export { CoreRankReader } from './real-reader.js';
export { serveCommand } from './serve-cmd.js';
export { snapshotCommand } from './snapshot-cmd.js';
