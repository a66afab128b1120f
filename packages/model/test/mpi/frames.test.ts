import {
  type Frame,
  findMpiCall,
  isMpiFrame,
  isMpiFunction,
  isRuntimeFrame,
  mpiCallOfFrame,
  outermostMpiFrame,
  publicMpiName,
  type ThreadStack,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const LIBMPICH = '/usr/lib/x86_64-linux-gnu/libmpich.so.12.4.2';
const APP = '/home/user/ring/ring';

function frame(fn: string | null, module: string | null): Frame {
  return { pc: '0x1000', function: fn, module, file: null, line: null, inlined: false };
}

describe('MPI frame recognition', () => {
  it('folds PMPI_ and strips a demangled argument list', () => {
    expect(publicMpiName('PMPI_Ssend')).toBe('MPI_Ssend');
    expect(publicMpiName('MPI_Recv(void*, int)')).toBe('MPI_Recv');
    expect(publicMpiName('MPI_recv_helper')).toBeNull();
    expect(publicMpiName('MPIR_Wait_impl')).toBeNull();
    expect(publicMpiName(null)).toBeNull();
  });

  it("takes MPICH 4's internal_X for MPI_X in the MPI library, or when only names are known", () => {
    expect(mpiCallOfFrame({ function: 'internal_Waitall', module: LIBMPICH })).toBe('MPI_Waitall');
    expect(mpiCallOfFrame({ function: 'internal_Waitall', module: 'libmpich.so.12' })).toBe('MPI_Waitall');
    expect(isMpiFunction('internal_Barrier')).toBe(true);
    // A user's function of the same shape is not MPI's.
    expect(mpiCallOfFrame({ function: 'internal_Waitall', module: APP })).toBeNull();
    expect(isMpiFrame({ function: 'internal_helper', module: LIBMPICH })).toBe(false);
  });

  it('finds the outermost MPI frame whatever order the frames are stored in', () => {
    const innermostFirst = [
      frame('MPIDI_progress_test', LIBMPICH),
      frame('internal_Barrier', LIBMPICH),
      frame('PMPI_Finalize', LIBMPICH),
      frame('main', APP),
    ];
    expect(outermostMpiFrame(innermostFirst, 'innermost-first')).toEqual({
      index: 2,
      function: 'MPI_Finalize',
    });
    const outermostFirst = [...innermostFirst].reverse();
    expect(outermostMpiFrame(outermostFirst, 'outermost-first')).toEqual({
      index: 1,
      function: 'MPI_Finalize',
    });
  });

  it('finds the call on the main thread first, through a tail-called internal_X frame', () => {
    const threads: ThreadStack[] = [
      {
        tid: 11,
        name: null,
        error: null,
        truncated: false,
        main: false,
        frames: [frame('MPI_Recv', LIBMPICH)],
      },
      {
        tid: 10,
        name: null,
        error: null,
        truncated: false,
        main: true,
        frames: [
          frame('MPIDI_progress_test', LIBMPICH),
          frame('internal_Waitall', LIBMPICH),
          frame('main', APP),
        ],
      },
    ];
    expect(findMpiCall(threads)).toEqual({ function: 'MPI_Waitall', tid: 10, frameIndex: 1 });
  });

  it('counts the MPI library, its runtime and libc as runtime frames, not the user program', () => {
    expect(isRuntimeFrame(frame('internal_Waitall', null))).toBe(true);
    expect(isRuntimeFrame(frame('compute', '/usr/lib/libucp.so.0'))).toBe(true);
    expect(isRuntimeFrame(frame('compute', APP))).toBe(false);
    // A rank computing inside the math library is at the line of its own code that called it.
    expect(isRuntimeFrame(frame('__ldexp', '/lib/x86_64-linux-gnu/libm.so.6'))).toBe(true);
    expect(isRuntimeFrame(frame('compute', '/opt/mpi/lib/libmpi.so.40'))).toBe(true);
    expect(isRuntimeFrame(frame('compute', '/home/u/libmine.so'))).toBe(false);
  });
});
