#!/usr/bin/env node
// The demo, from the moment the dashboard is built: `mqd serve` comes up at once on a SYNTHETIC
// hung job (labelled so in the job list and on the page), while the MPI build the real job needs
// runs as a child (scripts/provision.sh). The page reads the demo's progress from
// demo-status.json, a file of the web root this script assembles in the data directory; when the
// real hung fixture job is up and attached, the status names it and the page moves to it.
// Options:
//   --mpi openmpi|mpich|openmpi5 (default openmpi)   --port N (default 8080)
//   --fixture NAME (default wrong_tag; a hybrid MPI+OpenMP one such as omp_single_recv runs with
//   2 ranks of 4 OpenMP threads and OMP_DEBUG=enabled, fixtures/hybrid/README.md)
//   --data-dir DIR (default .mqd-data)
// For tests (apps/cli/test/demo-*.test.ts), never needed by a person:
//   --provision-cmd CMD: a shell command run instead of provision.sh (its stderr read the same way);
//   --stand-in-real: the "real" job is a second synthetic job, so no MPI is needed.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SYNTHETIC_STARTER_PID, serveCommand, syntheticDemoJob, withSyntheticJobs } from '@mqd/cli';
import { normaliseHost } from '@mqd/mpir';
import { isHybridFixture, launchFixture } from '@mqd/testkit';

const { values } = parseArgs({
  options: {
    mpi: { type: 'string', default: 'openmpi' },
    fixture: { type: 'string', default: 'wrong_tag' },
    port: { type: 'string', default: '8080' },
    'data-dir': { type: 'string', default: '.mqd-data' },
    'stand-in-real': { type: 'boolean', default: false },
    'provision-cmd': { type: 'string' },
  },
});
const repo = fileURLToPath(new URL('..', import.meta.url));
const hybrid = isHybridFixture(values.fixture);
const np = hybrid ? 2 : 4;

// --- what each step costs, measured ------------------------------------------------------
// Wall seconds of each MPI build alone on an idle 2-core machine. Open MPI 4.1.4's is measured
// (450 s wall, 659 CPU-s); the others are their measured CPU-s (docs/provisioning.md, "What each
// build costs") at Open MPI's measured wall/CPU ratio. More cores shorten it in proportion.
const OMPI_WALL_PER_CPU = 450 / 659;
const BUILD_CPU_S = { openmpi: 659, openmpi5: 643, mpich: 359 };
const BUILD_NAME = { openmpi: 'Open MPI 4.1.4', openmpi5: 'Open MPI 5.0.7', mpich: 'MPICH 4.0.2' };
const mpiName = BUILD_NAME[values.mpi] ?? values.mpi;
function buildEstimateSeconds(mpi) {
  const cpu = BUILD_CPU_S[mpi];
  if (cpu === undefined) return null;
  // One core runs the build's CPU-seconds one after the other.
  const cores = availableParallelism();
  return Math.round(cores >= 2 ? (cpu * OMPI_WALL_PER_CPU * 2) / cores : cpu);
}
const estimateBasis =
  values.mpi === 'openmpi'
    ? 'measured: 450 s alone on an idle 2-core machine'
    : `from its measured ${BUILD_CPU_S[values.mpi] ?? '?'} CPU-s on an idle 2-core machine`;

// --- the web root: the built dashboard plus the demo's status ----------------------------
const dataDir = resolve(values['data-dir']);
const webRoot = join(dataDir, 'demo-web');
const dist = join(repo, 'apps/web/dist');
rmSync(webRoot, { recursive: true, force: true });
mkdirSync(webRoot, { recursive: true });
if (existsSync(dist)) for (const f of readdirSync(dist)) symlinkSync(join(dist, f), join(webRoot, f));

const t0 = Date.now();
let status = {
  kind: 'mqd-demo',
  phase: 'starting',
  step: 'Starting the dashboard',
  stepStartedAt: t0,
  estimateSeconds: null,
  estimateBasis: null,
  syntheticJob: null,
  job: null,
  snapshot: null,
  error: null,
};
/**
 * Every version of the file has this many bytes: the static server takes the length from one
 * stat and the bytes from an open after it, so a file renamed in between with another length
 * left the reader waiting for bytes that never came (until the keep-alive timeout).
 */
