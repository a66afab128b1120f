// Synthetic hybrid MPI+OpenMP jobs for tests and the dashboard's demo: the four
// situations of the hybrid fixtures (fixtures/hybrid/), shaped the way LLVM's OpenMP runtime
// reports them through its OMPD library and the way Open MPI's DLL shows the queues:
// - `single-recv`: in each rank, thread 0 of a team of 4 is in MPI_Recv inside `omp single`
//   (state work_parallel) while threads 1-3 wait at the single's implicit barrier
//   (wait_barrier); every rank receives from the next one and nobody sends: an MPI deadlock.
// - `lock-deadlock`: the `deadlocked` ranks (default rank 0) have two threads each waiting for
//   the omp_lock_t the other holds (wait_lock, wait id = the lock's address) and no MPI call;
//   the other ranks wait in MPI_Recv from rank 0.
// - `nested`: a team of 2 whose thread 0 opened an inner team of 2 (level 2); inner thread 1
//   is in MPI_Recv, its inner teammate waits at the inner barrier, the outer thread 1 at the
//   outer one. Ring of receives as in single-recv.
// - `taskwait`: a team of 4; thread 0 created explicit tasks and waits in taskwait; thread 2
//   runs one of them (.omp_task_entry.), in MPI_Recv; threads 1 and 3 wait at the region's end.
//   As LLVM 16 does, the thread in taskwait stays in work_parallel: only its stack
//   (__kmpc_omp_taskwait) says it waits.
// Every rank also has an MPI progress thread the OpenMP runtime does not list.
import { assertUnreachable } from './assert.js';
import { publicMpiName } from './mpi/frames.js';
import type { Frame, JobSnapshot, OmpThread, RankSnapshot, ThreadStack } from './snapshot-spec.js';

export type OpenMpScenario = 'single-recv' | 'lock-deadlock' | 'nested' | 'taskwait';

export interface OpenMpJobOptions {
  /** Number of ranks, 2..1<<16. */
  readonly ranks: number;
  readonly scenario: OpenMpScenario;
  /** lock-deadlock: the ranks whose threads deadlock on locks (default [0]). */
  readonly deadlocked?: readonly number[];
}

const APP = '/home/user/hybrid/bin/hybrid';
const LIBOMP = '/opt/llvm-openmp/lib/libomp.so';
const LIBOMPD = '/opt/llvm-openmp/lib/libompd.so';
const LIBMPI = '/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.4';
const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const TAG = 7;

function moduleOf(fn: string): string {
  if (fn.startsWith('__kmp') || fn.startsWith('omp_')) return LIBOMP;
  if (publicMpiName(fn) !== null || fn.startsWith('ompi_') || fn.startsWith('opal_')) return LIBMPI;
  if (fn === 'main' || fn.startsWith('.omp')) return APP;
  return LIBC;
}

/** A stack from outermost to innermost function names (frames are stored innermost first). */
function stack(tid: number, main: boolean, path: readonly string[], ompState?: string): ThreadStack {
  const frames: Frame[] = [];
  for (let i = path.length - 1; i >= 0; i--) {
    const fn = path[i] ?? '??';
    const module = moduleOf(fn);
    frames.push({
      pc: `0x${((module === APP ? 0x401000 : 0x7f3a00000000) + i * 0x40 + fn.length).toString(16)}`,
      function: fn,
      module,
      file: module === APP ? 'hybrid.c' : null,
      line: module === APP ? 20 + i : null,
      inlined: false,
    });
  }
  return {
    tid,
    name: main ? 'hybrid' : null,
    main,
    frames,
    truncated: false,
    error: null,
    ...(ompState === undefined ? {} : { ompState }),
  };
}

