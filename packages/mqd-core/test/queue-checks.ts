// The check every real-MPI queue test makes (`@mqd/core/testing`): a snapshot's ranks show
// exactly the expected queues of a fixture (packages/testkit/src/expected-queues.ts), in
// matching order, with sizes, local ranks and groups as the library's DLL reports them, and
// every other communicator one of the library's own with nothing pending.
import type { Communicator, JobSnapshot, Operation } from '@mqd/model';
import { type ExpectedComm, type ExpectedOp, holdsEntries, type MpiQueueTraits } from '@mqd/testkit';
import { expect } from 'vitest';

const opRow = (o: Operation) => [o.peer.local, o.peer.global, o.tag, o.length, o.status];

function expectedRow(traits: MpiQueueTraits, e: ExpectedOp, comm: Communicator) {
  // The global rank is what the library says, or what MQD derives: from the group, or local ==
  // global on MPI_COMM_WORLD.
  const derived =
    comm.name === 'MPI_COMM_WORLD'
      ? e.peer
      : comm.group && e.peer !== null
        ? (comm.group[e.peer] ?? null)
        : null;
  const global = e.peer === null ? null : (derived ?? (traits.reportsGlobalRanks ? e.peerWorld : null));
  return [e.peer, global, e.tag, e.length, e.status];
}

function checkComm(
  label: string,
  traits: MpiQueueTraits,
  got: Communicator | undefined,
  want: ExpectedComm,
  rank: number,
) {
  const where = `${label} rank ${rank} ${want.name}`;
  expect(got, `${where}: communicator missing`).toBeDefined();
  if (!got) return;
  expect([where, got.size, got.localRank]).toEqual([where, want.size, want.localRank]);
  // MPI_COMM_WORLD's group is the identity by definition and never listed; other groups come
  // from the DLLs that report them (Open MPI's), others cannot (null).
  if (want.name === 'MPI_COMM_WORLD') expect([where, got.group]).toEqual([where, null]);
  else if (traits.reportsGlobalRanks) expect([where, got.group]).toEqual([where, [...want.group]]);
  else expect([where, got.group]).toEqual([where, null]);
  for (const q of ['sends', 'receives', 'unexpected'] as const) {
    const w = want[q];
    if (w === null) {
      expect([where, q, got[q]]).toEqual([where, q, null]);
      expect(got.unavailable[q]?.code).toBe(traits.unknownQueueCodes?.[q] ?? 'MQD_E_QUEUE_UNSUPPORTED');
    } else {
      expect([where, q, got[q]?.map(opRow)]).toEqual([where, q, w.map((e) => expectedRow(traits, e, got))]);
    }
  }
}

/** Every rank of `snapshot` against `expected[rank]` (expectedQueues of the fixture). */
export function expectQueues(
  label: string,
  traits: MpiQueueTraits,
  snapshot: JobSnapshot,
  expected: readonly (readonly ExpectedComm[])[],
): void {
  for (const r of snapshot.ranks) {
    const mine = expected[r.rank] ?? [];
    const matched = new Set<Communicator>();
    for (const want of mine) {
      // A library-internal communicator (ExpectedComm.internal): the one of that name with entries.
      const got = r.communicators.find((c) => c.name === want.name && (!want.internal || holdsEntries(c)));
      if (got) matched.add(got);
      checkComm(label, traits, got, want, r.rank);
    }
    // Every other communicator the library lists is one of its own, with nothing pending.
    const others = r.communicators.filter(
      (c) => !matched.has(c) && !mine.some((w) => !w.internal && w.name === c.name),
    );
    for (const c of others) {
      expect(traits.otherComms).toContain(c.name);
      expect([c.name, c.sends ?? [], c.receives ?? [], c.unexpected ?? []]).toEqual([c.name, [], [], []]);
    }
  }
}
