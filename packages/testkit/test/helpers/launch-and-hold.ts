// Child process for the cleanup-on-signal test: launches a fixture, prints its processes as one
// JSON line, then keeps running until it is signalled (the test sends SIGTERM or SIGINT).
import { launchFixture, liveDescendants, type MpiName } from '@mqd/testkit';

const [mpi, fixture] = process.argv.slice(2);
if ((mpi !== 'openmpi' && mpi !== 'mpich') || fixture === undefined) {
  throw new Error('usage: launch-and-hold.ts openmpi|mpich FIXTURE');
}
const job = await launchFixture({ mpi: mpi satisfies MpiName, fixture, waitFor: 'ready' });
const pids = [job.starterPid, ...liveDescendants(job.starterPid), ...job.ranks.map((r) => r.pid)];
console.log(`MQD_HOLDING ${JSON.stringify({ starter: job.starterPid, pids: [...new Set(pids)] })}`);
// Keep the event loop alive until a signal ends the process.
setInterval(() => {}, 60_000);
