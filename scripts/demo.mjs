#!/usr/bin/env node
// Starts a real hung fixture job and `mqd serve` on it, attaches the job and takes a first
// snapshot so the dashboard has something to show at once. Options:
//   --mpi openmpi|mpich|openmpi5 (default openmpi)   --port N (default 8080)
//   --fixture NAME (default wrong_tag; a hybrid MPI+OpenMP one such as omp_single_recv runs with
//   2 ranks of 4 OpenMP threads and OMP_DEBUG=enabled, fixtures/hybrid/README.md)
import { parseArgs } from 'node:util';
import { serveCommand } from '@mqd/cli';
import { isHybridFixture, launchFixture } from '@mqd/testkit';

const { values } = parseArgs({
  options: {
    mpi: { type: 'string', default: 'openmpi' },
    fixture: { type: 'string', default: 'wrong_tag' },
    port: { type: 'string', default: '8080' },
  },
});
const hybrid = isHybridFixture(values.fixture);
const np = hybrid ? 2 : 4;
console.log(`starting a hung ${values.mpi} job (${values.fixture}, ${np} ranks)...`);
const job = await launchFixture({ mpi: values.mpi, fixture: values.fixture, np, hybrid, waitFor: 'ready' });
console.log(`job started: starter pid ${job.starterPid}, ranks ${job.ranks.map((r) => r.pid).join(' ')}`);

let stop;
const stopped = new Promise((r) => {
  stop = r;
});
for (const s of ['SIGINT', 'SIGTERM']) process.once(s, () => stop(s));

const lines = [];
const io = {
  out: (l) => {
    lines.push(l);
    console.log(l);
  },
  err: (l) => console.error(l),
};
const server = serveCommand(
  // The hang watch too: the Fleet view calls the demo job hung after three samples (~45 s).
  [
    '--port',
    values.port,
    '--data-dir',
    '.mqd-data',
    '--auto-snapshot-seconds',
    '15',
    '--watch',
    'on',
    '--watch-period',
    '15',
  ],
  io,
  { untilStopped: stopped },
);

// Attach the demo job once the aggregator is up, so the dashboard opens on it.
const started = Date.now();
while (!lines.some((l) => l.includes('/?token=')) && Date.now() - started < 30_000)
  await new Promise((r) => setTimeout(r, 50));
const login = lines.find((l) => l.includes('/?token='))?.trim();
if (login) {
  const url = new URL(login);
  const token = url.searchParams.get('token');
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  for (let i = 0; i < 100; i++) {
    // Ctrl-C during the start stops the server under this loop: then just stop asking.
    const r = await fetch(`${url.origin}/api/jobs/attach`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ starterPid: job.starterPid }),
    }).catch(() => null);
    if (r === null) break;
    if (r.status === 201) {
      const { job: j } = await r.json();
      const s = await fetch(`${url.origin}/api/jobs/${j.id}/snapshots`, {
        method: 'POST',
        headers: { authorization: auth.authorization },
      });
      const { snapshot } = await s.json();
      console.log(`attached the demo job as ${j.id} and took a first snapshot (more every 15 s).`);
      console.log('Open the dashboard on it (this link logs you in as admin):');
      console.log(`    ${url.origin}/?token=${token}&view=matrix&job=${j.id}&snap=${snapshot.id}`);
      console.log(
        'The Fleet tab (key f) shows every MPI job on this machine; the hang watch calls this one hung within a minute.',
      );
      break;
    }
    await new Promise((res) => setTimeout(res, 200)); // the local agent is still connecting
  }
}
const code = await server;
await job.dispose();
process.exit(code);
