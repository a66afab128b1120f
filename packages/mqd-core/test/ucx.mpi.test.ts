// Open MPI over UCX (`--mca pml ucx`), where Open MPI's own DLL shows nothing: every hang fixture
// run under the ucx PML on Open MPI 4.1.4 and 5.0.7 gives the posted receives the ob1 run gives
// (the same peers, tags, communicators, lengths and order, checked against the same table,
// packages/testkit/src/expected-queues.ts, and against the ob1 golden snapshot), and the
// unexpected messages ob1's DLL cannot show, read from UCX's worker; sends from the blocking
// send call only, each unknown one said so. Also: the rank says where its queues came from, a
// rank whose UCX lacks debug info is a coded limit, and no rank is left stopped.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processState, tracerPid } from '@mqd/core';
import { explainSnapshot, type JobSnapshot, validateSnapshot } from '@mqd/model';
import {
  expectedUcxQueues,
  GOLDEN_DIR,
  goldenFile,
  HANG_FIXTURES,
  mpiAvailable,
  normaliseSnapshot,
  UCX_MPIS,
  ucxEnv,
  ucxQueueTraits,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';
import { expectQueues } from './queue-checks.js';

const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const rig = fixtureRig();
/** The recorded ucx runs (not an MPI build's folder, so the ob1 golden lists leave them out). */
const ucxGolden = (mpi: string, fixture: string) => join(GOLDEN_DIR, 'ucx', mpi, `${fixture}.snapshot.json`);
const MPIS = UCX_MPIS.filter((m) => mpiAvailable(m));

/** Each rank's posted receives per communicator name, as rows a person compares. */
const receiveRows = (s: JobSnapshot) =>
  s.ranks.map((r) =>
    r.communicators
      .filter((c) => (c.receives?.length ?? 0) > 0)
      .map((c) => [c.name, c.receives?.map((o) => [o.peer.local, o.peer.global, o.tag, o.length, o.status])]),
  );

// ring_ssend on 4.1.4 under ucx does not come up blocked in MPI_Ssend within the test's time
// here (docs/limits.md): left out there until it does.
const fixturesOf = (mpi: string) => HANG_FIXTURES.filter((f) => !(mpi === 'openmpi' && f === 'ring_ssend'));

describe.each(MPIS)('%s under --mca pml ucx', (mpi) => {
  it.each(fixturesOf(mpi))(
    "%s: the queues from UCX are the ob1 run's, and the unexpected messages too",
    async (fixture) => {
      const job = await rig.launch({ mpi, fixture, np: 4, env: ucxEnv() });
      const { snapshot } = await rig.snapshotter.snapshot(
        job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })),
      );
      for (const r of job.ranks) {
        expect(tracerPid(r.pid)).toBe(0);
        expect(processState(r.pid)).not.toBe('t');
      }
      expect(snapshot.ranks.map((r) => [r.rank, r.state.kind])).toEqual(job.ranks.map((r) => [r.rank, 'ok']));
      for (const r of snapshot.ranks) {
        // The stacks say ucx, and the rank says its queues are UCX's, with the sends caveat.
        expect(r.queueSource?.source).toBe('ucx');
        expect(r.queueSource?.library).toMatch(/\/libucp\.so/);
        expect(r.queueSource?.limits.map((l) => l.code)).toEqual(['MQD_E_UCX_SENDS']);
      }
      expectQueues(`${mpi} ucx`, ucxQueueTraits(mpi), snapshot, expectedUcxQueues(mpi, fixture, 4));
      // The same receives as the recorded ob1 run of the same program (fixtures/golden).
      const ob1 = JSON.parse(readFileSync(goldenFile(mpi, fixture, 'snapshot.json'), 'utf8')) as JobSnapshot;
      expect(receiveRows(snapshot)).toEqual(receiveRows(ob1));
      // The analysis says the same about the hang: the verdict, its headline, the ranks of each cycle.
      const said = (s: JobSnapshot) => {
        const e = explainSnapshot(s);
        return [e.verdict, e.headline, e.deadlock?.cycles.map((c) => c.ranks) ?? []];
      };
      expect(said(snapshot)).toEqual(said(ob1));
      const valid = validateSnapshot(snapshot);
      expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
      // Recorded (fixtures/golden/ucx/) for tests that need a real ucx run without MPI; re-recorded with
      // UPDATE_GOLDEN=1, and otherwise the live run must still give what was recorded.
      const got = normaliseSnapshot(snapshot);
      const file = ucxGolden(mpi, fixture);
      if (UPDATE) {
        mkdirSync(join(GOLDEN_DIR, 'ucx', mpi), { recursive: true });
        writeFileSync(file, `${JSON.stringify(got, null, 1)}\n`);
      }
      expect(got).toEqual(JSON.parse(readFileSync(file, 'utf8')));
    },
  );
});
