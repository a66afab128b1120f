// `mqd snapshot --attach PID --progress step_counter --explain` on a real hung job: the fixture
// values_behind (fixtures/mpi/values_behind.c) leaves its last rank one iteration behind
// (step_counter 4, the others 5), blocked in MPI_Recv while the others wait in MPI_Barrier; the
// explanation's least-progressed rank is that one, by the counter. The CLI from its sources.
import { disposeAll, type FixtureJob, launchFixture, mpiAvailable } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { mqdSource } from './run-mqd.js';

const NP = 4;

let job: FixtureJob | null = null;
afterEach(async () => {
  await job?.dispose();
  job = null;
});
afterAll(() => disposeAll());

describe.skipIf(!mpiAvailable('openmpi'))('Open MPI 4.1.4: the progress counter on values_behind', () => {
  it('names the last rank least progressed by step_counter, in the text and in the JSON', async () => {
    job = await launchFixture({ mpi: 'openmpi', fixture: 'values_behind', np: NP });
    const attach = [
      'snapshot',
      '--attach',
      String(job.starterPid),
      '--explain',
      '--progress',
      'step_counter',
    ];
    const text = await mqdSource(attach);
    expect(text.code, text.err).toBe(0);
    const line = 'Least progressed: rank 3 (step_counter = 4; ranks 0-2: 5)';
    expect(text.out.split('\n').map((l) => l.trim())).toContain(line);
    expect(text.out).toContain('step_counter (in exchange, progress counter): ranks 0-2: 5; rank 3: 4');
    const json = await mqdSource([...attach, '--json']);
    expect(json.code, json.err).toBe(0);
    const o = JSON.parse(json.out) as {
      snapshot: { ranks: { values?: { progress?: boolean }[] }[] };
      explanation: {
        summary: string;
        progressCounter?: { least: { value: number; ranks: number[] } | null };
      };
    };
    expect(o.snapshot.ranks.map((r) => r.values?.[0]?.progress)).toEqual([true, true, true, true]);
    expect(o.explanation.progressCounter?.least).toEqual({ value: 4, ranks: [3] });
    expect(o.explanation.summary).toContain(`${line}.`);
  });
});
