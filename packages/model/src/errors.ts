// Every expected failure has a code and says what to do (fastify lib/errors.js style).
// `detail` says what happened; `hint` says what the user should do about it. The message a
// user sees is `CODE: detail: hint`.

export const ERROR_HINTS = {
  // --- input / usage
  MQD_E_USAGE: 'see `mqd --help` for the accepted arguments',
  MQD_E_BAD_INPUT: 'fix the request: the message names the field that is wrong',
  // --- processes
  MQD_E_NO_SUCH_PID: 'check the pid with `ps -p PID`; the process may have exited',
  MQD_E_PID_EXITED:
    'the process exited while it was being read; take the snapshot again if the job is still running',
  MQD_E_ZOMBIE:
    'the process has exited and is a zombie (its parent has not reaped it): there is nothing left to read; look at its parent (the launcher) or take the snapshot again once the job is running',
  MQD_E_PTRACE_DENIED:
    'run as the job owner (or root); with Yama ptrace_scope>=1 also grant CAP_SYS_PTRACE or set kernel.yama.ptrace_scope=0',
  MQD_E_STOP_FAILED:
    'the process could not be stopped for a consistent read: check that no other debugger is attached (TracerPid in /proc/PID/status); a thread in an uninterruptible wait (state D: a stalled file system, a vfork() child that neither execs nor exits) cannot stop until it leaves it: the message names the thread and its wait; take the snapshot again once it has left it',
  MQD_E_THREAD_LIMIT:
    'the rank has more threads than a snapshot lists: the first ones (the main thread, then by thread id) have their stacks, the rest are only counted; read the others with a debugger (gdb -p PID, thread apply all bt) if they matter',
  MQD_E_FOREIGN_PROCESS:
    'this process belongs to another user than the job owner; it was not stopped or read (an admin may read it explicitly)',
  MQD_E_ROOT_PROCESS:
    'this process runs as root; MQD reads root processes only when an admin asks for it explicitly',
  MQD_E_PID_REUSED:
    'this pid now belongs to another process than the one located (it was reused); attach the job again',
  MQD_E_PRIVDROP:
    "the reader could not take the process owner's identity (setgroups/setgid/setuid/no_new_privs); run the agent as root, or as the job owner",
  MQD_E_NOT_MPI:
    'this process has no MPI library mapped; pass the pids of the MPI ranks, or attach to the starter (mpirun/mpiexec)',
  // --- the DLL
  MQD_E_NO_DLL_NAME:
    'the MPI library does not name its debugger DLL (MPIR_dll_name); pass --dll PATH (Open MPI: <libdir>/openmpi/libompi_dbg_msgq.so, MPICH: <libdir>/libtvmpich.so, built with --enable-debuginfo)',
  MQD_E_DLL_NOT_FOUND:
    "the DLL file does not exist; pass --dll with the path of the MPI library's message-queue DLL",
  MQD_E_DLL_NOT_ELF: "the file is not an ELF shared object; pass the MPI library's message-queue DLL",
  MQD_E_DLL_WRONG_ARCH:
    'the DLL is built for another architecture or word size than this debugger; use the DLL of the same MPI build as the job',
  MQD_E_DLL_LOAD: 'dlopen failed; check that the DLL and its dependencies are readable',
  MQD_E_DLL_INCOMPATIBLE:
    'the DLL implements another MQD compatibility level than 2 or lacks a required entry point; use the DLL of the MPI build the job runs',
  MQD_E_DLL_CRASHED:
    'the DLL crashed on this process; this snapshot is lost but the agent restarted the DLL host, so take another; report the MPI version if it repeats',
  MQD_E_READER_KILLED:
    "the reader process was killed from outside (a signal MQD did not send: SIGKILL from the OOM killer or an admin); this snapshot is lost, take it again (if it repeats, check the node's memory and `dmesg`)",
  MQD_E_DLL_TIMEOUT:
    'the DLL did not answer in time (likely looping on corrupt queues); this snapshot is lost, take another',
  MQD_E_DLL_POLICY:
    "the site's DLL policy refused this DLL (see --dll-policy): use an MPI library installed by the administrators",
  MQD_E_DLL_ERROR: "the MPI library's DLL reported an error; the message is its own",
  MQD_E_READ_BUDGET:
    'the DLL read more target memory than allowed (a corrupt or cyclic list); raise MQD_READ_BUDGET_BYTES if the job is really that large',
  // --- debug info
  MQD_E_NO_DEBUG_INFO:
    'the MPI library has no debug info for the types its DLL needs; install its debug package (e.g. libopenmpi3-dbgsym) or use an MPI built with -g',
  MQD_E_NO_STACKS:
    'the call stacks could not be unwound (the queues were read); install debug info for the program and its libraries, or check the message',
  MQD_E_QUEUE_UNSUPPORTED:
    "this MPI library does not record this queue; look at the other side (the peer's sends or receives) for the same messages",
  MQD_E_NO_QUEUES:
    'this process has no message queues the DLL can read (MPI not initialised yet, or a library without queue debugging support)',
  // --- OpenMP (OMPD)
  MQD_E_OMPD_DISABLED:
    "the rank's OpenMP runtime keeps no debugging state: run the job with OMP_DEBUG=enabled in its environment (LLVM's libomp keeps OMPD state only then) and take another snapshot",
  MQD_E_OMPD_LOAD:
    "the OpenMP runtime's OMPD library (libompd.so, named by the runtime) could not be found or loaded; install the libompd.so of the same OpenMP build beside its libomp.so, readable by the job owner",
  MQD_E_OMPD_FAILED:
    "the OMPD library returned an error (the ompd_rc_t is in the message) reading the OpenMP threads; the queues are unaffected; report the OpenMP runtime's version if it repeats",
  MQD_E_OMPD_CRASHED:
    'the OMPD library crashed or hung in the reader; that read was lost and the reader no longer loads this library, so later snapshots show the queues without OpenMP threads: fix or replace the library, then restart the agent',
  // --- Python (CPython frames)
  MQD_E_PYTHON_UNSUPPORTED:
    "the rank runs a CPython whose frame layout the reader does not know (the message names the version): its C stack is shown without Python frames; run the job with CPython 3.11, or read the Python frames with gdb's py-bt",
  MQD_E_PYTHON_READ:
    "the rank's CPython frames could not be read in the stop (the message says where the walk failed): the C stack and queues are unaffected; take another snapshot, and report the CPython version if it repeats",
  // --- UCX (Open MPI's ucx PML)
  MQD_E_UCX_UNSUPPORTED:
    "this rank's queues live in UCX (Open MPI's ucx PML), whose layout the reader takes from UCX's and Open MPI's debug info, and a type or field it needs is missing (the message names it): install the debug symbols of that UCX and Open MPI (or build them with -g), or rerun with --mca pml ob1 to let the MPI library's DLL show the queues",
  MQD_E_UCX_READ:
    "this rank's UCX queues could not be read in the stop (the message says where): the stacks are unaffected; take another snapshot, and report the UCX version if it repeats",
  MQD_E_UCX_TAG_OFFLOAD:
    'UCX hardware tag matching is on for this rank (UCX_RC_MLX5_TM_ENABLE or UCX_DC_MLX5_TM_ENABLE): posted receives handed to the network card are not in the software queue shown; rerun with tag matching off to see every receive',
  MQD_E_UCX_RANK_RANGE:
    "the communicator has 2^20 ranks or more, which do not fit Open MPI's UCX tag (the sender's rank is cut): its UCX queue entries are not shown rather than shown with a wrong rank",
  MQD_E_UCX_SENDS:
    "UCX keeps no list of a rank's sends: only a blocking send the rank is in (read from its MPI call) is shown; look at the receivers' unexpected messages for sends that already left",
  // --- MPIR / jobs
  MQD_E_NOT_STARTER:
    'this pid is not an MPI starter with MPIR symbols; pass the pid of mpirun/mpiexec, or the rank pids with --pid',
  MQD_E_JOB_ENDED: 'the job has already ended; there is nothing left to snapshot',
  MQD_E_EMPTY_PROCTABLE:
    'the starter has not filled its process table yet; wait until the job has started, or use the process-tree fallback',
  MQD_E_NO_RANKS: 'no MPI rank was found under this starter; check the pid, or pass the rank pids directly',
  MQD_E_PMIX:
    "the launcher's PMIx server did not answer the tool's query; check that the job is still running and that you run mqd as the job's owner (or root), or use --method process-tree",
  // --- Slurm
  MQD_E_NO_SLURM:
    "Slurm's commands did not answer; check that scontrol works here (and SLURM_CONF if your site sets it)",
  MQD_E_SLURM_JOB:
    'this Slurm job is unknown or not running yet; check its id and state with `squeue -j JOBID`',
  // --- core files
  MQD_E_CORE_INVALID:
    'this file is not a complete x86_64 ELF core of a Linux process; pass the core the kernel, gcore or `mqd capture` wrote',
  MQD_E_CORE_TRUNCATED:
    'the core file ends before the data its headers describe (the disk filled or a size limit cut it); raise `ulimit -c` and capture again',
  MQD_E_CORE_MISSING_PAGES:
    'memory the read needs is neither in the core nor in a file it maps; capture with `mqd capture`, or set /proc/PID/coredump_filter to 0x37 before the crash',
  MQD_E_CORE_BUILD_ID:
    'a library or executable changed since the crash (its build-id differs from the core): read the core where the job ran, or pass the original files with --exe / --sysroot',
  MQD_E_CORE_DIR_FORBIDDEN:
    'core files are opened only from directories an admin allows: put them in one, or ask an admin to add it with `mqd serve --core-dir DIR` (or MQD_CORE_DIRS=DIR:DIR)',
  MQD_E_CORE_NO_RANK:
    'no MPI rank number for this core: pass --rank N after --core, or name the files rank-N.core',
  MQD_E_CAPTURE:
    'the capture could not write a core for this rank; check free space and that the directory is writable by the job owner',
  MQD_E_CORE_MANIFEST:
    "a capture's manifest.json must be the regular file `mqd capture` wrote (JSON, at most 1 MiB, not a link or a FIFO): capture again, or delete manifest.json to read the cores by their names (rank-N.core)",
  MQD_E_CAPTURE_DIR:
    "`mqd capture --out DIR` writes into a directory the job owner owns: name one that does not exist yet (mqd creates it for the owner) or the owner's own plain directory (not a symlink, not another user's or root's) that holds no capture yet",
  // --- server
  MQD_E_UNAUTHENTICATED: "log in with the token printed by `mqd serve` (or your site's proxy login)",
  MQD_E_FORBIDDEN: 'this job belongs to another user; ask its owner for a share link, or an admin for access',
  MQD_E_NOT_FOUND: 'check the id; it may have been removed by retention',
  MQD_E_RATE_LIMITED: 'too many expensive requests; wait a moment and retry',
  MQD_E_AGENT_MISSING: 'no agent is connected for this host; start `mqd agent` there',
  MQD_E_AGENT_SILENT:
    "that node's agent stopped answering in the middle of the read (its process is stopped or starved of CPU): check `mqd agent` there (ps -o stat,pcpu -p PID; a T state means SIGSTOP: kill -CONT it), then take the snapshot again; the other nodes' ranks were read",
  MQD_E_AGENT_CONFLICT:
    'an agent for this host is already connected; stop the other agent, or give this one another --host',
  MQD_E_CLUSTER_SECRET:
    'the instances on one PostgreSQL store seal their messages to each other with a secret only they hold: give every instance the same file with --cluster-secret-file FILE (MQD_CLUSTER_SECRET_FILE), at least 32 random characters (`openssl rand -base64 48 > FILE`), mode 600, owned by the user running mqd serve',
  MQD_E_BAD_ORIGIN: 'the request came from a page of another origin; open the dashboard from its own URL',
  MQD_E_TOKEN_EXPIRED: 'this login token has expired or was revoked; ask an admin for a new one',
  MQD_E_RESERVED_NAME:
    "this user name is reserved for MQD itself (admin: the built-in admin, auto: the auto-snapshotter, watch: the hang watch, system, mqd): choose another name (the built-in admin's token is part of the `mqd serve` configuration)",
  MQD_E_SESSION_CONFLICT:
    'this browser is already signed in as another user; log out first, or confirm the switch in the dashboard (it asks before replacing a session)',
  MQD_E_IDEMPOTENCY_CONFLICT:
    'this Idempotency-Key was already used for another request; send a fresh key for every new snapshot and reuse a key only to retry the same one',
  MQD_E_STORE_READONLY:
    'the store cannot write (disk full or read-only); free space in the data directory, then retry: reading still works',
  MQD_E_STORE_CORRUPT:
    'the database file is corrupt; stop the server, move mqd.sqlite aside (or restore a backup) and start again: a new store is created',
  MQD_E_STORE_UNAVAILABLE:
    'the PostgreSQL store cannot be reached: check that the database at --store is up; requests fail with 503 meanwhile and resume by themselves',
  MQD_E_TOO_LARGE: 'the data exceeds the configured byte budget; raise the budget or read fewer ranks',
  MQD_E_INSECURE:
    'refusing plain HTTP on a non-loopback address; pass --tls-cert and --tls-key (or --allow-insecure-http behind a TLS proxy)',
  // --- values read across ranks (mqd snapshot --eval)
  MQD_E_EVAL_SYNTAX:
    'fix the expression at the column named: names, members (. ->), elements [i], slices [a:b], * and casts to named types are read; no calls, operators or assignments',
  MQD_E_EVAL_UNKNOWN_NAME:
    'no variable of that name is visible in the chosen frame, its compilation unit or the globals of any module; check the spelling, or choose another frame with --frame FUNC',
  MQD_E_EVAL_OPTIMIZED_OUT:
    'the compiler kept no location for this variable at this point of the program (optimized out); rebuild with -O0 or -Og, or read a variable it keeps',
  MQD_E_EVAL_MEMORY:
    'the address the expression reaches cannot be read on this rank (unmapped, or past the read budget); check the pointer',
  MQD_E_EVAL_TYPE:
    'the expression does not fit the types DWARF gives (a member of a non-struct, an index of a non-array, an unknown type name); check it against the declaration',
  MQD_E_EVAL_FRAME:
    'no thread of this rank has a frame of that function (or a user frame outside the MPI and C libraries); check --frame against the stacks (mqd snapshot --stacks)',
  MQD_E_INTERNAL: 'this is a bug in MQD Dashboard; please report it with the message',
  MQD_E_PMIX_LAUNCH:
    "launching under the tool through PMIx (Open MPI 5's prterun, ranks held in PMIx_Init) failed and the job was killed; check that the program exists and is an MPI program of this Open MPI (its ranks must call MPI_Init), give a longer --timeout on a busy machine, or start the job yourself and use `mqd snapshot --attach PID`",
  MQD_E_OMPD_NO_SYMBOLS:
    "the rank's OpenMP runtime is stripped and its separate debug file (which holds the symbols OMPD needs: ompd_dll_locations, __kmp_gtid) was not found: install the runtime's debug package (Debian: the libomp5-NN-dbgsym of its version) or copy its debug file to one of the places the message names (MQD_DEBUGINFO_PATH sets the debug directories), then take another snapshot",
} as const;