const MAIN_OUTER = [
  '_start',
  '__libc_start_main',
  'main',
  '__kmpc_fork_call',
  '__kmp_fork_call',
  '__kmp_invoke_microtask',
  '.omp_outlined.',
];
const WORKER_OUTER = [
  'clone3',
  'start_thread',
  '__kmp_launch_worker',
  '__kmp_launch_thread',
  '__kmp_invoke_microtask',
  '.omp_outlined.',
];
const IN_RECV = ['MPI_Recv', 'ompi_request_default_wait', 'opal_progress'];
const AT_BARRIER = ['__kmpc_barrier', '__kmp_barrier', '__kmp_wait_template'];
const AT_LOCK = ['omp_set_lock', '__kmp_acquire_queuing_lock', '__kmp_wait_4'];
const IN_TASKWAIT = ['__kmpc_omp_taskwait', '__kmp_task_wait', '__kmp_execute_tasks_64'];
const AS_TASK = ['__kmp_execute_tasks_64', '__kmp_invoke_task', '.omp_task_entry.'];

function ompThread(
  tid: number,
  threadNum: number,
  state: string,
  parallel: OmpThread['parallel'],
  fn: string,
  kind: NonNullable<OmpThread['task']>['kind'],
  waitId: string | null = null,
): OmpThread {
  return {
    tid,
    threadNum,
    state: `ompt_state_${state}`,
    waitId,
    parallel,
    task: { function: fn, entry: fn === '.omp_task_entry.' ? '0x401a30' : '0x401900', kind },
  };
}

interface RankPlan {
  readonly threads: ThreadStack[];
  readonly omp: OmpThread[];
  /** The thread in MPI_Recv from `from`, or null (no MPI call). */
  readonly recv: { readonly tid: number; readonly from: number } | null;
}

function plan(r: number, n: number, pid: number, o: OpenMpJobOptions): RankPlan {
  const next = (r + 1) % n;
  const team = (size: number, level: number) => ({ teamSize: size, level, activeLevel: level });
  const entries: { t: OmpThread; path: string[]; main: boolean }[] = [];
  const add = (t: OmpThread, path: string[]) => entries.push({ t, path, main: t.tid === pid });
  let recv: RankPlan['recv'] = null;
  switch (o.scenario) {
    case 'single-recv': {
      add(ompThread(pid, 0, 'work_parallel', team(4, 1), '.omp_outlined.', 'implicit'), [
        ...MAIN_OUTER,
        ...IN_RECV,
      ]);
      for (let k = 1; k < 4; k++) {
        add(ompThread(pid + k, k, 'wait_barrier', team(4, 1), '.omp_outlined.', 'implicit'), [
          ...WORKER_OUTER,
          ...AT_BARRIER,
        ]);
      }
      recv = { tid: pid, from: next };
      break;
    }
    case 'lock-deadlock': {
      if ((o.deadlocked ?? [0]).includes(r)) {
        const lock = (i: number) => `0x${(0x55d0c0a04000 + r * 0x1000 + i * 0x20).toString(16)}`;
        add(ompThread(pid, 0, 'wait_lock', team(2, 1), '.omp_outlined.', 'implicit', lock(1)), [
          ...MAIN_OUTER,
          ...AT_LOCK,
        ]);
        add(ompThread(pid + 1, 1, 'wait_lock', team(2, 1), '.omp_outlined.', 'implicit', lock(0)), [
          ...WORKER_OUTER,
          ...AT_LOCK,
        ]);
      } else {
        // Outside any parallel region: the initial thread alone, in MPI_Recv from rank 0.
        add(ompThread(pid, 0, 'work_serial', team(1, 0), 'main', 'initial'), [
          '_start',
          '__libc_start_main',
          'main',
          ...IN_RECV,
        ]);
        recv = { tid: pid, from: 0 };
      }
      break;
    }
    case 'nested': {
      const inner = [
        ...MAIN_OUTER,
        '__kmpc_fork_call',
        '__kmp_fork_call',
        '__kmp_invoke_microtask',
        '.omp_outlined..1',
      ];
      add(ompThread(pid, 0, 'wait_barrier_implicit_parallel', team(2, 2), '.omp_outlined..1', 'implicit'), [
        ...inner,
        ...AT_BARRIER,
      ]);
      add(ompThread(pid + 1, 1, 'wait_barrier_implicit_parallel', team(2, 1), '.omp_outlined.', 'implicit'), [
        ...WORKER_OUTER,
        ...AT_BARRIER,
      ]);
      add(ompThread(pid + 2, 1, 'work_parallel', team(2, 2), '.omp_outlined..1', 'implicit'), [
        ...WORKER_OUTER.slice(0, -1),
        '.omp_outlined..1',
        ...IN_RECV,
      ]);
      recv = { tid: pid + 2, from: next };
      break;
    }
    case 'taskwait': {
      add(ompThread(pid, 0, 'work_parallel', team(4, 1), '.omp_outlined.', 'implicit'), [
        ...MAIN_OUTER,
        ...IN_TASKWAIT,
      ]);
      add(ompThread(pid + 1, 1, 'wait_barrier_implicit_parallel', team(4, 1), '.omp_outlined.', 'implicit'), [
        ...WORKER_OUTER,
        ...AT_BARRIER,
      ]);
      add(ompThread(pid + 2, 2, 'work_parallel', team(4, 1), '.omp_task_entry.', 'explicit'), [
        ...WORKER_OUTER,
        ...AT_BARRIER,
        ...AS_TASK,
        ...IN_RECV,
      ]);
      add(ompThread(pid + 3, 3, 'wait_barrier_implicit_parallel', team(4, 1), '.omp_outlined.', 'implicit'), [
        ...WORKER_OUTER,
        ...AT_BARRIER,
      ]);
      recv = { tid: pid + 2, from: next };
      break;
    }
    default:
      assertUnreachable(o.scenario);
  }
  const threads = entries.map((e) => stack(e.t.tid, e.main, e.path, e.t.state));
  // Open MPI's progress thread: no OpenMP thread, no ompState.
  threads.push(
    stack(pid + 9, false, [
      'clone3',
      'start_thread',
      'progress_engine',
      'opal_libevent2022_event_base_loop',
      'epoll_wait',
    ]),
  );
  return {
    threads: threads.sort((a, b) => a.tid - b.tid),
    omp: entries.map((e) => e.t).sort((a, b) => a.tid - b.tid),
    recv,
  };
}

