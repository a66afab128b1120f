import {
  type JobSnapshot,
  LIBRARY_QUEUES,
  libraryCaveats,
  openMpiPml,
  type RankSnapshot,
  type ThreadStack,
  unavailableQueueText,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ompiJob, rank, snapshot, world } from '../analysis/fixtures.js';

function withStack(r: RankSnapshot, fns: string[]): RankSnapshot {
  const t: ThreadStack = {
    tid: 100 + r.rank,
    name: null,
    main: true,
    error: null,
    truncated: false,
    frames: fns.map((fn) => ({
      pc: '0x1000',
      function: fn,
      module: null,
      file: null,
      line: null,
      inlined: false,
    })),
  };
  return { ...r, threads: [t] };
}

const ompiWith = (fns: string[] | null): JobSnapshot => {
  const j = ompiJob(2, () => ({}));
  return fns === null ? j : { ...j, ranks: j.ranks.map((r) => withStack(r, fns)) };
};

describe('library facts', () => {
  it("says which queues each library's DLL lists, in the words the views show", () => {
    expect(LIBRARY_QUEUES.openmpi.unexpected).toBe('never');
    expect(LIBRARY_QUEUES.mpich.sends).toBe('debug-build');
    expect(unavailableQueueText('openmpi', 'unexpected')).toBe(
      "Open MPI's DLL cannot show unexpected messages: this list is unknown, not empty.",
    );
    expect(unavailableQueueText('mpich', 'sends')).toBe(
      "MPICH's DLL shows sends only when the library was built with --enable-debuginfo (MPIR_Sendq_head): this list is unknown, not empty.",
    );
    expect(unavailableQueueText('unknown', 'receives')).toBe(
      "the MPI library's message-queue DLL cannot show posted receives: this list is unknown, not empty.",
    );
  });

  it('gives the ucx caveat only when the job may run the ucx PML', () => {
    const ucx = (j: JobSnapshot) => libraryCaveats(j).some((c) => c.includes('ucx'));
    expect(openMpiPml(ompiWith(['mca_pml_ob1_recv', 'PMPI_Recv', 'main']))).toBe('ob1');
    expect(ucx(ompiWith(['mca_pml_ob1_recv', 'PMPI_Recv', 'main']))).toBe(false);
    expect(openMpiPml(ompiWith(['mca_pml_ucx_recv', 'PMPI_Recv', 'main']))).toBe('ucx');
    expect(libraryCaveats(ompiWith(['mca_pml_ucx_recv']))).toContain(
      'This job runs the ucx PML, which keeps no request lists: every queue reads empty.',
    );
    // No stacks: the PML is unknown, so the caveat stays, as a general one.
    expect(ucx(ompiWith(null))).toBe(true);
    expect(ucx(snapshot([rank(0, [world(1, 0, {})])], 'mpich'))).toBe(false);
  });

  it('says where the queues came from when a rank read them from UCX, and why a UCX queue is unknown', () => {
    const j = ompiWith(['mca_pml_ucx_recv', 'PMPI_Recv', 'main']);
    const src = { source: 'ucx' as const, library: '/u/lib/libucp.so.0', limits: [] };
    const all = { ...j, ranks: j.ranks.map((r) => ({ ...r, queueSource: src })) };
    expect(libraryCaveats(all)[0]).toEqual(
      "This job runs the ucx PML: receives and unexpected messages are read from UCX's worker (Open MPI's DLL sees none); sends only where a rank is blocked in one.",
    );
    const one = { ...j, ranks: j.ranks.map((r, i) => (i === 0 ? { ...r, queueSource: src } : r)) };
    expect(libraryCaveats(one)[0]).toContain('unexpected messages of 1 ranks are read from UCX');
    expect(unavailableQueueText('openmpi', 'sends', 'MQD_E_UCX_SENDS')).toBe(
      'UCX keeps no list of sends: only a send the rank is blocked in is known; this list is unknown, not empty.',
    );
    expect(unavailableQueueText('openmpi', 'receives', 'MQD_E_UCX_UNSUPPORTED')).toBe(
      "UCX's posted receives could not be read on this rank: this list is unknown, not empty.",
    );
  });

  it('names the MPICH length unit', () => {
    expect(libraryCaveats(snapshot([rank(0, [world(1, 0, {})])], 'mpich'))[0]).toBe(
      'MPICH reports lengths as element counts, and only non-blocking sends.',
    );
  });
});