export type ErrorCode = keyof typeof ERROR_HINTS;

export interface MqdError {
  readonly code: ErrorCode;
  /** `CODE: what happened: what to do`. */
  readonly message: string;
}

export function isErrorCode(s: string): s is ErrorCode {
  return Object.hasOwn(ERROR_HINTS, s);
}

export function mqdError(code: ErrorCode, detail: string): MqdError {
  return { code, message: `${code}: ${detail}: ${ERROR_HINTS[code]}` };
}

/**
 * A coded error as one line with its code once: `CODE: what happened: what to do`. Messages made
 * by mqdError already begin with their code; others (a DLL's own words) get it in front.
 */
export function codedText(e: { readonly code: string; readonly message: string }): string {
  return e.message === e.code || e.message.startsWith(`${e.code}:`) ? e.message : `${e.code}: ${e.message}`;
}

/** The message after its code, for a view that shows the code apart (in bold, in a column). */
export function textAfterCode(e: { readonly code: string; readonly message: string }): string {
  const t = codedText(e);
  return t.slice(Math.min(t.length, e.code.length + 1)).trimStart();
}

/** An MqdError as an exception, for the few places where a failure must unwind a stack. */
export class MqdException extends Error {
  readonly code: ErrorCode;
  constructor(readonly error: MqdError) {
    super(error.message);
    this.code = error.code;
    this.name = 'MqdException';
  }
}
