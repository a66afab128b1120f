// Open MPI over UCX (`--mca pml ucx`), where Open MPI's own DLL shows nothing: every hang fixture
// run under the ucx PML on Open MPI 4.1.4 and 5.0.7 gives the posted receives the ob1 run gives
// (the same peers, tags, communicators, lengths and order, checked against the same table,
// packages/testkit/src/expected-queues.ts, and against the ob1 golden snapshot), and the
// unexpected messages ob1's DLL cannot show, read from UCX's worker; sends from the blocking
// send call only, each unknown one said so. Also: the rank says where its queues came from, a
// rank whose UCX lacks debug info is a coded limit, and no rank is left stopped.
import { readFileSync } from 'node:fs';
import { processState, tracerPid } from '@mqd/core';
import { explainSnapshot, type JobSnapshot, validateSnapshot } from '@mqd/model';
import {
  expectedUcxQueues,
  goldenFile,
  HANG_FIXTURES,
  mpiAvailable,
  UCX_MPIS,
  ucxEnv,
  ucxQueueTraits,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';
import { expectQueues } from './queue-checks.js';

const rig = fixtureRig();
const MPIS = UCX_MPIS.filter((m) => mpiAvailable(m));

/** Each rank's posted receives per communicator name, as rows a person compares. */
const receiveRows = (s: JobSnapshot) =>
  s.ranks.map((r) =>
    r.communicators
      .filter((c) => (c.receives?.length ?? 0) > 0)
      .map((c) => [c.name, c.receives?.map((o) => [o.peer.local, o.peer.global, o.tag, o.length, o.status])]),
  );

describe.each(MPIS)('%s under --mca pml ucx', (mpi) => {
  it.each(HANG_FIXTURES)(
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
    },
  );
});
