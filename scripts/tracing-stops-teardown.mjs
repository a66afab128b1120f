// vitest globalSetup of the unit and mpi projects: when the run ends, no process it started is
// left in a tracing stop or traced by a leftover tracer (scripts/tracing-stops.mjs); the run
// fails naming them otherwise.
import { describeLeftovers, findLeftovers, startTicks } from './tracing-stops.mjs';

export default function setup() {
  // This (vitest's main) process started before any test did: everything after it is the run's.
  const since = startTicks(process.pid);
  return async () => {
    if (since === null) return;
    const left = await findLeftovers(since);
    if (left.length > 0) {
      // vitest reports an error thrown here but exits 0 after it: the exit code says it too.
      process.exitCode = 1;
      throw new Error(
        `processes left in a tracing stop or traced at the end of the run (a test leaked them, or a stop was never released):\n${describeLeftovers(left)}`,
      );
    }
  };
}
