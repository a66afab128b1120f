import {
  type AnyMpiName,
  disposeAll,
  done,
  EXPECTED_OPENMP,
  type ExpectedOmpThread,
  expectedHybridCall,
  type FixtureJob,
  failed,
  frameMatcher,
  HYBRID_FIXTURES,
  HYBRID_NP,
  HYBRID_WORLD_RECEIVE_TAGS,
  launchFixture,
  MPI_LABELS,
  MPI_NAMES,
  MPI_VERSIONS,
  mpiAvailable,
  mpiMissingMessage,
  mqsDump,
  type OracleReport,
  type OracleThread,
  ompdOracle,
  openmpAvailable,
  openmpMissingMessage,
  pending,
  type RankProcess,
  threadFrames,
  WaitTimeoutError,
  waitFor,
} from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

const jobs: FixtureJob[] = [];
afterEach(async () => {
  await Promise.all(jobs.splice(0).map((j) => j.dispose()));
});
afterAll(async () => {
  await disposeAll();
});

// The fixtures and the oracle checked on their own, without MQD: under one build of each family
//. Under every build (MPICH 4.2.1 and the ch4 and Open MPI 5 builds too),
// packages/mqd-core/test/ompd.mpi.test.ts reads the same fixtures with MQD and requires each
// thread to equal both EXPECTED_OPENMP and this oracle on the same rank, the MPI call on its
// thread's stack and the queues: a fixture or oracle that broke under any build fails there.
const FIXTURE_BUILDS: readonly AnyMpiName[] = MPI_NAMES;
// Without OMP_DEBUG the oracle's libompd refuses every thread: the OpenMP runtime's and gdb's
// behaviour, the same beside any MPI; one build.
const NO_DEBUG_BUILD: AnyMpiName = 'openmpi';

/** Fails (never skips) when provisioning did not build this MPI or the OpenMP runtime. */
function requireBuilt(mpi: AnyMpiName): void {
  expect(mpiAvailable(mpi), mpiMissingMessage(mpi)).toBe(true);
  expect(openmpAvailable(), openmpMissingMessage()).toBe(true);
}

/** What the oracle and the table both say, in the same shape (the table's sort order). */
interface Seen {
  threadNum: number | null;
  state: string;
  parallel: { teamSize: number | null; level: number | null };
  taskKind: string | null;
}

const fromOracle = (t: OracleThread): Seen => ({
  threadNum: t.threadNum,
  state: t.state,
  parallel: { teamSize: t.teamSize, level: t.level },
  taskKind: t.taskKind,
});

const fromTable = (t: ExpectedOmpThread): Seen => ({
  threadNum: t.threadNum,
  state: t.state,
  parallel: { teamSize: t.parallel.teamSize, level: t.parallel.level },
  taskKind: t.taskKind,
});

/**
 * The oracle's report once it matches the table. The READY line comes right before the last
 * thread blocks; its teammates may still be on their way into the runtime's wait, so poll (each
 * poll is one gdb attach) until the states settle, and return the last report either way.
 */
async function settledReport(rank: RankProcess, expected: readonly Seen[]): Promise<OracleReport> {
  let last: OracleReport | undefined;
  await waitFor(
    async () => {
      const report = await ompdOracle(rank.pid);
      if (!report.ok) return failed(report.error);
      last = report.value;
      const seen = report.value.threads.map(fromOracle);
      return JSON.stringify(seen) === JSON.stringify(expected) ? done(true) : pending(JSON.stringify(seen));
    },
    {
      timeoutMs: 60_000,
      what: `rank ${rank.rank}'s OpenMP threads to match EXPECTED_OPENMP`,
      initialIntervalMs: 200,
    },
  ).catch((e: unknown) => {
    // A timeout: the comparison below shows the difference. Anything else (gdb failed) is fatal.
    if (!(e instanceof WaitTimeoutError)) throw e;
  });
  if (last === undefined) throw new Error(`MQD_TESTKIT_E_ORACLE: no report for rank ${rank.rank}`);
  return last;
}

