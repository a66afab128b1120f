// A stand-in agent for the kill -9 test: takes a snapshot that holds each rank stopped for a
// minute and prints STOPPED <pid> once a rank is stopped. The test then kill -9s this process.
import { Snapshotter } from '../src/index.js';

const [dll, pid] = process.argv.slice(2);
const s = new Snapshotter();
await s.snapshot([{ pid: Number(pid), rank: 0 }], {
  dll: String(dll),
  holdStoppedMs: 60_000,
  onStopped: (p) => process.stdout.write(`STOPPED ${p} HOST ${s.hostPids().join(',')}\n`),
});
