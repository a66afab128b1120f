// A DLL built against other versions of its library's structs (src/mqs/dll-fields.ts): MPICH
// 4.0.2's own ch4 DLL asks for MPIDI_Devreq_t.am and MPIDIG_req_t's rank/tag/context_id, names
// the library no longer has. Left at -1 (what any debugger answers), the DLL reports plausible
// nonsense; MQD answers the renames, records them per rank, and the queues are then exact.
// ch4's unexpected entries count bytes while the snapshot's lengths are elements: each says so
// (Operation.lengthUnit); no other build's operations carry a unit of their own.
import { type JobSnapshot, QUEUE_KINDS, type QueueKind, validateSnapshot } from '@mqd/model';
import {
  type AnyMpiName,
  expectedQueues,
  mpiAvailable,
  mpiMissingMessage,
  mpiQueueTraits,
  mqsDump,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

/** Per queue: how many operations the snapshot holds, and each distinct own unit ('-' = none). */
function unitsByQueue(s: JobSnapshot): Record<QueueKind, { ops: number; units: string[] }> {
  const out = {} as Record<QueueKind, { ops: number; units: string[] }>;
  for (const q of QUEUE_KINDS) {
    const ops = s.ranks.flatMap((r) => r.communicators.flatMap((c) => c[q] ?? []));
    out[q] = { ops: ops.length, units: [...new Set(ops.map((o) => o.lengthUnit ?? '-'))].sort() };
  }
  return out;
}

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
    // The lengths of ch4's unexpected entries are bytes (the testkit's trait), the snapshot's
    // elements: every unexpected entry says bytes, nothing else carries a unit.
    expect(mpiQueueTraits('mpichch4').unexpectedLength).toBe('bytes');
    expect(snapshot.mpi.lengthUnit).toBe('elements');
    const units = unitsByQueue(snapshot);
    expect(units.unexpected.ops).toBeGreaterThan(0);
    expect(units.unexpected.units).toEqual(['bytes']);
    expect(units.receives.ops).toBeGreaterThan(0);
    expect(units.receives.units).toEqual(['-']);
    expect(units.sends.units).toEqual(units.sends.ops > 0 ? ['-'] : []);
  });

  it('a DLL that matches its library (MPICH 4.0.2 ch3) has neither list', async () => {
    const job = await rig.launch({ mpi: 'mpich', fixture: 'wrong_tag', np: 4 });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    for (const r of snapshot.ranks) {
      expect([r.rank, r.dll?.renamedFields, r.dll?.missingFields]).toEqual([r.rank, undefined, undefined]);
    }
  });

  // ch3 MPICH counts every length in elements (its unexpected entries are 0: no count yet), Open
  // MPI in bytes (and shows no unexpected queue): no operation has a unit of its own.
  it.each(['mpich', 'openmpi'] satisfies AnyMpiName[])(
    'no operation of %s carries its own length unit',
    async (mpi) => {
      expect(mpiQueueTraits(mpi).unexpectedLength).toBe('zero');
      const job = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
      const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
      expect(snapshot.mpi.lengthUnit).toBe(mpi === 'mpich' ? 'elements' : 'bytes');
      const units = unitsByQueue(snapshot);
      const total = QUEUE_KINDS.reduce((n, q) => n + units[q].ops, 0);
      expect(total).toBeGreaterThan(0);
      // ch3 shows wrong_tag's messages as unexpected entries: the queue the unit would be on.
      if (mpi === 'mpich') expect(units.unexpected.ops).toBeGreaterThan(0);
      for (const q of QUEUE_KINDS) expect([q, units[q].units]).toEqual([q, units[q].ops > 0 ? ['-'] : []]);
    },
  );
});