const STATUS_BYTES = 4096;
function statusBytes(st) {
  // ASCII only (\uXXXX escapes), so characters and bytes count alike.
  const json = (v) =>
    JSON.stringify(v).replace(
      /[\u0080-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
  let text = json(st);
  if (text.length >= STATUS_BYTES)
    text = json({ ...st, error: st.error?.slice(0, 1000) ?? null, step: st.step.slice(0, 500) });
  return `${text.padEnd(STATUS_BYTES - 1)}\n`;
}
function setStatus(patch) {
  status = { ...status, ...patch, updatedAt: Date.now() };
  // Written whole, then renamed: the page never reads half a file.
  const tmp = join(webRoot, '.demo-status.json.tmp');
  writeFileSync(tmp, statusBytes(status));
  renameSync(tmp, join(webRoot, 'demo-status.json'));
}
setStatus({});

// --- the server, with the synthetic stand-in beside the real seams ----------------------
let stop;
const stopped = new Promise((r) => {
  stop = r;
});
let stopping = false;
let provision = null;
for (const s of ['SIGINT', 'SIGTERM'])
  process.once(s, () => {
    stopping = true;
    stop(s);
    if (provision?.pid !== undefined) {
      // Its own process group: the builds it started go with it.
      try {
        process.kill(-provision.pid, 'SIGTERM');
      } catch (e) {
        if (e.code !== 'ESRCH') throw e; // it had just ended
      }
    }
  });

const host = normaliseHost(hostname());
const uid = process.getuid?.() ?? 0;
const standIn = syntheticDemoJob({ host, uid, ranks: np });
const standInReal = syntheticDemoJob({
  host,
  uid,
  ranks: np,
  starterPid: SYNTHETIC_STARTER_PID + 0x100,
  command: 'SYNTHETIC stand-in for the real job (--stand-in-real, for tests)',
});
const standIns = values['stand-in-real'] ? [standIn, standInReal] : [standIn];

const lines = [];
const io = {
  out: (l) => {
    lines.push(l);
    console.log(l);
  },
  err: (l) => console.error(l),
};
const server = serveCommand(
  // The hang watch too: the Fleet view calls a demo job hung after three samples (~45 s).
  [
    '--port',
    values.port,
    '--data-dir',
    dataDir,
    '--web-root',
    webRoot,
    '--auto-snapshot-seconds',
    '15',
    '--watch',
    'on',
    '--watch-period',
    '15',
  ],
  io,
  { untilStopped: stopped, seams: (real) => withSyntheticJobs(real, standIns) },
);
server.then(() => stop('server ended'));

while (!stopping && !lines.some((l) => l.includes('/?token=')))
  await Promise.race([stopped, new Promise((r) => setTimeout(r, 50))]);
const login = lines.find((l) => l.includes('/?token='))?.trim();
const url = login ? new URL(login) : null;
const token = url?.searchParams.get('token') ?? '';
const auth = { authorization: `Bearer ${token}` };

/** Attaches the job of `starterPid` and takes its first snapshot; null when the server went away. */
async function attach(starterPid) {
  for (let i = 0; i < 150 && !stopping && url; i++) {
    const r = await fetch(`${url.origin}/api/jobs/attach`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ starterPid }),
    }).catch(() => null);
    if (r === null) return null;
    if (r.status === 201) {
      const { job } = await r.json();
      const s = await fetch(`${url.origin}/api/jobs/${job.id}/snapshots`, { method: 'POST', headers: auth });
      const { snapshot } = await s.json();
      return { job: job.id, snapshot: snapshot.id };
    }
    await new Promise((res) => setTimeout(res, 200)); // the local agent is still connecting
  }
  return null;
}
const linkTo = (a) => `${url?.origin}/?token=${token}&view=matrix&job=${a.job}&snap=${a.snapshot}`;

const synthetic = await attach(standIn.starterPid);
if (synthetic) {
  setStatus({
    syntheticJob: synthetic.job,
    job: synthetic.job,
    snapshot: synthetic.snapshot,
    phase: 'building',
  });
  console.log(
    `[demo] the dashboard is up after ${Math.round((Date.now() - t0) / 1000)} s, on a SYNTHETIC job.`,
  );
  console.log(
    '[demo] Open it (this link logs you in as admin; the page moves to the real job when it is up):',
  );
  console.log(`    ${linkTo(synthetic)}`);
}