describe.each(FIXTURE_BUILDS)('%s', (mpi) => {
  const label = `${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]}`;

  it.each(HYBRID_FIXTURES)(
    `${label}: %s threads match EXPECTED_OPENMP (gdb OMPD oracle)`,
    async (fixture) => {
      requireBuilt(mpi);
      const job = await launchFixture({ mpi, fixture, hybrid: true });
      jobs.push(job);
      expect(job.np).toBe(HYBRID_NP);
      expect(job.ranks.map((r) => r.rank)).toEqual([0, 1]);
      expect(job.ranks.map((r) => r.call)).toEqual([0, 1].map((r) => expectedHybridCall(fixture, r)));

      // The queues first: the oracle's gdb and mqs-dump both ptrace, one after the other.
      const dumped = await mqsDump(
        mpi,
        job.ranks.map((r) => r.pid),
      );
      if (!dumped.ok) throw new Error(dumped.error);
      for (const r of job.ranks) {
        const world = dumped.value[r.rank]?.comms.find((c) => c.name === 'MPI_COMM_WORLD');
        // Status aside: Open MPI's DLL calls a receive inside a blocking call 'complete'.
        expect(
          (world?.receives ?? []).map((op) => op.desiredTag),
          `rank ${r.rank}: receives on MPI_COMM_WORLD`,
        ).toEqual(HYBRID_WORLD_RECEIVE_TAGS[fixture]);
        expect(world?.sends ?? [], `rank ${r.rank}: sends on MPI_COMM_WORLD`).toEqual([]);
      }

      for (const r of job.ranks) {
        const table = EXPECTED_OPENMP[fixture][r.rank] ?? [];
        const report = await settledReport(r, table.map(fromTable));
        expect(report.threads.map(fromOracle), `rank ${r.rank} (pid ${r.pid}):\n${report.raw}`).toEqual(
          table.map(fromTable),
        );

        // Wait ids: 0 unless waiting for a lock; one lock, one wait id; two locks, two.
        const lockIds = new Map<string, string>();
        table.forEach((t, i) => {
          const got = report.threads[i];
          if (t.lock === null) {
            expect(got?.waitId, `rank ${r.rank} thread ${t.threadNum}: wait id`).toBe('0x0');
            return;
          }
          expect(got?.waitId, `rank ${r.rank} thread ${t.threadNum}: wait id of ${t.lock}`).not.toBe('0x0');
          lockIds.set(t.lock, got?.waitId ?? '');
        });
        expect(new Set(lockIds.values()).size).toBe(lockIds.size);

        // Every thread has an entry function; the one in a call shows it on its own stack.
        const frames = await threadFrames(r.pid);
        if (!frames.ok) throw new Error(frames.error);
        table.forEach((t, i) => {
          const got = report.threads[i];
          expect(got?.function, `rank ${r.rank} thread ${t.threadNum}: task function`).toMatch(
            t.taskKind === 'explicit' ? /^\.omp_task_entry\./ : /^\.omp_outlined\./,
          );
          const stack = frames.value.get(got?.tid ?? 0);
          expect(stack, `rank ${r.rank}: no eu-stack thread ${got?.tid}`).toBeDefined();
          if (t.call !== null) {
            const re = frameMatcher(t.call);
            expect(
              stack?.some((f) => re.test(f)),
              `rank ${r.rank} thread ${t.threadNum} (tid ${got?.tid}) not in ${t.call}: ${stack?.join(' < ')}`,
            ).toBe(true);
          }
        });
      }
      await job.dispose();
    },
  );
});

describe('the oracle without OMP_DEBUG', () => {
  const mpi = NO_DEBUG_BUILD;
  const label = `${MPI_LABELS[mpi]} ${MPI_VERSIONS[mpi]}`;

  it(`${label}: without OMP_DEBUG the oracle reads no OpenMP state`, async () => {
    requireBuilt(mpi);
    const job = await launchFixture({
      mpi,
      fixture: 'omp_single_recv',
      hybrid: true,
      unsetEnv: ['OMP_DEBUG'],
    });
    jobs.push(job);
    expect(job.output()).not.toContain('OMP_OMPD active');
    const rank = job.ranks[0];
    if (rank === undefined) throw new Error('no rank 0');
    const report = await ompdOracle(rank.pid);
    if (!report.ok) throw new Error(report.error);
    expect(report.value.threads, report.value.raw).toEqual([]);
    // libompd loads, but every thread's state needs the tracking OMP_DEBUG turns on
    // (ompd_rc_needs_state_tracking = 6), one per OpenMP thread of the team.
    const refused = report.value.notes.filter((n) => n.endsWith('ompd_get_state failed'));
    expect(refused, report.value.raw).toHaveLength(4);
    expect(report.value.notes).toContain(
      'libompd: An error occurred when calling ompd_get_state! Error code: 6',
    );
    await job.dispose();
  });
});
