// Values across ranks on real hung jobs, against gdb on the same stopped rank. The fixture
// values_behind (fixtures/mpi/values_behind.c) leaves its last rank one iteration behind: the
// global counter, the loop index of solve() and a struct member reached through two pointers
// differ on it. Each value MQD reads in the snapshot's stop must be the text gdb's `print` gives
// for that rank (gdb attaches after the snapshot: the rank has not moved, it is hung); the
// optimized-out local, an unknown name, a bad expression and an unreadable address are coded
// per-rank messages.
import { execFileSync } from 'node:child_process';
import { type EvalRequest, summarizeValues, valueGroupsText } from '@mqd/model';
import { MPI_LABELS, requireMpi } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const NP = 4;

/** What is read, and what gdb is asked (the same text, in the same frame). */
const VALUES: readonly (EvalRequest & { readonly frame?: string })[] = [
  { expr: 'step_counter' },
  { expr: 'iter', frame: 'solve' },
  { expr: 'st->prog->step', frame: 'solve' },
  { expr: 'the_progress.residual' },
  { expr: 'the_progress.neighbours' },
  { expr: 'the_state.prog->neighbours[2]' },
  { expr: 'unit_static' },
  { expr: 'st->name', frame: 'solve' },
  { expr: 'target', frame: 'solve' },
  { expr: '(long)the_progress.neighbours[0]' },
];

/** Coded per-rank messages (the default frame is exchange(), built with -O2). */
const FAILURES: readonly (EvalRequest & { readonly code: string })[] = [
  { expr: 'scratch', code: 'MQD_E_EVAL_OPTIMIZED_OUT' },
  { expr: 'no_such_variable', code: 'MQD_E_EVAL_UNKNOWN_NAME' },
  { expr: 'st->', frame: 'solve', code: 'MQD_E_EVAL_SYNTAX' },
  { expr: '*(int *)8', code: 'MQD_E_EVAL_MEMORY' },
  { expr: 'iter', frame: 'no_such_function', code: 'MQD_E_EVAL_FRAME' },
];

/** gdb's `print` of each request on one stopped rank, in order ("<optimized out>" as gdb says it). */
function gdbPrints(pid: number, reqs: readonly EvalRequest[]): string[] {
  const commands = ['set width 0', 'set print pretty off', 'thread 1'];
  for (const r of reqs) {
    commands.push(`frame function ${r.frame ?? 'exchange'}`, `print ${r.expr}`);
  }
  const out = execFileSync(
    'gdb',
    ['-batch', '-nx', '-p', String(pid), ...commands.flatMap((c) => ['-ex', c])],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    },
  );
  return out
    .split('\n')
    .map((l) => /^\$\d+ = (.*)$/.exec(l)?.[1])
    .filter((x): x is string => x !== undefined);
}

