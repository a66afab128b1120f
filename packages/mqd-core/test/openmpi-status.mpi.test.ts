// Requests a thread waits on are pending, on real Open MPI jobs (4.1.4 and 5.0.7): Open MPI's DLL
// calls a request complete when its completion field is non-zero, and while a thread waits on
// the request that field holds the waiter's ompi_wait_sync_t. The reader corrects those from the
// library's own state (src/mqs/libraries/open-mpi.ts). Three witnesses per case: the DLL itself
// (mqs-dump says `complete`: the correction is ours), gdb reading the same requests' fields in
// the library's types (the oracle for pending, peer, tag and length), and MQD's snapshot. MPICH's
// DLL reads the same fixture pending and is left alone.
import { execFileSync } from 'node:child_process';
import {
  type Communicator,
  explainSnapshot,
  type JobSnapshot,
  type Operation,
  type Pid,
  requestAddress,
} from '@mqd/model';
import { MPI_FAMILIES, MPI_LABELS, mpiMatrix, mqsDump } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { processState, tracerPid } from '../src/index.js';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const { snapshotter } = rig;

/** Small enough to stay cheap, deep enough to cross the reader's copy chunks (256 records). */
const RECVS = 300;
const OPEN_MPI = mpiMatrix().filter((m) => MPI_FAMILIES[m] === 'openmpi');
const MPICH = mpiMatrix().filter((m) => MPI_FAMILIES[m] === 'mpich');
const NOTE =
  "Open MPI's DLL calls these requests complete; the library's own state says a thread waits on them";

function world(comms: readonly Communicator[] | undefined): Communicator {
  const w = comms?.find((c) => c.world === true);
  if (!w) throw new Error('MPI_COMM_WORLD missing');
  return w;
}

/** One request as gdb reads it from the stopped rank through the library's own debug info. */
interface GdbRequest {
  readonly complete: bigint;
  readonly state: number;
  readonly peer: number;
  readonly tag: number;
  readonly bytes: number;
  /** The waiter's ompi_wait_sync_t.count (requests it still waits for). */
  readonly syncCount: number;
}

/** gdb attaches to `pid`, prints each request's fields, and detaches (the rank runs on). */
function gdbRequests(pid: number, addresses: readonly string[]): GdbRequest[] {
  const req = (a: string) => `((mca_pml_base_request_t *)${a})`;
  const ompi = (a: string) => `((ompi_request_t *)${a})`;
  const commands = [
    'set width 0',
    ...addresses.map(
      (a) =>
        `printf "REQ %lu %d %d %d %lu %d\\n", (unsigned long)${ompi(a)}->req_complete, (int)${ompi(a)}->req_state, ${req(a)}->req_peer, ${req(a)}->req_tag, ${req(a)}->req_count * ${req(a)}->req_datatype->super.size, ((ompi_wait_sync_t *)${ompi(a)}->req_complete)->count`,
    ),
  ];
  const out = execFileSync(
    'gdb',
    ['-batch', '-nx', '-p', String(pid), ...commands.flatMap((c) => ['-ex', c])],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    },
  );
  const rows = out
    .split('\n')
    .filter((l) => l.startsWith('REQ '))
    .map((l) => l.split(' ').slice(1));
  if (rows.length !== addresses.length)
    throw new Error(`gdb printed ${rows.length} of ${addresses.length} requests:\n${out}`);
  return rows.map(([complete, state, peer, tag, bytes, sync]) => ({
    complete: BigInt(complete ?? '0'),
    state: Number(state),
    peer: Number(peer),
    tag: Number(tag),
    bytes: Number(bytes),
    syncCount: Number(sync),
  }));
}

/** The rank is running free again: no tracer, not in a ptrace stop. */
function expectRunning(pids: readonly number[]): void {
  for (const pid of pids) {
    expect(tracerPid(pid)).toBe(0);
    expect(processState(pid)).not.toBe('t');
  }
}

/** What Open MPI's DLL itself reports for rank `pid`'s receives on MPI_COMM_WORLD. */
async function dllStatuses(mpi: (typeof OPEN_MPI)[number], pid: Pid): Promise<string[]> {
  const dumped = await mqsDump(mpi, [pid]);
  if (!dumped.ok) throw new Error(dumped.error);
  return (dumped.value[0]?.comms.find((c) => c.name === 'MPI_COMM_WORLD')?.receives ?? []).map(
    (o) => o.status,
  );
}

function address(op: Operation | undefined): string {
  const a = op ? requestAddress(op) : null;
  if (a === null) throw new Error('the DLL named no request');
  return a;
}

