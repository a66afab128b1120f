// The hang watch's cost to the jobs it watches (issue #31). Run from the repository root:
//   node --conditions=source --import tsx apps/cli/bench/watch-overhead.bench.ts
// (--conditions=source: the workspace packages from their TypeScript sources, as in the tests)
// A fixed-work, compute-bound MPI job (fixtures/mpi/compute_loop.c with MQD_COMPUTE_CHUNKS: two
// ranks, no MPI between two barriers; rank 0 prints the wall time between them) runs under
// `mqd serve` with its in-process agent (real discovery, real counters, real stops) four ways,
// interleaved over ROUNDS rounds so the machine's drift hits every way alike: no watcher (watch
// off: the baseline), and the watcher at the default period, at 10 s and at 1 s. Reported per
// period: the median wall-time ratio against the baseline of the same round, the time any rank
// was stopped as a share of the run (the watcher's own stop accounting: on a quiet node the
// ratio cannot be smaller than this), and whether the per-rank stop budget held. The ratio of a
// loaded machine is noisier than 0.1%: the stop share is the figure that bounds the cost, the
// ratio shows nothing else adds to it. Writes bench/results/watch-overhead.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ApiFleetJob, DEFAULT_WATCH_POLICY } from '@mqd/model';
import { loadConfig } from '@mqd/server';
import { done, launchFixture, pending, waitFor } from '@mqd/testkit';
import { serveWithLocalAgent } from '../src/local-serve.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(dirname(SELF), '..', '..', '..');
const ADMIN = 'bench-admin-token-0123456789abcdef';
const MPI = (process.env['MQD_BENCH_MPI'] ?? 'mpich') as 'mpich' | 'openmpi';
const ROUNDS = Number(process.env['MQD_BENCH_ROUNDS'] ?? 2);
/** Chunks of work: about 70 s of one core per rank on an idle 2-core machine (7 periods of 10 s). */
const CHUNKS = Number(process.env['MQD_BENCH_CHUNKS'] ?? 10000);
const DEFAULT_PERIOD = DEFAULT_WATCH_POLICY.periodSeconds;
const WAYS: readonly (number | null)[] = [null, DEFAULT_PERIOD, 10, 1];

interface Run {
  readonly period: number | null;
  readonly seconds: number;
  readonly samples: number;
  readonly stopMs: number;
  readonly stopBudgetMs: number;
}

