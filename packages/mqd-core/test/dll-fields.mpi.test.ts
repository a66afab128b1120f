// A DLL built against other versions of its library's structs (src/mqs/dll-fields.ts): MPICH
// 4.0.2's own ch4 DLL asks for MPIDI_Devreq_t.am and MPIDIG_req_t's rank/tag/context_id, names
// the library no longer has. Left at -1 (what any debugger answers), the DLL reports plausible
// nonsense; MQD answers the renames, records them per rank, and the queues are then exact.
import { validateSnapshot } from '@mqd/model';
import { expectedQueues, mpiAvailable, mpiMissingMessage, mqsDump } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

const RENAMED = [
  'MPIDIG_req_t.context_id -> MPIDIG_req_t.u.recv.context_id',
  'MPIDIG_req_t.rank -> MPIDIG_req_t.u.recv.source',
  'MPIDIG_req_t.tag -> MPIDIG_req_t.u.recv.tag',
  'MPIDI_Devreq_t.am -> MPIDI_Devreq_t.ch4.am',
];

describe("a DLL's stale field names (MPICH 4.0.2 ch4)", () => {
  it('is provisioned (scripts/provision.sh builds mpich-4.0.2-ch4)', () => {
    expect(mpiAvailable('mpichch4'), mpiMissingMessage('mpichch4')).toBe(true);
  });

  it('the DLL alone misreports wrong_tag; MQD answers the renames, records them, and reads the exact queues', async () => {
    const job = await rig.launch({ mpi: 'mpichch4', fixture: 'wrong_tag', np: 4 });
    const want = expectedQueues('mpichch4', 'wrong_tag', 4)[0]?.[0];
    const rank0 = job.ranks.find((r) => r.rank === 0);
    if (!want || !rank0) throw new Error('wrong_tag has a rank 0 with MPI_COMM_WORLD');

    // The independent oracle without the renames: the DLL's own answer, not the job's queues.
    const plain = await mqsDump('mpichch4', [rank0.pid], { renames: false });
    if (!plain.ok) throw new Error(plain.error);
    const world = plain.value[0]?.comms.find((c) => c.name === 'MPI_COMM_WORLD');
    const tags = (ops: readonly { desiredTag: number }[] | null | undefined) =>
      (ops ?? []).map((o) => o.desiredTag);
    expect(tags(world?.receives)).not.toEqual(want.receives?.map((o) => o.tag));
    expect(tags(world?.unexpected)).not.toEqual(want.unexpected?.map((o) => o.tag));

    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    for (const r of snapshot.ranks) {
      expect([r.rank, r.dll?.renamedFields, r.dll?.missingFields]).toEqual([r.rank, RENAMED, undefined]);
    }
    const got = snapshot.ranks
      .find((r) => r.rank === 0)
      ?.communicators.find((c) => c.name === 'MPI_COMM_WORLD');
    expect(got?.receives?.map((o) => [o.peer.local, o.tag, o.length])).toEqual(
      want.receives?.map((o) => [o.peer, o.tag, o.length]),
    );
    expect(got?.unexpected?.map((o) => [o.peer.local, o.tag, o.length, o.status])).toEqual(
      want.unexpected?.map((o) => [o.peer, o.tag, o.length, o.status]),
    );
  });

  it('a DLL that matches its library (MPICH 4.0.2 ch3) has neither list', async () => {
    const job = await rig.launch({ mpi: 'mpich', fixture: 'wrong_tag', np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    for (const r of snapshot.ranks) {
      expect([r.rank, r.dll?.renamedFields, r.dll?.missingFields]).toEqual([r.rank, undefined, undefined]);
    }
  });
});
