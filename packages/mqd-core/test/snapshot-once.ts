// Takes one snapshot of the given pids and prints each rank's state as JSON: a child process
// for tests that need another user (the permission test) or a process to kill.
import { Snapshotter } from '../src/index.js';

const [dll, ...pids] = process.argv.slice(2);
const s = new Snapshotter();
try {
  const { snapshot } = await s.snapshot(
    pids.map((p, rank) => ({ pid: Number(p), rank })),
    dll && dll !== '-' ? { dll } : {},
  );
  process.stdout.write(`${JSON.stringify(snapshot.ranks.map((r) => r.state))}\n`);
} finally {
  await s.dispose();
}
