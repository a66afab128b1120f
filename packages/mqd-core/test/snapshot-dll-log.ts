// One snapshot of one pid through a Snapshotter (reader children inherit this environment, so
// MQD_DEBUG reaches them); prints the rank's state kind and dllLog as JSON (conformance-corners).
import { Snapshotter } from '../src/index.js';

const s = new Snapshotter();
try {
  const { snapshot } = await s.snapshot([{ pid: Number(process.argv[2]), rank: 0 }]);
  const r = snapshot.ranks[0];
  process.stdout.write(`${JSON.stringify({ state: r?.state.kind, dllLog: r?.dllLog })}\n`);
} finally {
  await s.dispose();
}
