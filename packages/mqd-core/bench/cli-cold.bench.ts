// Cold CLI: `mqd --help` against `node -e 0`, and a cold `mqd snapshot` of a real hung
// 4-rank ring_ssend job (a fresh node process, its reader child, the DLL, the read, the print),
// both MPIs. Run: npm run bench (builds first: the CLI runs from apps/cli/dist as a user runs it).
// Figures, medians over MQD_BENCH_RUNS rounds (default 7), everything alternated in each round:
// - node: `node -e 0` (the floor of any node command, the baseline of the same run);
// - help: `mqd --help`;
// - load: importing the snapshot command only, as main.ts does (its one-file bundle) and as
//   the tsc output would be loaded without it (dist/snapshot-cmd.js: ~330 modules);
// - text: `mqd snapshot --pid ...` (text: the ranks are not unwound);
// - textLate: the same with MQD_EARLY_READER=0 (the reader starts when the command asks for it,
//   the baseline of the early reader);
// - json: `mqd snapshot --json --pid ...` (stacks read in the same stops, as the JSON carries them).
// The ranks poll without end. On a node each has its own core; on these 2 cores they compete with
// the command, so they run at nice 19 (MPICH ch3's polling still slows any process beside it:
// `node -e 0` 2.5x, and as much under SCHED_IDLE: it is not their CPU share). A second pass holds
// them in SIGSTOP, so nothing competes, as on a node with a core per rank (the reader stops and
// reads a stopped process the same way; a running rank on its own core enters the stop at once):
// node, text and textLate again.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchFixture } from '@mqd/testkit';

const RUNS = Number(process.env['MQD_BENCH_RUNS'] ?? 7);
const MQD = fileURLToPath(new URL('../../../apps/cli/bin/mqd.js', import.meta.url));
const CLI_DIST = fileURLToPath(new URL('../../../apps/cli/dist/', import.meta.url));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
type Mpi = 'openmpi' | 'mpich';

/** Wall time of one child process, ms; throws unless it exits 0. */
function timed(args: readonly string[], env: NodeJS.ProcessEnv = process.env): number {
  const t0 = process.hrtime.bigint();
  execFileSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 << 20, env });
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const importOnly = (file: string) => ['--input-type=module', '-e', `await import(${JSON.stringify(file)})`];
const loadAvg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);

interface Row {
  mpi: Mpi;
  nodeMs: number;
  helpMs: number;
  helpRatio: number;
  loadBundleMs: number;
  loadModulesMs: number;
  textMs: number;
  textLateMs: number;
  jsonMs: number;
  textOverNode: number;
  /** The ranks held in SIGSTOP (nothing competes with the command): node -e 0 and the text snapshot. */
  quiet: { nodeMs: number; textMs: number; textLateMs: number; textOverNode: number };
  loadAvg: { start: number[]; end: number[] };
}

async function measure(mpi: Mpi): Promise<Row> {
  const job = await launchFixture({ mpi, fixture: 'ring_ssend', np: 4 });
  try {
    for (const r of job.ranks) setPriority(r.pid, 19);
    const pids = job.ranks.flatMap((r) => ['--pid', `${r.pid}:${r.rank}`]);
    const late = { ...process.env, MQD_EARLY_READER: '0' };
    const start = loadAvg();
    const t = { node: [] as number[], help: [] as number[], bundle: [] as number[], modules: [] as number[] };
    const snap = { text: [] as number[], textLate: [] as number[], json: [] as number[] };
    // One untimed round: the page cache holds the files, as for a user's second command.
    timed([MQD, 'snapshot', ...pids]);
    for (let i = 0; i < RUNS; i++) {
      t.node.push(timed(['-e', '0']));
      t.help.push(timed([MQD, '--help']));
      t.bundle.push(timed(importOnly(`${CLI_DIST}snapshot-cmd.bundle.js`)));
      t.modules.push(timed(importOnly(`${CLI_DIST}snapshot-cmd.js`)));
      snap.text.push(timed([MQD, 'snapshot', ...pids]));
      snap.textLate.push(timed([MQD, 'snapshot', ...pids], late));
      snap.json.push(timed([MQD, 'snapshot', '--json', ...pids]));
    }
    const quiet = { node: [] as number[], text: [] as number[], textLate: [] as number[] };
    for (const r of job.ranks) process.kill(r.pid, 'SIGSTOP');
    try {
      for (let i = 0; i < RUNS; i++) {
        quiet.node.push(timed(['-e', '0']));
        quiet.text.push(timed([MQD, 'snapshot', ...pids]));
        quiet.textLate.push(timed([MQD, 'snapshot', ...pids], late));
      }
    } finally {
      for (const r of job.ranks) process.kill(r.pid, 'SIGCONT');
    }
    return {
      mpi,
      nodeMs: median(t.node),
      helpMs: median(t.help),
      helpRatio: median(t.help) / median(t.node),
      loadBundleMs: median(t.bundle),
      loadModulesMs: median(t.modules),
      textMs: median(snap.text),
      textLateMs: median(snap.textLate),
      jsonMs: median(snap.json),
      textOverNode: median(snap.text) / median(t.node),
      quiet: {
        nodeMs: median(quiet.node),
        textMs: median(quiet.text),
        textLateMs: median(quiet.textLate),
        textOverNode: median(quiet.text) / median(quiet.node),
      },
      loadAvg: { start, end: loadAvg() },
    };
  } finally {
    await job.dispose();
  }
}

const rows: Row[] = [];
for (const mpi of ['openmpi', 'mpich'] as const) rows.push(await measure(mpi));
const result = {
  bench: 'cli-cold',
  date: new Date().toISOString(),
  runs: RUNS,
  baseline: '`node -e 0` in the same rounds',
  targets: { helpRatio: 3, textMs: 400 },
  rows,
};
mkdirSync('bench/results', { recursive: true });
writeFileSync('bench/results/cli-cold.json', `${JSON.stringify(result, null, 2)}\n`);
for (const r of rows) {
  console.log(
    `cold CLI ${r.mpi}: node -e 0 ${r.nodeMs.toFixed(0)} ms, mqd --help ${r.helpMs.toFixed(0)} ms (x${r.helpRatio.toFixed(2)}); snapshot command load ${r.loadBundleMs.toFixed(0)} ms bundled vs ${r.loadModulesMs.toFixed(0)} ms as modules; cold 4-rank snapshot ${r.textMs.toFixed(0)} ms text (reader started late: ${r.textLateMs.toFixed(0)} ms), ${r.jsonMs.toFixed(0)} ms --json with stacks; ranks held in SIGSTOP: node -e 0 ${r.quiet.nodeMs.toFixed(0)} ms, text ${r.quiet.textMs.toFixed(0)} ms (late ${r.quiet.textLateMs.toFixed(0)} ms) (load ${r.loadAvg.start.join(' ')})`,
  );
}
