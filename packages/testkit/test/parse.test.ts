// The parsers and the wait loop of the testkit, on fixed inputs (no MPI needed).
import {
  done,
  expectedBlockingCall,
  expectedQueues,
  failed,
  frameMatcher,
  HANG_FIXTURES,
  parseEuStack,
  parseMqsDump,
  parseReadyLines,
  parseStat,
  pending,
  WaitFailedError,
  WaitTimeoutError,
  waitFor,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';

describe('parseStat', () => {
  it('reads fields after a comm that holds spaces and parentheses', () => {
    const line = '4242 (a (b) c) S 17 4242 4242 0 -1 4194304 1 2 3 4 5 6 7 8 20 0 3 0 987654321 1000 10';
    expect(parseStat(line)).toEqual({
      pid: 4242,
      comm: 'a (b) c',
      state: 'S',
      ppid: 17,
      pgid: 4242,
      sid: 4242,
      starttime: 987654321n,
    });
  });
  it('rejects a truncated line', () => {
    expect(parseStat('12 (x) S 1 2')).toBeUndefined();
  });
});

describe('parseEuStack', () => {
  const out = [
    'PID 100 - process',
    'TID 100:',
    '#0  0x00007f0000000001 __sched_yield',
    '#1  0x00007f0000000002 mca_pml_ob1_send',
    '#2  0x00007f0000000003 PMPI_Ssend',
    '#3  0x00007f0000000004',
    'TID 101:',
    '#0  0x00007f0000000005 epoll_wait',
  ].join('\n');
  it('keeps only the main thread, with ?? for unnamed frames', () => {
    expect(parseEuStack(out, 100)).toEqual(['__sched_yield', 'mca_pml_ob1_send', 'PMPI_Ssend', '??']);
    expect(parseEuStack(out, 101)).toEqual(['epoll_wait']);
  });
  it('keeps demangled C++ names whole, and every thread with no pid', () => {
    const cpp = [
      'TID 7:',
      '#0  0x00007f0000000001 PMPI_Recv',
      '#1  0x0000555500000002 int mqd::ring::recv_from<int>(int, int)',
      'TID 8:',
      '#0  0x00007f0000000005 poll',
    ].join('\n');
    expect(parseEuStack(cpp, 7)).toEqual(['PMPI_Recv', 'int mqd::ring::recv_from<int>(int, int)']);
    expect(parseEuStack(cpp, null)).toEqual(['PMPI_Recv', 'int mqd::ring::recv_from<int>(int, int)', 'poll']);
  });
});

describe('frameMatcher', () => {
  it('matches the MPI and PMPI entry points and nothing longer', () => {
    const re = frameMatcher('MPI_Send');
    expect(['MPI_Send', 'PMPI_Send', 'MPI_Send@plt'].map((f) => re.test(f))).toEqual([true, true, true]);
    expect(['MPI_Sendrecv', 'MPI_Send_init', 'mca_pml_ob1_send', 'XMPI_Send'].some((f) => re.test(f))).toBe(
      false,
    );
    expect(frameMatcher('PMPI_Recv').test('MPI_Recv')).toBe(true);
    expect(frameMatcher('MPIR_Wait_impl').test('PMPIR_Wait_impl')).toBe(false);
    // MPICH 4's binding layer, left alone on the stack when PMPI_X tail-calls it.
    expect(frameMatcher('MPI_Waitall').test('internal_Waitall')).toBe(true);
    expect(
      ['internal_Waitallx', 'MPIR_Waitall', 'internal_Wait'].some((f) => frameMatcher('MPI_Waitall').test(f)),
    ).toBe(false);
  });
});

describe('parseReadyLines', () => {
  it('reads whole lines only', () => {
    const text =
      'noise\nMQD_FIXTURE_READY rank=2 pid=77 call=MPI_Wait\nxMQD_FIXTURE_READY rank=3 pid=78 call=MPI_Wait\n';
    expect(parseReadyLines(text)).toEqual([{ rank: 2, pid: 77, call: 'MPI_Wait' }]);
  });
});

describe('parseMqsDump', () => {
  it('reads communicators, operations and queues without information', () => {
    const text = [
      'dll "x" compat=2 width=8',
      'pid 10',
      'comm id=0 name="MPI_COMM_WORLD" rank=0 size=4',
      'op send status=pending local=1 global=1 tag_wild=0 tag=42 len=4 sysbuf=0 actual_local=1 actual_global=1 actual_tag=42 actual_len=4 extra0="Send: 0x1" extra1="Data: 4 instances"',
      'noinfo unexp rc=1',
      'pid 11',
      'error process_has_queues 3 "no queues "',
    ].join('\n');
    const procs = parseMqsDump(text);
    expect(procs).toHaveLength(2);
    expect(procs[0]?.comms[0]).toMatchObject({
      name: 'MPI_COMM_WORLD',
      localRank: 0,
      size: 4,
      receives: [],
      unexpected: null,
    });
    expect(procs[0]?.comms[0]?.sends?.[0]).toMatchObject({
      desiredLocal: 1,
      desiredTag: 42,
      extraText: ['Send: 0x1', 'Data: 4 instances'],
    });
    expect(procs[1]?.error).toContain('process_has_queues');
  });
});

describe('waitFor', () => {
  it('returns the value once the condition holds', async () => {
    let n = 0;
    await expect(
      waitFor(() => (++n >= 3 ? done(n) : pending()), { timeoutMs: 5_000, what: 'n' }),
    ).resolves.toBe(3);
  });
  it('stops at once on failure and at the deadline otherwise', async () => {
    await expect(waitFor(() => failed('gone'), { timeoutMs: 5_000, what: 'x' })).rejects.toBeInstanceOf(
      WaitFailedError,
    );
    await expect(waitFor(() => pending('still 1 of 4'), { timeoutMs: 30, what: 'y' })).rejects.toThrow(
      new WaitTimeoutError('y', 30, 'still 1 of 4').message,
    );
  });
});

describe('expectedQueues', () => {
  it('has one entry per rank and world first, for every hang fixture and MPI', () => {
    for (const fixture of HANG_FIXTURES) {
      for (const mpi of ['openmpi', 'mpich'] as const) {
        const q = expectedQueues(mpi, fixture, 4);
        expect(q).toHaveLength(4);
        expect(q.every((comms) => comms[0]?.name === 'MPI_COMM_WORLD')).toBe(true);
        expect(q.every((comms) => (mpi === 'openmpi') === comms.every((c) => c.unexpected === null))).toBe(
          true,
        );
      }
    }
    expect(expectedBlockingCall('collective_mismatch', 3, 4)).toBe('MPI_Recv');
    expect(() => expectedQueues('mpich', 'ring_ssend', 1)).toThrow(RangeError);
  });
});