async function once(period: number | null): Promise<Run> {
  const argv = period === null ? ['--watch', 'off'] : ['--watch', 'on', '--watch-period', String(period)];
  const cfg = loadConfig({
    env: {},
    argv,
    overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken: ADMIN },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  const local = await serveWithLocalAgent(cfg.value);
  const job = await launchFixture({
    mpi: MPI,
    fixture: 'compute_loop',
    np: 2,
    waitFor: 'ready',
    env: { MQD_COMPUTE_CHUNKS: String(CHUNKS) },
  });
  try {
    const fleetJob = async (): Promise<ApiFleetJob | undefined> => {
      const r = await fetch(`${local.served.url}/api/fleet`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      const body = (await r.json()) as { jobs: ApiFleetJob[] };
      return body.jobs.find((j) => j.program === 'compute_loop' || j.command.includes('compute_loop'));
    };
    // The most samples and stop time seen while the job ran: once it ends its entry's hour of
    // stop accounting is gone.
    let samples = 0;
    let stopMs = 0;
    let budgetMs = DEFAULT_WATCH_POLICY.stopBudgetMsPerRankHour;
    const look = async () => {
      const j = await fleetJob();
      if (j === undefined) return;
      samples = Math.max(samples, j.samples);
      stopMs = Math.max(stopMs, j.stopMsThisHour);
      budgetMs = j.stopBudgetMs;
    };
    const seconds = await waitFor(
      async () => {
        if (period !== null) await look();
        const m = /MQD_COMPUTE_DONE seconds=([0-9.]+)/.exec(job.output());
        return m ? done(Number(m[1])) : pending('computing');
      },
      { timeoutMs: 30 * 60_000, what: 'the fixed work to finish' },
    );
    if (period !== null) await look();
    return { period, seconds, samples, stopMs, stopBudgetMs: budgetMs };
  } finally {
    await job.dispose();
    await local.close();
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

const runs: Run[] = [];
for (let round = 0; round < ROUNDS; round++) {
  // Rotate the order every round: the first and last runs of a round meet different load.
  const order = WAYS.map((_, i) => WAYS[(i + round) % WAYS.length] ?? null);
  const byWay = new Map<number | null, Run>();
  for (const way of order) {
    const r = await once(way);
    byWay.set(way, r);
    runs.push(r);
    process.stdout.write(
      `round ${round + 1} ${way === null ? 'no watcher' : `period ${way} s`}: ${r.seconds.toFixed(3)} s, ${r.samples} samples, stopped ${r.stopMs} ms\n`,
    );
  }
}
const baseline = runs.filter((r) => r.period === null);
const results = WAYS.filter((w): w is number => w !== null).map((period) => {
  const these = runs.filter((r) => r.period === period);
  const ratios = these.map((r, i) => r.seconds / (baseline[i]?.seconds ?? r.seconds));
  const stopShare = these.map((r) => r.stopMs / 1000 / r.seconds);
  // A run shorter than a few periods samples it once or not at all: the stop time of one sample,
  // over the default period, is what the default costs a job that runs for hours.
  const perSample = these.filter((r) => r.samples > 0).map((r) => r.stopMs / r.samples);
  return {
    periodSeconds: period,
    slowdownRatio: median(ratios),
    ratios,
    stopShareOfRun: median(stopShare),
    samples: these.map((r) => r.samples),
    stopMs: these.map((r) => r.stopMs),
    budgetHeld: these.every((r) => r.stopMs <= r.stopBudgetMs),
    stopMsPerSample: perSample.length === 0 ? null : median(perSample),
  };
});
// Pooled over every watched run: the stop time one sample costs a rank, on average.
const watched = runs.filter((r) => r.period !== null && r.samples > 0);
const pooledSamples = watched.reduce((n, r) => n + r.samples, 0);
const stopMsPerSample =
  pooledSamples === 0 ? null : watched.reduce((n, r) => n + r.stopMs, 0) / pooledSamples;
const out = {
  bench: 'watch-overhead',
  /** Stop time of one sample (per rank): every watched run's stop time over its samples, pooled. */
  stopMsPerSample,
  /** That over the default period: the share of a long job's time its ranks spend stopped. */
  projectedStopShareAtDefault: stopMsPerSample === null ? null : stopMsPerSample / (DEFAULT_PERIOD * 1000),
  mpi: MPI,
  ranks: 2,
  chunks: CHUNKS,
  rounds: ROUNDS,
  baselineSeconds: baseline.map((r) => r.seconds),
  results,
  target: `slowdown at the default period (${DEFAULT_PERIOD} s) below 0.1%`,
  at: new Date().toISOString(),
};
mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(join(ROOT, 'bench', 'results', 'watch-overhead.json'), `${JSON.stringify(out, null, 2)}\n`);
process.stdout.write(
  `watch-overhead: one sample stops a rank ${stopMsPerSample?.toFixed(1) ?? '?'} ms; at the default period (${DEFAULT_PERIOD} s) that is ${out.projectedStopShareAtDefault === null ? '?' : (out.projectedStopShareAtDefault * 100).toFixed(4)}% of a job's time\n`,
);
for (const r of results) {
  process.stdout.write(
    `watch-overhead: period ${r.periodSeconds} s: slowdown x${r.slowdownRatio.toFixed(4)}, ranks stopped ${(r.stopShareOfRun * 100).toFixed(4)}% of the run, budget ${r.budgetHeld ? 'held' : 'EXCEEDED'}\n`,
  );
}
