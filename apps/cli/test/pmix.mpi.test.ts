// PMIx tool attach: Open MPI 5's mpirun (prterun) has no MPIR process table; `mqd
// ranks --attach PID` connects to its PMIx server as a tool (the launcher's own libpmix through
// koffi, packages/mqd-core/src/native/pmix.ts) and asks for the job's process table. Real jobs
// of the Open MPI 5.0.7 build; the CLI as a user runs it.
import { disposeAll, type FixtureJob, launchFixture } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { mqd } from './run-mqd.js';

let job: FixtureJob | null = null;
afterEach(async () => {
  await job?.dispose();
  job = null;
});
afterAll(() => disposeAll());

interface Listed {
  method: string;
  ranks: { rank: number; pid: number; host: string; executable: string }[];
}

describe('Open MPI 5 (prterun): ranks through PMIx', () => {
  it('mqd ranks --attach picks pmix by itself and lists every rank with its pid', async () => {
    job = await launchFixture({ mpi: 'openmpi5', fixture: 'wrong_tag' });
    const auto = await mqd(['ranks', '--attach', String(job.starterPid), '--json']);
    expect(auto.code, auto.err).toBe(0);
    const listed = JSON.parse(auto.out) as Listed;
    expect(listed.method).toBe('pmix');
    expect(listed.ranks.map((r) => [r.rank, r.pid])).toEqual(job.ranks.map((r) => [r.rank, r.pid]));
    expect(listed.ranks.every((r) => r.executable.endsWith('wrong_tag'))).toBe(true);
    const forced = await mqd(['ranks', '--attach', String(job.starterPid), '--method', 'pmix', '--json']);
    expect(forced.code, forced.err).toBe(0);
    expect((JSON.parse(forced.out) as Listed).ranks).toEqual(listed.ranks);
    // The snapshot through the starter reads every rank PMIx named.
    const snap = await mqd(['snapshot', '--attach', String(job.starterPid), '--json']);
    expect(snap.code, snap.err).toBe(0);
    const s = JSON.parse(snap.out) as { ranks: { rank: number; state: { kind: string } }[] };
    expect(s.ranks.map((r) => [r.rank, r.state.kind])).toEqual(job.ranks.map((r) => [r.rank, 'ok']));
  });

  it('--method pmix on a starter that is no PMIx server (MPICH hydra): a coded refusal', async () => {
    job = await launchFixture({ mpi: 'mpich', fixture: 'wrong_tag' });
    const r = await mqd(['ranks', '--attach', String(job.starterPid), '--method', 'pmix']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^MQD_E_NOT_STARTER: .*maps no libpmix/);
  });
});
