// The stack fixtures (fixtures/mpi/README.md, "Stacks"): where each rank's stacks must show it,
// as data for the tests of unwinding and of the MPI call a rank is in.
import { DEBUGLINK_SUFFIX } from './fixtures.js';

export type StackFixture =
  | 'collective_two'
  | 'collective_two_debuglink'
  | 'ssend_complete_ring'
  | 'probe_wait'
  | 'thread_multiple'
  | 'cpp_ring';

export const STACK_FIXTURES: readonly StackFixture[] = [
  'collective_two',
  'collective_two_debuglink',
  'ssend_complete_ring',
  'probe_wait',
  'thread_multiple',
  'cpp_ring',
];

/** The public MPI call (PMPI_ folded to MPI_) each rank's stacks must show. */
export function expectedStackCall(fixture: StackFixture, rank: number, np = 4): string {
  const base = fixture.endsWith(DEBUGLINK_SUFFIX) ? fixture.slice(0, -DEBUGLINK_SUFFIX.length) : fixture;
  switch (base) {
    case 'collective_two':
      return rank < np - 1 ? 'MPI_Barrier' : 'MPI_Allreduce';
    case 'ssend_complete_ring':
      return 'MPI_Ssend';
    case 'probe_wait':
      return 'MPI_Mprobe';
    case 'thread_multiple':
    case 'cpp_ring':
      return 'MPI_Recv';
    default:
      throw new Error(`MQD_TESTKIT_E_FIXTURE: no stack expectation for '${fixture}'`);
  }
}

/** Fixtures whose blocking call is on a thread other than the main one (thread_multiple). */
export function blocksOffMainThread(fixture: string): boolean {
  return fixture === 'thread_multiple';
}

/** Demangled C++ frames the cpp_ring fixture must show (prefixes; parameter lists differ by MPI). */
export const CPP_RING_FRAMES: readonly string[] = ['mqd::ring::recv_from<int>(', 'mqd::ring::Node::wait('];