// --- the real job: its MPI build first, as a child --------------------------------------
/** Runs the provisioning, turning its log into the page's progress; resolves to its exit code. */
function provisionMpi() {
  const openmp = hybrid ? [] : ['--no-openmp'];
  const cmd = values['provision-cmd'];
  const child = cmd
    ? spawn('bash', ['-c', cmd], { stdio: ['ignore', 'inherit', 'pipe'], detached: true })
    : spawn('bash', [join(repo, 'scripts/provision.sh'), '--only', values.mpi, '--no-node', ...openmp], {
        stdio: ['ignore', 'inherit', 'pipe'],
        detached: true,
        cwd: repo,
      });
  provision = child;
  setStatus({ step: `Provisioning what the ${mpiName} job needs`, stepStartedAt: Date.now() });
  let buf = '';
  child.stderr.on('data', (d) => {
    process.stderr.write(d);
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      onProvisionLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
  return new Promise((res) => child.on('close', (code, signal) => res(code ?? (signal ? 1 : 0))));
}
let lastLine = '';
function onProvisionLine(line) {
  if (line.trim() !== '') lastLine = line.trim();
  if (line.includes('installing Debian packages')) {
    // Not measured: on this project's machines the packages were always there already.
    setStatus({ step: 'Installing the Debian packages the MPI build needs', stepStartedAt: Date.now() });
  } else if (line.includes('apt-get source')) {
    setStatus({ step: `Fetching the ${mpiName} source`, stepStartedAt: Date.now(), estimateSeconds: null });
  } else if (/: building from /.test(line)) {
    setStatus({
      step: `Building ${mpiName} with debug information for the real hung job`,
      stepStartedAt: Date.now(),
      estimateSeconds: buildEstimateSeconds(values.mpi),
      estimateBasis,
    });
  } else if (/: built in \d+ s/.test(line)) {
    setStatus({ step: `Starting the real ${mpiName} job`, stepStartedAt: Date.now(), estimateSeconds: null });
  }
}

let real = null;
let realJob = null;
if (url && !stopping) {
  const code = await provisionMpi();
  provision = null;
  if (stopping) {
    // Ctrl-C: the provisioning was ended with the demo.
  } else if (code !== 0) {
    setStatus({
      phase: 'failed',
      step: `The ${mpiName} build failed: the dashboard stays on the synthetic job`,
      estimateSeconds: null,
      error: lastLine,
    });
    console.error(`[demo] provisioning failed (exit ${code}); the dashboard stays up on the synthetic job.`);
  } else {
    setStatus({ step: `Starting the real ${mpiName} job`, stepStartedAt: Date.now(), estimateSeconds: null });
    if (values['stand-in-real']) {
      real = await attach(standInReal.starterPid);
    } else {
      console.log(`[demo] starting a hung ${values.mpi} job (${values.fixture}, ${np} ranks)...`);
      try {
        realJob = await launchFixture({
          mpi: values.mpi,
          fixture: values.fixture,
          np,
          hybrid,
          waitFor: 'ready',
        });
        console.log(
          `[demo] job started: starter pid ${realJob.starterPid}, ranks ${realJob.ranks.map((r) => r.pid).join(' ')}`,
        );
        real = await attach(realJob.starterPid);
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        setStatus({ phase: 'failed', step: `The real ${mpiName} job did not start`, error: message });
        console.error(
          `[demo] the real job did not start (${message}); the dashboard stays on the synthetic job.`,
        );
      }
    }
  }
}
if (real) {
  setStatus({
    phase: 'real',
    job: real.job,
    snapshot: real.snapshot,
    step: 'The real job is up',
    estimateSeconds: null,
  });
  console.log(
    `[demo] attached the real job as ${real.job} after ${Math.round((Date.now() - t0) / 1000)} s (snapshots every 15 s).`,
  );
  console.log('[demo] An open page has moved to it; or open (this link logs you in as admin):');
  console.log(`    ${linkTo(real)}`);
  console.log(
    '[demo] The Fleet tab (key f) shows every MPI job on this machine; the hang watch calls this one hung within a minute.',
  );
}

await stopped;
const code = await server;
await realJob?.dispose();
rmSync(webRoot, { recursive: true, force: true });
process.exit(code);
