// Open MPI's jobs under its ucx PML (`--mca pml ucx`): the environment that selects it on a
// machine without InfiniBand (UCX over shared memory on one node, TCP between nodes), and what
// each hang fixture's queues then are. The same installs run ob1 by default; only this
// environment turns ucx on. packages/mqd-core/test/ucx.mpi.test.ts checks both against the real jobs.
import type { MpiName, NewMpiName } from './config.js';
import {
  type ExpectedComm,
  expectedBlockingCall,
  expectedQueues,
  type HangFixture,
  type MpiQueueTraits,
  mpiQueueTraits,
} from './expected-queues.js';

/** The Open MPI builds configured --with-ucx (scripts/provision.sh). */
export type UcxMpiName = Extract<MpiName | NewMpiName, 'openmpi' | 'openmpi5'>;
export const UCX_MPIS: readonly UcxMpiName[] = ['openmpi', 'openmpi5'];

/**
 * The environment that runs a job under the ucx PML. Open MPI's UCX support accepts only
 * InfiniBand-like devices by default (opal_common_ucx_tls and _devices): `any` lets it take the
 * shared-memory transports (and TCP across nodes). No CMA (process_vm_readv), as the ob1 runs.
 */
export function ucxEnv(acrossNodes = false): Record<string, string> {
  return {
    OMPI_MCA_pml: 'ucx',
    OMPI_MCA_opal_common_ucx_tls: 'any',
    OMPI_MCA_opal_common_ucx_devices: 'any',
    UCX_TLS: acrossNodes ? 'self,posix,sysv,tcp' : 'self,posix,sysv',
    UCX_WARN_UNUSED_ENV_VARS: 'n',
  };
}

/** The calls whose send the MPI call's arguments give under UCX (it lists no sends). */
const BLOCKING_SENDS = new Set(['MPI_Send', 'MPI_Ssend', 'MPI_Rsend', 'MPI_Bsend']);

/**
 * What MQD shows of an Open MPI rank under ucx: receives as ob1's DLL shows them, unexpected
 * messages (which ob1's DLL cannot show) as UCX holds them: every one pending, its length the
 * bytes sent (an eager message's payload, a rendezvous request's size); sends only from a
 * blocking send call, else unknown (MQD_E_UCX_SENDS).
 */
export function ucxQueueTraits(mpi: UcxMpiName): MpiQueueTraits {
  return {
    ...mpiQueueTraits(mpi),
    showsUnexpected: true,
    unexpectedLength: 'bytes',
    unexpectedAlwaysPending: true,
    unknownQueueCodes: { sends: 'MQD_E_UCX_SENDS' },
  };
}

/** Each rank's queues of a hang fixture under the ucx PML (index = world rank). */
export function expectedUcxQueues(mpi: UcxMpiName, fixture: HangFixture, np = 4): ExpectedComm[][] {
  return expectedQueues(mpi, fixture, np, ucxQueueTraits(mpi)).map((comms, rank) => {
    const blocking = BLOCKING_SENDS.has(expectedBlockingCall(fixture, rank, np));
    // The blocking send comes from the call's arguments, where Open MPI's datatype handle gives
    // no size: its length is unknown (0 with lengthUnknown).
    return comms.map((c) => ({
      ...c,
      sends: blocking && c.sends && c.sends.length > 0 ? c.sends.map((o) => ({ ...o, length: 0 })) : null,
    }));
  });
}
