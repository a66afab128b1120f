// Golden tests over real snapshots (recorded from the real MPI jobs by golden.mpi.test.ts, see
// packages/testkit/src/golden.ts): the schema, the hang analysis and the CLI's text, without
// starting MPI. The verdicts below are what each fixture is documented to do
// (fixtures/mpi/README.md); the texts are compared with fixtures/golden/<mpi>/<fixture>.txt,
// rewritten by `UPDATE_GOLDEN=1` (review the diff before committing it).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import {
  buildStackTree,
  explainSnapshot,
  type JobSnapshot,
  type Verdict,
  validateSnapshot,
} from '@mqd/model';
import { type AnyMpiName, goldenFile, listGolden } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { snapshotText } from '../src/snapshot-text.js';

const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const golden = listGolden();

/** Documented outcome per fixture: the verdict and the ranks of its first cycle (if any). */
const EXPECTED: Record<string, { verdict: Verdict; cycle?: number[] }> = {
  ring_ssend: { verdict: 'deadlock', cycle: [0, 1, 2, 3] },
  wrong_tag: { verdict: 'deadlock', cycle: [0, 1] },
  big_isend: { verdict: 'deadlock', cycle: [0, 1, 2, 3] },
  collective_mismatch: { verdict: 'collective-hang' },
  collective_two: { verdict: 'collective-hang' },
  ssend_complete_ring: { verdict: 'deadlock', cycle: [0, 1, 2, 3] },
  probe_wait: { verdict: 'deadlock', cycle: [0, 1, 2, 3] },
  cpp_ring: { verdict: 'deadlock', cycle: [0, 3, 2, 1] },
  split_wildcard: { verdict: 'deadlock' },
  thread_multiple: { verdict: 'deadlock' },
};

const load = (mpi: AnyMpiName, fixture: string) =>
  JSON.parse(readFileSync(goldenFile(mpi, fixture, 'snapshot.json'), 'utf8')) as JobSnapshot;

describe('golden snapshots', () => {
  // Every build golden.mpi.test.ts records (MPICH 4.2.1 where it was built).
  it('cover every recorded fixture on Open MPI 4.1.4 and 5.0.7, MPICH 4.0.2 (ch3 and ch4) and 4.2.1', () => {
    for (const mpi of ['openmpi', 'mpich', 'openmpi5', 'mpichch4', 'mpich42']) {
      expect(golden.filter(([m]) => m === mpi).map(([, f]) => f)).toEqual(Object.keys(EXPECTED).sort());
    }
  });

  it.each(golden)('%s %s: valid, analysed as documented, printed as recorded', (mpi, fixture) => {
    const snapshot = load(mpi, fixture);
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    const explanation = explainSnapshot(snapshot);
    // ch4: MQD reads no MPI_Mprobe arguments (docs/limits.md), and a probe makes no queue
    // entry, so nothing says whom the ranks wait for; every rank is blocked in it, so the
    // analysis says stuck (never "no deadlock").
    const want: { verdict: Verdict; cycle?: number[] } | undefined =
      mpi === 'mpichch4' && fixture === 'probe_wait' ? { verdict: 'stuck' } : EXPECTED[fixture];
    expect(explanation.verdict).toBe(want?.verdict);
    if (want?.cycle) expect(explanation.deadlock?.cycles[0]?.ranks).toEqual(want.cycle);
    const text = snapshotText(snapshot, { stackTree: buildStackTree(snapshot), explanation });
    const file = goldenFile(mpi, fixture, 'txt');
    if (UPDATE || !existsSync(file)) {
      if (!UPDATE) throw new Error(`${file} is missing: run with UPDATE_GOLDEN=1 and review it`);
      writeFileSync(file, `${text}\n`);
    }
    expect(`${text}\n`).toBe(readFileSync(file, 'utf8'));
  });
});