describe.each(OPEN_MPI)('%s', (mpi) => {
  const label = `${MPI_LABELS[mpi]} (${mpi})`;

  it(`${label}: deep_queues in MPI_Waitall: every receive pending from rank 1, tag 5000, 4 bytes, marked corrected, as gdb reads the requests; the verdict a deadlock`, async () => {
    const job = await rig.launch({
      mpi,
      fixture: 'deep_queues',
      np: 2,
      env: { MQD_DEEP_RECVS: String(RECVS), MQD_DEEP_UNEXPECTED: '10' },
      timeoutMs: 120_000,
    });
    const pids = job.ranks.map((r) => r.pid);
    const r0pid = job.ranks.find((r) => r.rank === 0)?.pid;
    if (r0pid === undefined) throw new Error('no rank 0');
    // Today's reading, the DLL's own: every one of them complete.
    expect(await dllStatuses(mpi, r0pid)).toEqual(Array(RECVS).fill('complete'));

    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    expectRunning(pids);
    const [r0, r1] = snapshot.ranks;
    expect(r0?.state).toEqual({ kind: 'ok' });
    const recv = world(r0?.communicators).receives ?? [];
    expect(recv).toHaveLength(RECVS);
    const wrong = recv.findIndex(
      (o) =>
        o.status !== 'pending' ||
        o.corrected !== 'waited-on' ||
        o.actual !== null ||
        o.peer.local !== 1 ||
        o.peer.global !== 1 ||
        o.tag !== 5000 ||
        o.length !== 4,
    );
    expect([wrong, recv[wrong]]).toEqual([-1, undefined]);
    expect(r0?.statusCorrections).toEqual([
      { reason: 'waited-on', count: RECVS, message: expect.stringContaining(NOTE) },
    ]);
    // Rank 1's blocking MPI_Recv (one thread, no wait sync): the DLL says pending, nothing corrected.
    expect(
      world(r1?.communicators).receives?.map((o) => [o.status, o.peer.local, o.tag, o.corrected]),
    ).toEqual([['pending', 0, 1, undefined]]);
    expect(r1?.statusCorrections).toBeUndefined();

    // The oracle: gdb reads the first, a middle and the last request in the library's types.
    const picks = [recv[0], recv[Math.floor(RECVS / 2)], recv[RECVS - 1]].map(address);
    const seen = gdbRequests(r0pid, picks);
    expectRunning(pids);
    for (const g of seen) {
      // Neither REQUEST_PENDING (0) nor REQUEST_COMPLETED (1): a wait sync that still waits for all.
      expect(g.complete > 1n).toBe(true);
      expect(g).toMatchObject({ state: 2, peer: 1, tag: 5000, bytes: 4, syncCount: RECVS });
    }

    // With the receives pending, rank 0 waits on rank 1 (tag 5000) and rank 1 on rank 0 (tag 1).
    const explained = explainSnapshot(snapshot as JobSnapshot);
    expect(explained.verdict).toBe('deadlock');
    expect([...(explained.deadlock?.cycles[0]?.ranks ?? [])].sort()).toEqual([0, 1]);
  });

  it(`${label}: thread_multiple: a blocking MPI_Recv on a second thread is pending from any rank, tag 5, 4 bytes, marked corrected, as gdb reads it`, async () => {
    const job = await rig.launch({ mpi, fixture: 'thread_multiple', np: 2 });
    const pids = job.ranks.map((r) => r.pid);
    for (const r of job.ranks) expect(await dllStatuses(mpi, r.pid)).toEqual(['complete']);

    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    expectRunning(pids);
    for (const r of snapshot.ranks) {
      expect(r.state).toEqual({ kind: 'ok' });
      const recv = world(r.communicators).receives ?? [];
      expect(recv.map((o) => [o.status, o.corrected, o.actual, o.peer.local, o.tag, o.length])).toEqual([
        ['pending', 'waited-on', null, null, 5, 4],
      ]);
      expect(r.statusCorrections).toEqual([
        { reason: 'waited-on', count: 1, message: expect.stringContaining(NOTE) },
      ]);
      const [g] = gdbRequests(r.pid, [address(recv[0])]);
      expectRunning(pids);
      expect(g && g.complete > 1n).toBe(true);
      // MPI_ANY_SOURCE is -1 in Open MPI.
      expect(g).toMatchObject({ state: 2, peer: -1, tag: 5, bytes: 4, syncCount: 1 });
    }
  });
});

describe.each(MPICH)("%s: MPICH's readings do not change", (mpi) => {
  it(`${MPI_LABELS[mpi]} (${mpi}): deep_queues in MPI_Waitall: the receives pending as its DLL says, nothing corrected`, async () => {
    const job = await rig.launch({
      mpi,
      fixture: 'deep_queues',
      np: 2,
      env: { MQD_DEEP_RECVS: String(RECVS), MQD_DEEP_UNEXPECTED: '10' },
      timeoutMs: 120_000,
    });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    expectRunning(job.ranks.map((r) => r.pid));
    const recv = world(snapshot.ranks[0]?.communicators).receives ?? [];
    expect(recv).toHaveLength(RECVS);
    expect(recv.every((o) => o.status === 'pending' && o.corrected === undefined)).toBe(true);
    for (const r of snapshot.ranks) expect(r.statusCorrections).toBeUndefined();
  });
});