/** One of the hybrid situations on `ranks` ranks (Open MPI style: send queues and global ranks known). */
export function syntheticOpenMpJob(o: OpenMpJobOptions): JobSnapshot {
  const n = Math.max(2, Math.min(o.ranks, 1 << 16));
  const ranks: RankSnapshot[] = [];
  for (let r = 0; r < n; r++) {
    const pid = 20000 + r * 16;
    const p = plan(r, n, pid, o);
    const recv = p.recv;
    ranks.push({
      rank: r,
      pid,
      host: `node${Math.floor(r / 8)}`,
      state: { kind: 'ok' },
      pausedMicros: 900 + r,
      communicators: [
        {
          id: '0',
          name: 'MPI_COMM_WORLD',
          size: n,
          localRank: r,
          world: true,
          group: null,
          sends: [],
          receives:
            recv === null
              ? []
              : [
                  {
                    status: 'pending',
                    peer: { local: recv.from, global: recv.from },
                    tag: TAG,
                    length: 4,
                    actual: null,
                    extraText: [],
                    buffer: `0x${(0x7ffc1000 + r * 16).toString(16)}`,
                    systemBuffer: false,
                  },
                ],
          unexpected: null,
          unavailable: {
            unexpected: {
              code: 'MQD_E_QUEUE_UNSUPPORTED',
              message: "Open MPI's DLL does not show unexpected messages",
            },
          },
        },
      ],
      threads: p.threads,
      mpiCall:
        recv === null
          ? null
          : {
              function: 'MPI_Recv',
              tid: recv.tid,
              args: { peer: { local: recv.from, global: recv.from }, tag: TAG, communicator: '0', count: 1 },
            },
      openmp: {
        runtime: LIBOMP,
        ompd: LIBOMPD,
        version: 'LLVM OpenMP 16.0.6',
        threads: p.omp,
      },
    });
  }
  return {
    schemaVersion: 1,
    takenAt: '2026-01-01T00:00:00.000Z',
    durationMicros: 2500,
    mpi: {
      library: 'openmpi',
      dll: '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so',
      lengthUnit: 'bytes',
    },
    ranks,
  };
}