describe.each(['openmpi', 'mpich'] as const)('%s: values across ranks', (mpi) => {
  it('reads a global, a loop index, a member through pointers on every rank, as gdb prints them; failures coded per rank', async () => {
    requireMpi(mpi);
    const job = await rig.launch({ mpi, fixture: 'values_behind', np: NP });
    const evals: EvalRequest[] = [
      ...VALUES.map((v) => (v.frame ? { expr: v.expr, frame: v.frame } : { expr: v.expr })),
      ...FAILURES.map((f) => (f.frame ? { expr: f.expr, frame: f.frame } : { expr: f.expr })),
    ];
    const { snapshot } = await rig.snapshotter.snapshot(
      job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })),
      { evals },
    );
    const label = MPI_LABELS[mpi];
    expect(snapshot.ranks.map((r) => [r.rank, r.state.kind])).toEqual(
      Array.from({ length: NP }, (_, i) => [i, 'ok']),
    );
    // The one rank behind, as the grouping shows it.
    const summaries = summarizeValues(snapshot.ranks);
    const byExpr = new Map(summaries.map((s) => [`${s.expr}@${s.frame}`, s]));
    const step = byExpr.get('step_counter@exchange');
    expect(step && valueGroupsText(step)).toBe(`ranks 0-${NP - 2}: 5; rank ${NP - 1}: 4`);
    expect(step?.min).toEqual({ value: 4, ranks: [NP - 1] });
    const iter = byExpr.get('iter@solve');
    expect(iter && valueGroupsText(iter)).toBe(`ranks 0-${NP - 2}: 5; rank ${NP - 1}: 4`);
    const member = byExpr.get('st->prog->step@solve');
    expect(member && valueGroupsText(member)).toBe(`ranks 0-${NP - 2}: 50; rank ${NP - 1}: 40`);

    for (const r of snapshot.ranks) {
      const values = r.values ?? [];
      expect(values.map((v) => v.expr)).toEqual(evals.map((e) => e.expr));
      const theirs = gdbPrints(r.pid, [
        ...VALUES,
        ...FAILURES.filter((f) => f.code === 'MQD_E_EVAL_OPTIMIZED_OUT'),
      ]);
      const ours = values.slice(0, VALUES.length).map((v) => v.value?.text ?? v.error?.message);
      const where = `${label} rank ${r.rank}`;
      expect([where, ours]).toEqual([where, theirs.slice(0, VALUES.length)]);
      // The optimized-out local: gdb says so, MQD gives its code on this rank.
      expect(theirs[VALUES.length]).toBe('<optimized out>');
      for (const [i, f] of FAILURES.entries()) {
        const v = values[VALUES.length + i];
        expect([where, f.expr, v?.error?.code, v?.value]).toEqual([where, f.expr, f.code, undefined]);
      }
      expect(values[VALUES.length + 2]?.error?.message).toContain('column 5');
      // Numbers for statistics where the value is a scalar.
      expect(values[0]?.value).toMatchObject({ type: 'int', number: r.rank === NP - 1 ? 4 : 5 });
      expect(values[3]?.value?.number).toBeCloseTo(1 / (r.rank === NP - 1 ? 5 : 6), 12);
      expect(values[2]?.frame).toBe('solve');
      expect(values[0]?.frame).toBe('exchange');
    }
  });
});

/** A Fortran module variable and C++ class members, one rank behind; gdb prints each in the frame named. */
const LANGUAGE_CASES = [
  {
    language: 'fortran',
    reads: [
      { expr: 'time_step', gdbFrame: 'values_behind' },
      { expr: 'progress_mod::time_step', gdbFrame: 'values_behind' },
    ],
  },
  {
    language: 'cxx',
    reads: [
      { expr: 'g_stepper->step_', gdbFrame: 'main' },
      { expr: 'stepper.step_', frame: 'main', gdbFrame: 'main' },
      { expr: 'solver::generation', gdbFrame: 'main' },
    ],
  },
] as const;

describe.each(['openmpi', 'mpich'] as const)('%s: values across ranks in Fortran and C++', (mpi) => {
  it.each(LANGUAGE_CASES)('$language: the one rank behind, as gdb prints it', async ({ language, reads }) => {
    requireMpi(mpi);
    const job = await rig.launch({ mpi, fixture: 'values_behind', language, np: 3 });
    const evals: EvalRequest[] = reads.map((r) =>
      'frame' in r ? { expr: r.expr, frame: r.frame } : { expr: r.expr },
    );
    const { snapshot } = await rig.snapshotter.snapshot(
      job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })),
      { evals },
    );
    for (const s of summarizeValues(snapshot.ranks)) {
      expect([s.expr, valueGroupsText(s)]).toEqual([s.expr, 'ranks 0-1: 5; rank 2: 4']);
    }
    for (const r of snapshot.ranks) {
      const theirs = gdbPrints(
        r.pid,
        reads.map((x) => ({ expr: x.expr, frame: x.gdbFrame })),
      );
      const ours = (r.values ?? []).map((v) => v.value?.text ?? v.error?.message);
      const where = `${MPI_LABELS[mpi]} ${language} rank ${r.rank}`;
      expect([where, ours]).toEqual([where, theirs]);
    }
  });
});
