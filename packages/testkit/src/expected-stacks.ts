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

/**
 * The hang-class fixtures (fixtures/mpi/README.md, "Hang classes"): one per class of hang the
 * diagnosis names beyond wait-for cycles, each with the ranks it runs on.
 */
export type HangClassFixture =
  | 'finalize_wrong_tag'
  | 'message_race'
  | 'reduce_roots'
  | 'skip_barrier'
  | 'tag_pair_barrier'
  | 'send_send_large'
  | 'probe_dead'
  | 'persistent_unstarted';

export const HANG_CLASS_FIXTURES: readonly HangClassFixture[] = [
  'finalize_wrong_tag',
  'message_race',
  'reduce_roots',
  'skip_barrier',
  'tag_pair_barrier',
  'send_send_large',
  'probe_dead',
  'persistent_unstarted',
];

/** How many ranks each hang-class fixture runs on. */
export const HANG_CLASS_NP: Readonly<Record<HangClassFixture, number>> = {
  finalize_wrong_tag: 2,
  message_race: 2,
  reduce_roots: 2,
  skip_barrier: 4,
  tag_pair_barrier: 4,
  send_send_large: 2,
  probe_dead: 2,
  persistent_unstarted: 2,
};

/** The public MPI call each rank of a hang-class fixture blocks in (its READY line). */
export function expectedHangClassCall(fixture: HangClassFixture, rank: number): string {
  const np = HANG_CLASS_NP[fixture];
  switch (fixture) {
    case 'finalize_wrong_tag':
      return rank === 1 ? 'MPI_Recv' : 'MPI_Finalize';
    case 'message_race':
      return rank === 1 ? 'MPI_Waitall' : 'MPI_Finalize';
    case 'reduce_roots':
      return 'MPI_Reduce';
    case 'skip_barrier':
      return rank < np - 1 ? 'MPI_Barrier' : 'MPI_Finalize';
    case 'tag_pair_barrier':
      return rank < 2 ? 'MPI_Recv' : 'MPI_Barrier';
    case 'send_send_large':
      return 'MPI_Send';
    case 'probe_dead':
      return rank === 1 ? 'MPI_Probe' : 'MPI_Finalize';
    case 'persistent_unstarted':
      return rank === 1 ? 'MPI_Wait' : 'MPI_Finalize';
    default:
      throw new Error(`MQD_TESTKIT_E_FIXTURE: no hang-class expectation for '${String(fixture)}'`);
  }
}
