// The snapshot format: the one spec for what a message-queue snapshot of an MPI job is.
// It is produced by `mqd snapshot --json`, stored by the aggregator, drawn by the dashboard
// and read by the analysis, so every field is documented with its units and invariants here.
// TypeBox gives both the TypeScript types and the JSON Schema from one definition.
//
// Invariants (checked by validateSnapshot beyond the schema where noted):
// - Ranks and tags are signed 32-bit values as MPI defines them. A wildcard is `null`, never
//   4294967295 (Open MPI's ANY_SOURCE widened without sign extension) or 65534 (MPICH's
//   ANY_SOURCE read as 2 bytes).
// - A queue the MPI library cannot show is `null` with its reason in `unavailable`; an empty
//   array always means "the library looked and found nothing".
// - Queues are in the library's matching order (index 0 is matched first).
// - MPI_COMM_NULL is never listed.
// - `peer.global` is a rank in MPI_COMM_WORLD, derived from the group when the library leaves
//   it unknown but it can be known; null when it cannot.
// - MPI_COMM_WORLD's group is never listed (null): it is the identity by definition.
import { type Static, Type } from '@sinclair/typebox';

export const SNAPSHOT_SCHEMA_VERSION = 1 as const;

const Int32 = Type.Integer({ minimum: -2147483648, maximum: 2147483647 });
const NonNegInt = Type.Integer({ minimum: 0 });
const ShortText = (maxLength: number) => Type.String({ maxLength });

// Text limits, in UTF-16 code units (String.length, what the validator counts). Exported so
// that every producer and guard (the agent protocol, the reader) keeps to the same numbers.
/** An error code (CodedError.code, RankState.code). */
export const MAX_CODE_CHARS = 64;
/** An error message (CodedError.message, RankState.message). */
export const MAX_MESSAGE_CHARS = 4096;
/** A path on the reading host (a module, a source file, a DLL, a core, an executable). */
export const MAX_PATH_CHARS = 4096;
/** A node name (RankSnapshot.host). */
export const MAX_HOST_CHARS = 255;
/** One entry of RankSnapshot.dll.missingFields ("type.field"). */
export const MAX_MISSING_FIELD_CHARS = 512;
/** One entry of RankSnapshot.dll.renamedFields ("type.old -> type.new.path"). */
export const MAX_RENAMED_FIELD_CHARS = 1040;
/** Entries of each of RankSnapshot.dll.missingFields and renamedFields. */
export const MAX_DLL_FIELDS = 64;
/** A DLL's mqs_version_string (RankSnapshot.dll.version). */
export const MAX_VERSION_CHARS = 1024;

/** The mark a text cut to its limit ends in (clipText). */
export const CLIP_MARK = '\u2026';

/**
 * `s` cut to at most `max` UTF-16 units, ending in CLIP_MARK when it was cut, so a producer
 * keeps a user-controlled text (a command line, a name) within the format's limit visibly
 * shortened instead of having the whole message refused. A cut never splits a surrogate pair.
 */
export function clipText(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max < 1) return '';
  let end = max - CLIP_MARK.length;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate without its pair
  return `${s.slice(0, Math.max(0, end))}${CLIP_MARK}`;
}

export const QueueKind = Type.Union([
  Type.Literal('sends'),
  Type.Literal('receives'),
  Type.Literal('unexpected'),
]);
export type QueueKind = Static<typeof QueueKind>;
export const QUEUE_KINDS: readonly QueueKind[] = ['sends', 'receives', 'unexpected'];

export const CodedError = Type.Object(
  {
    code: ShortText(MAX_CODE_CHARS),
    message: ShortText(MAX_MESSAGE_CHARS),
  },
  { additionalProperties: false },
);
export type CodedError = Static<typeof CodedError>;

/** A peer of an operation: its rank in the communicator and in MPI_COMM_WORLD. */
export const Peer = Type.Object(
  {
    /** Rank in the operation's communicator; null = MPI_ANY_SOURCE (or unknown). */
    local: Type.Union([Int32, Type.Null()]),
    /** Rank in MPI_COMM_WORLD; null = any source, or the library cannot say. */
    global: Type.Union([Int32, Type.Null()]),
  },
  { additionalProperties: false },
);
export type Peer = Static<typeof Peer>;

export const OpStatus = Type.Union([
  Type.Literal('pending'),
  Type.Literal('matched'),
  Type.Literal('complete'),
]);
export type OpStatus = Static<typeof OpStatus>;

/** What a length counts: bytes, or elements of the operation's datatype. */
export const LengthUnit = Type.Union([Type.Literal('bytes'), Type.Literal('elements')]);
export type LengthUnit = Static<typeof LengthUnit>;

/**
 * What actually matched, once the library knows: a matched or completed operation of any queue
 * (Open MPI copies a send's desired fields into its actual ones; a completed receive's come from
 * its status). null while pending.
 */
export const ActualMatch = Type.Object(
  {
    peer: Peer,
    /** Tag that matched; null when unknown. */
    tag: Type.Union([Int32, Type.Null()]),
    /** In the operation's unit (Operation.lengthUnit, else the snapshot's); null when unknown. */
    length: Type.Union([NonNegInt, Type.Null()]),
  },
  { additionalProperties: false },
);
export type ActualMatch = Static<typeof ActualMatch>;

/**
 * Why the reader replaced the status a library's DLL reported with the one the library's own
 * state gives (Operation.corrected, RankSnapshot.statusCorrections). Each reason says what the
 * DLL reported and what the status became:
 * - `waited-on`: the DLL reported `complete`; the library's own state says a thread waits on the
 *   request (Open MPI: its completion field holds the waiter's synchronisation object, neither
 *   0 nor the completed mark 1), so it is `pending`, with the peer, tag and length read from the
 *   request itself.
 */
export const StatusCorrection = Type.Union([Type.Literal('waited-on')]);
export type StatusCorrection = Static<typeof StatusCorrection>;
export const STATUS_CORRECTIONS: readonly StatusCorrection[] = ['waited-on'];
/** A rank's note on one kind of correction (RankSnapshot.statusCorrections[].message). */
export const MAX_CORRECTION_NOTE_CHARS = 512;

/** One entry of a send, receive or unexpected-message queue. */
export const Operation = Type.Object(
  {
    status: OpStatus,
    /** The destination of a send; the source a receive waits for; the sender of an unexpected message. */
    peer: Peer,
    /** null = MPI_ANY_TAG. */
    tag: Type.Union([Int32, Type.Null()]),
    /**
     * Desired length, in the snapshot's `mpi.lengthUnit` (bytes or elements) unless `lengthUnit`
     * says otherwise. 0 when `lengthUnknown` is set (kept a number so that older readers still
     * type-check).
     */
    length: NonNegInt,
    /** The library could not say the desired length (negative or a widened -1): `length` is then 0, not a length. */
    lengthUnknown: Type.Optional(Type.Literal(true)),
    /**
     * The unit of this operation's `length` and `actual.length` when it is not the snapshot's
     * `mpi.lengthUnit`; absent otherwise (present only when it differs). MPICH's ch4 device:
     * an unexpected message is an active-message request whose count is the data that arrived
     * in bytes, while every other MPICH length counts elements. No conversion is possible (an
     * unexpected message has no receive datatype yet), so the unit travels with the number.
     */
    lengthUnit: Type.Optional(LengthUnit),
    actual: Type.Union([ActualMatch, Type.Null()]),
    /** The library's five lines of extra text, decoded, empty ones dropped. */
    extraText: Type.Array(ShortText(64), { maxItems: 5 }),
    /** Target address of the user buffer, as 0x-prefixed hex. */
    buffer: Type.String({ pattern: '^0x[0-9a-f]{1,16}$' }),
    /** The send went through a system (MPI_Bsend) buffer. */
    systemBuffer: Type.Boolean(),
    /**
     * The reader corrected the status the DLL reported, from the library's own state, for this
     * reason (StatusCorrection); `status` is then the library's. Absent when the DLL's status
     * stands, and in snapshots written before the reader corrected statuses.
     */
    corrected: Type.Optional(StatusCorrection),
  },
  { additionalProperties: false },
);
export type Operation = Static<typeof Operation>;

/** The unit an operation's lengths are in: its own when it says, else the snapshot's `mpi.lengthUnit`. */
export const opLengthUnit = (op: Pick<Operation, 'lengthUnit'>, snapshotUnit: LengthUnit): LengthUnit =>
  op.lengthUnit ?? snapshotUnit;

const Queue = Type.Union([Type.Array(Operation, { maxItems: 1_000_000 }), Type.Null()]);

export const Communicator = Type.Object(
  {
    /** The library's id for this communicator, unique within the process (decimal or hex text). */
    id: ShortText(64),
    /** MPI_Comm_set_name name, or the library's default (MPI_COMM_WORLD, ...); "" when unnamed. */
    name: ShortText(256),
    size: NonNegInt,
    /** This process's rank in the communicator. */
    localRank: Int32,
    /**
     * This is MPI_COMM_WORLD, recognised by its identity (the library's world id, a group that
     * is the identity), not by its name: a renamed world is still the world, a user communicator
     * named "MPI_COMM_WORLD" is not. Absent in snapshots written before the reader knew
     * (analysis/comm.ts isWorld then falls back on the name).
     */
    world: Type.Optional(Type.Boolean()),
    /**
     * World rank of each local rank (group[i] = world rank of local rank i); null when the
     * library cannot say. Always null for MPI_COMM_WORLD (analysis/comm.ts isWorld), whose group is the identity by
     * definition: materialising it would cost size^2 integers per job (268M at 16,384 ranks).
     */
    group: Type.Union([Type.Array(Int32, { maxItems: 1 << 24 }), Type.Null()]),
    /**
     * Present only on an intercommunicator (read from the library's own structures, the mqs_*
     * interface cannot say): the world rank of each rank of the REMOTE group, null when the
     * library's structures could not be read. `group` is then the local group, `size` what the
     * DLL reports, and every operation's peer is a rank of the remote group.
     */
    remoteGroup: Type.Optional(Type.Union([Type.Array(Int32, { maxItems: 1 << 24 }), Type.Null()])),
    /**
     * The communicator's Fortran handle (what MPI_Comm_c2f returns, the INTEGER a `use mpi` /
     * mpif.h program holds, `MPI_VAL` under mpi_f08), read from the library's own structures
     * (Open MPI: its index in ompi_comm_f_to_c_table; MPICH: the handle itself). null when the
     * library's structures could not be read; absent in snapshots written before the reader knew.
     */
    fortranHandle: Type.Optional(Type.Union([Int32, Type.Null()])),
    sends: Queue,
    receives: Queue,
    unexpected: Queue,
    /** Why a queue is null (the library cannot show it). Only keys whose queue is null. */
    unavailable: Type.Object(
      {
        sends: Type.Optional(CodedError),
        receives: Type.Optional(CodedError),
        unexpected: Type.Optional(CodedError),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type Communicator = Static<typeof Communicator>;

/** ok: queues were read. Otherwise a coded error says why this rank has no (complete) data. */
export const RankState = Type.Union([
  Type.Object({ kind: Type.Literal('ok') }, { additionalProperties: false }),
  Type.Object(
    {
      kind: Type.Union([Type.Literal('error'), Type.Literal('no-queues'), Type.Literal('agent-missing')]),
      code: ShortText(MAX_CODE_CHARS),
      message: ShortText(MAX_MESSAGE_CHARS),
    },
    { additionalProperties: false },
  ),
]);
export type RankState = Static<typeof RankState>;

/** Most frames kept per thread (innermost first); deeper stacks are cut and marked `truncated`. */
export const MAX_FRAMES_PER_THREAD = 256;
/** Most threads listed per rank. */
export const MAX_THREADS_PER_RANK = 4096;

/** One frame of a thread's call stack, as libdw unwound and symbolised it. */
export const Frame = Type.Object(
  {
    /** Program counter of the frame (the return address minus one for outer frames), 0x-prefixed hex. */
    pc: Type.String({ pattern: '^0x[0-9a-f]{1,16}$' }),
    /** Function name, C++ demangled; null when no symbol covers the pc. */
    function: Type.Union([ShortText(1024), Type.Null()]),
    /** Path of the mapped file (executable or shared library) holding the pc; null if unmapped. */
    module: Type.Union([ShortText(4096), Type.Null()]),
    /** Source file from the line table; null without debug info. */
    file: Type.Union([ShortText(4096), Type.Null()]),
    line: Type.Union([NonNegInt, Type.Null()]),
    /** An inlined call site: this frame has no physical frame of its own (same pc as the next one). */
    inlined: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type Frame = Static<typeof Frame>;

/**
 * One frame of a thread's CPython stack, read from the interpreter's own frame chain in the same
 * stop as the C stack (innermost first, like Frame).
 */
export const PythonFrame = Type.Object(
  {
    /** The code object's qualified name (`step`, `Node.wait`, `<module>`). */
    function: ShortText(1024),
    /** The code object's file name, as the interpreter compiled it. */
    file: ShortText(4096),
    /** The line of the instruction the frame is at; null when its code has no line there. */
    line: Type.Union([NonNegInt, Type.Null()]),
    /**
     * The first Python frame of one run of the evaluation loop (`_PyEval_EvalFrameDefault`): the
     * frames up to and including it belong to the innermost such C frame not yet matched.
     */
    entry: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type PythonFrame = Static<typeof PythonFrame>;

/** A thread's CPython frames, when the rank runs CPython and the thread has a thread state. */
export const PythonStack = Type.Object(
  {
    /** Innermost first; at most MAX_FRAMES_PER_THREAD. */
    frames: Type.Array(PythonFrame, { maxItems: MAX_FRAMES_PER_THREAD }),
    /** More frames existed than were kept. */
    truncated: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type PythonStack = Static<typeof PythonStack>;

/** One OS thread of a rank, unwound in the same stop as the queue read. */
export const ThreadStack = Type.Object(
  {
    /** Linux thread id. */
    tid: Type.Integer({ minimum: 1 }),
    /** /proc/PID/task/TID/comm; null if unreadable. */
    name: Type.Union([ShortText(64), Type.Null()]),
    /** The process's main thread (tid == pid). */
    main: Type.Boolean(),
    /** Innermost first; at most MAX_FRAMES_PER_THREAD. */
    frames: Type.Array(Frame, { maxItems: MAX_FRAMES_PER_THREAD }),
    /** More frames existed than were kept. */
    truncated: Type.Boolean(),
    /** Why the unwind stopped early (a coded error), or null when it reached the outermost frame. */
    error: Type.Union([CodedError, Type.Null()]),
    /** The thread's OpenMP state name (OmpThread.state) when OMPD read it; absent otherwise. */
    ompState: Type.Optional(ShortText(128)),
    /** The thread's CPython frames; absent when the rank runs no CPython or the thread has none. */
    python: Type.Optional(PythonStack),
  },
  { additionalProperties: false },
);
export type ThreadStack = Static<typeof ThreadStack>;

/**
 * The public MPI function a rank is inside, found on its stacks: `PMPI_X` and the library's
 * internal frames fold to `MPI_X` (the outermost MPI frame of the thread).
 */
export const MpiCall = Type.Object(
  {
    /** e.g. "MPI_Ssend", "MPI_Barrier". */
    function: ShortText(128),
    /** The thread that is inside it. */
    tid: Type.Integer({ minimum: 1 }),
    /**
     * The call's arguments, where the MPI library's debug info let them be read from that frame
     * (each field null when unreadable or not applicable; the whole object null when none was).
     */
    args: Type.Union([
      Type.Object(
        {
          /** Destination (sends) or source (receives, probes): local and world rank; null = not applicable or unreadable. */
          peer: Type.Union([Peer, Type.Null()]),
          /** null = MPI_ANY_TAG, not applicable or unreadable. */
          tag: Type.Union([Int32, Type.Null()]),
          /** Communicator.id of the call's communicator in this rank's list when it could be matched, else null. */
          communicator: Type.Union([ShortText(64), Type.Null()]),
          /** Element count argument; null when not applicable or unreadable. */
          count: Type.Union([NonNegInt, Type.Null()]),
          /**
           * A rooted collective's root (MPI_Bcast, MPI_Reduce, MPI_Gather...), its rank in the
           * call's communicator; absent or null when not applicable or unreadable.
           */
          root: Type.Optional(Type.Union([NonNegInt, Type.Null()])),
          /**
           * Bytes of one element of the call's datatype argument, where the library's handle
           * tells it (MPICH's builtin handles encode it); absent or null when unreadable. With
           * `count`, the size of the message the call sends or receives.
           */
          typeSize: Type.Optional(Type.Union([NonNegInt, Type.Null()])),
          /**
           * A reduction's operation by its predefined name ("MPI_SUM"), where the library's
           * handle tells it; absent or null when unreadable or not predefined.
           */
          op: Type.Optional(Type.Union([ShortText(64), Type.Null()])),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
);
export type MpiCall = Static<typeof MpiCall>;

/**
 * One OpenMP thread of a rank as the OpenMP runtime's own OMPD library (`libompd.so`) describes
 * it, read in the same stop as the queues and stacks. Only threads the runtime knows
 * (its workers and the initial thread) are listed; an MPI progress thread is not.
 */
export const OmpThread = Type.Object(
  {
    /** Linux thread id (joins ThreadStack.tid). */
    tid: Type.Integer({ minimum: 1 }),
    /** omp_get_thread_num() in its innermost team; null when the runtime did not say. */
    threadNum: Type.Union([NonNegInt, Type.Null()]),
    /**
     * The OpenMP state by the name the OMPD library gives it (`ompd_enumerate_states`), e.g.
     * "ompt_state_work_parallel", "ompt_state_wait_barrier", "ompt_state_wait_lock",
     * "ompt_state_wait_taskwait" (LLVM's names).
     */
    state: ShortText(128),
    /** The wait identifier the runtime gives with a wait state (a lock's address...), 0x hex; null when none. */
    waitId: Type.Union([Type.String({ pattern: '^0x[0-9a-f]{1,16}$' }), Type.Null()]),
    /** The innermost parallel region the thread is in; null outside any (the initial thread between regions). */
    parallel: Type.Union([
      Type.Object(
        {
          /** Threads in the team (the region's team-size). */
          teamSize: Type.Integer({ minimum: 1 }),
          /** Nesting level: 1 = outermost parallel region (omp_get_level()). */
          level: NonNegInt,
          /** Active levels (teams with more than one thread) enclosing the thread (omp_get_active_level()). */
          activeLevel: Type.Union([NonNegInt, Type.Null()]),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
    /** The task the thread executes; null when unreadable. */
    task: Type.Union([
      Type.Object(
        {
          /** Name of the task's entry function (the outlined region or task body); null when no symbol covers it. */
          function: Type.Union([ShortText(1024), Type.Null()]),
          /** Entry address of the task's function, 0x hex; null when the runtime gave none. */
          entry: Type.Union([Type.String({ pattern: '^0x[0-9a-f]{1,16}$' }), Type.Null()]),
          /** From the task's ompt_task_flag_t: implicit (a region's own task), explicit (`omp task`), initial, target. */
          kind: Type.Union([
            Type.Literal('initial'),
            Type.Literal('implicit'),
            Type.Literal('explicit'),
            Type.Literal('target'),
            Type.Literal('unknown'),
          ]),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
);
export type OmpThread = Static<typeof OmpThread>;

/** A rank's OpenMP runtime as its OMPD library read it (RankSnapshot.openmp). */
export const OpenMpRuntime = Type.Object(
  {
    /** Path of the OpenMP runtime library mapped in the rank (e.g. .../libomp.so). */
    runtime: ShortText(4096),
    /** Path of the OMPD library that read it (from the runtime's ompd_dll_locations). */
    ompd: ShortText(4096),
    /** ompd_get_version_string of that library. */
    version: ShortText(1024),
    /** The runtime's threads, sorted by tid. */
    threads: Type.Array(OmpThread, { maxItems: MAX_THREADS_PER_RANK }),
  },
  { additionalProperties: false },
);
export type OpenMpRuntime = Static<typeof OpenMpRuntime>;

// Source excerpts: a few lines around the user's frame of each thread, read
// by the reader as the job's owner from the file the frame's line table names.
/** Lines kept on each side of an excerpt's line. */
export const SOURCE_CONTEXT_LINES = 6;
/** The largest source file read for an excerpt, in bytes (a larger one is not read). */
export const MAX_SOURCE_FILE_BYTES = 4 * 1024 * 1024;
/** Most distinct source files one read opens (one reader request: a node's ranks, or a part of them). */
export const MAX_SOURCE_FILES_PER_READ = 16;
/** Most excerpts on one rank (one per thread's user frame, each file:line once). */
export const MAX_SOURCE_EXCERPTS_PER_RANK = 16;
/** One line of an excerpt, in UTF-16 units (a longer line is cut with CLIP_MARK). */
export const MAX_SOURCE_LINE_CHARS = 400;
/** The reason an excerpt could not be read. */
export const MAX_SOURCE_REASON_CHARS = 512;

/**
 * The source around a user frame (Frame.file and Frame.line, exactly as the line table named
 * them). Either the lines, or the reason they could not be read ("is not readable by uid 1000",
 * "is a FIFO, not a regular file"). The text is the job's: views show it as text only.
 */
export const SourceExcerpt = Type.Union([
  Type.Object(
    {
      file: ShortText(MAX_PATH_CHARS),
      line: Type.Integer({ minimum: 1 }),
      /** The line number of lines[0]. */
      first: Type.Integer({ minimum: 1 }),
      /** Lines first..first+n-1, without their line ends; `line` is among them. */
      lines: Type.Array(ShortText(MAX_SOURCE_LINE_CHARS), { maxItems: 2 * SOURCE_CONTEXT_LINES + 1 }),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      file: ShortText(MAX_PATH_CHARS),
      line: Type.Integer({ minimum: 1 }),
      /** Why there are no lines, in plain words (no code: the excerpt is a convenience). */
      unreadable: ShortText(MAX_SOURCE_REASON_CHARS),
    },
    { additionalProperties: false },
  ),
]);
export type SourceExcerpt = Static<typeof SourceExcerpt>;

/** Most expressions one snapshot reads on each rank (SnapshotRequest evals, `mqd snapshot --eval`). */
export const MAX_EVAL_EXPRESSIONS = 16;
/** An expression read across ranks (EvalRequest.expr). */
export const MAX_EVAL_EXPR_CHARS = 256;
/** The text of one value read (RankValue.value.text): larger values are cut, ending in CLIP_MARK. */
export const MAX_EVAL_VALUE_CHARS = 2048;

/** An expression to read on every rank in the snapshot's stop, and the frame to read it in. */
export const EvalRequest = Type.Object(
  {
    expr: ShortText(MAX_EVAL_EXPR_CHARS),
    /** The function whose frame names resolve in (innermost such frame); absent: the innermost user frame. */
    frame: Type.Optional(ShortText(1024)),
    /**
     * The expression is a progress counter (the time step, the iteration): the explanation's
     * least-progressed ranks are those with its smallest number. The first so marked counts;
     * absent: an ordinary value.
     */
    progress: Type.Optional(Type.Literal(true)),
  },
  { additionalProperties: false },
);
export type EvalRequest = Static<typeof EvalRequest>;

/**
 * One expression's value on one rank, read from its memory in the same stop as its queues, or
 * the coded reason it could not be (MQD_E_EVAL_*: a bad expression, an unknown name, a variable
 * optimized out, an unreadable address). Exactly one of value and error is present.
 */
export const RankValue = Type.Object(
  {
    expr: ShortText(MAX_EVAL_EXPR_CHARS),
    /** The function whose frame the names were resolved in; null when no frame was chosen (globals only). */
    frame: Type.Union([ShortText(1024), Type.Null()]),
    /** The request marked the expression a progress counter (EvalRequest.progress), echoed; absent otherwise. */
    progress: Type.Optional(Type.Literal(true)),
    value: Type.Optional(
      Type.Object(
        {
          /** The value as gdb's `print` shows it (`42`, `{a = 1, b = 2}`, `(struct s *) 0x...`). */
          text: ShortText(MAX_EVAL_VALUE_CHARS),
          /** Its C type name as DWARF gives it (`int`, `struct s *`). */
          type: ShortText(1024),
          /** A scalar's numeric value (integers, floats, enums, pointers within 2^53), for statistics. */
          number: Type.Optional(Type.Number()),
        },
        { additionalProperties: false },
      ),
    ),
    error: Type.Optional(CodedError),
  },
  { additionalProperties: false },
);
export type RankValue = Static<typeof RankValue>;

/** Where a rank's queues were read from when the MPI library's DLL cannot see them (RankSnapshot.queueSource). */
export const QueueSource = Type.Object(
  {
    source: Type.Literal('ucx'),
    /** The library read (the rank's libucp.so); "" when the rank maps none. */
    library: ShortText(MAX_PATH_CHARS),
    limits: Type.Array(CodedError, { maxItems: 8 }),
  },
  { additionalProperties: false },
);
export type QueueSource = Static<typeof QueueSource>;

export const RankSnapshot = Type.Object(
  {
    /** Rank in MPI_COMM_WORLD. */
    rank: Type.Integer({ minimum: 0, maximum: 2147483647 }),
    pid: Type.Integer({ minimum: 1 }),
    host: ShortText(MAX_HOST_CHARS),
    state: RankState,
    /** How long every thread of the rank was stopped for the read, in microseconds; null if never stopped. */
    pausedMicros: Type.Union([NonNegInt, Type.Null()]),
    communicators: Type.Array(Communicator, { maxItems: 65536 }),
    /**
     * Every thread's call stack, unwound in the same stop as the queues (absent when stacks were
     * not asked for or the rank was never stopped; an empty array never means "not read").
     */
    threads: Type.Optional(Type.Array(ThreadStack, { maxItems: MAX_THREADS_PER_RANK })),
    /** Why the stacks could not be read while the queues could (absent when threads is present or not asked for). */
    stacksError: Type.Optional(CodedError),
    /**
     * The rank had more threads than MAX_THREADS_PER_RANK (code MQD_E_THREAD_LIMIT): every one
     * was stopped for the read, but only the first MAX_THREADS_PER_RANK (the main thread, then
     * by tid) were unwound and are in `threads` (and read by OMPD); `omitted` more are only
     * counted. Absent when every thread is listed, when stacks were not read, and in snapshots
     * written before the cap (an optional field: schema version 1 still opens them).
     */
    threadLimit: Type.Optional(
      Type.Object(
        {
          code: ShortText(MAX_CODE_CHARS),
          message: ShortText(MAX_MESSAGE_CHARS),
          omitted: Type.Integer({ minimum: 1 }),
        },
        { additionalProperties: false },
      ),
    ),
    /**
     * The CPython the rank runs, read with its stacks: the version (from `Py_Version`) and why
     * its frames could not be read (MQD_E_PYTHON_UNSUPPORTED, MQD_E_PYTHON_READ), else null.
     * Absent when the rank maps no CPython or stacks were not read.
     */
    python: Type.Optional(
      Type.Object(
        { version: ShortText(32), error: Type.Union([CodedError, Type.Null()]) },
        { additionalProperties: false },
      ),
    ),
    /** The MPI call the rank is in, from its stacks; null = in no MPI call ("computing"); absent = stacks not read. */
    mpiCall: Type.Optional(Type.Union([MpiCall, Type.Null()])),
    /**
     * The rank's OpenMP threads, read through the runtime's OMPD library in the same stop as the
     * queues: null = the rank has no OpenMP runtime; absent = not read (stacks not asked
     * for, never stopped, or OMPD unavailable: then openmpError says why and what to do).
     */
    openmp: Type.Optional(Type.Union([OpenMpRuntime, Type.Null()])),
    /** Why the rank's OpenMP runtime could not be read (e.g. MQD_E_OMPD_DISABLED: OMP_DEBUG unset). */
    openmpError: Type.Optional(CodedError),
    /**
     * The message-queue DLL that read this rank: its path and mqs_version_string (an MPMD job
     * can run two MPI builds, each rank read by its own). Absent when no DLL was loaded for it.
     */
    dll: Type.Optional(
      Type.Object(
        {
          path: ShortText(MAX_PATH_CHARS),
          version: ShortText(MAX_VERSION_CHARS),
          /**
           * Fields the DLL looked up (type.field) that the library's debug information lacks: a DLL
           * built for another version of its library; its entries may be wrong. Absent when none.
           */
          missingFields: Type.Optional(
            Type.Array(ShortText(MAX_MISSING_FIELD_CHARS), { maxItems: MAX_DLL_FIELDS }),
          ),
          /**
           * Lookups of fields the library has renamed, answered with their new place ("type.old ->
           * type.new.path"; MPICH 4.0.x ch4's DLL and MPIDIG_req_t). Absent when none.
           */
          renamedFields: Type.Optional(
            Type.Array(ShortText(MAX_RENAMED_FIELD_CHARS), { maxItems: MAX_DLL_FIELDS }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    /**
     * The statuses the reader corrected on this rank, one entry per reason (StatusCorrection):
     * how many operations carry `corrected` with that reason, and what it means in a user's
     * words ("Open MPI's DLL calls these requests complete; the library's own state says a thread
     * waits on them"). Absent when no status was corrected (and in older snapshots).
     */
    statusCorrections: Type.Optional(
      Type.Array(
        Type.Object(
          {
            reason: StatusCorrection,
            count: Type.Integer({ minimum: 1 }),
            message: ShortText(MAX_CORRECTION_NOTE_CHARS),
          },
          { additionalProperties: false },
        ),
        { maxItems: STATUS_CORRECTIONS.length },
      ),
    ),
    /**
     * Where this rank's queues came from when not from the MPI library's DLL: `ucx` when Open
     * MPI runs its ucx PML, whose requests only UCX holds (the DLL walks ob1's lists, empty
     * there). Its posted receives and unexpected messages are then read from the UCX worker, its
     * sends are only the blocking send its MPI call names; `limits` says what could not be known
     * on this rank (MQD_E_UCX_SENDS always, MQD_E_UCX_TAG_OFFLOAD, MQD_E_UCX_RANK_RANGE, or the
     * coded reason no UCX queue could be read). Absent: the DLL's queues (and older snapshots).
     */
    queueSource: Type.Optional(QueueSource),
    /**
     * The DLL's mqs_dprints while it read this rank (setting it up, the walk), in order, when the
     * reader runs with `MQD_DEBUG=dll` (the agent's environment); absent otherwise. For
     * diagnosing a DLL, not for display.
     */
    dllLog: Type.Optional(Type.Array(ShortText(4096), { maxItems: 200 })),
    /**
     * Source excerpts around the innermost user frame (outside the MPI and runtime libraries) of
     * each thread, read as the job's owner after the stop. An excerpt is given once per read
     * (host, file:line): a rank read after another at the same line of the same file on the
     * same host has none of its own (look it up with sourceExcerptFor). Absent when stacks were
     * not read or no thread has a user frame with a line.
     */
    sources: Type.Optional(Type.Array(SourceExcerpt, { maxItems: MAX_SOURCE_EXCERPTS_PER_RANK })),
    /** The expressions the snapshot asked for (`--eval`), in request order, read in the same stop. Absent: none asked. */
    values: Type.Optional(Type.Array(RankValue, { maxItems: MAX_EVAL_EXPRESSIONS })),
  },
  { additionalProperties: false },
);
export type RankSnapshot = Static<typeof RankSnapshot>;

export const MpiLibrary = Type.Union([
  Type.Literal('openmpi'),
  Type.Literal('mpich'),
  Type.Literal('unknown'),
]);
export type MpiLibrary = Static<typeof MpiLibrary>;

/**
 * The unit each library's DLL gives its lengths in, the snapshot's `mpi.lengthUnit`: Open MPI
 * bytes, MPICH element counts (dll_mpich.c: "Count, not bytes"); bytes when unknown.
 */
export const lengthUnitOfLibrary = (lib: MpiLibrary): LengthUnit => (lib === 'mpich' ? 'elements' : 'bytes');

/** A process that was asked for but is not a rank of the snapshot (JobSnapshot.unidentified). */
export const UnidentifiedProcess = Type.Object(
  {
    pid: Type.Integer({ minimum: 1 }),
    host: ShortText(255),
    error: CodedError,
  },
  { additionalProperties: false },
);
export type UnidentifiedProcess = Static<typeof UnidentifiedProcess>;

/** One rank's core file, when the snapshot was read from cores (JobSnapshot.source). */
export const CoreFileSource = Type.Object(
  {
    rank: Type.Integer({ minimum: 0 }),
    /** The core file as it was given (a path on the reading host). */
    path: ShortText(MAX_PATH_CHARS),
    /** The pid the process had. */
    pid: Type.Integer({ minimum: 1 }),
    /** The signal that made the core; 0 for a capture (`mqd capture`) of a running process. */
    signal: NonNegInt,
    /** The executable as the process ran it. */
    executable: ShortText(MAX_PATH_CHARS),
    /** When the core file was written (its modification time). */
    writtenAt: Type.String({ format: 'date-time', maxLength: 40 }),
  },
  { additionalProperties: false },
);
export type CoreFileSource = Static<typeof CoreFileSource>;

export const SnapshotSource = Type.Object(
  {
    kind: Type.Literal('core'),
    cores: Type.Array(CoreFileSource, { maxItems: 1 << 20 }),
  },
  { additionalProperties: false },
);
export type SnapshotSource = Static<typeof SnapshotSource>;

export const JobSnapshot = Type.Object(
  {
    schemaVersion: Type.Literal(SNAPSHOT_SCHEMA_VERSION),
    /** ISO 8601 UTC time the snapshot started. */
    takenAt: Type.String({ format: 'date-time', maxLength: 40 }),
    /** Wall time of the whole snapshot, microseconds. */
    durationMicros: NonNegInt,
    mpi: Type.Object(
      {
        library: MpiLibrary,
        /** Path of the message-queue DLL used; null when none could be loaded. */
        dll: Type.Union([ShortText(4096), Type.Null()]),
        /**
         * Unit of Operation.length: Open MPI reports bytes, MPICH element counts. An operation
         * in another unit says so itself (Operation.lengthUnit: MPICH ch4's unexpected messages).
         */
        lengthUnit: LengthUnit,
      },
      { additionalProperties: false },
    ),
    /** Sorted by rank; a rank appears once. */
    ranks: Type.Array(RankSnapshot, { maxItems: 1 << 20 }),
    /**
     * Processes asked for that are not ranks of this snapshot: no MPI rank could be told for
     * them (no rank given, none in their environment), or their rank was given twice. They
     * have no rank number, so they are not in `ranks`. Absent when there are none.
     */
    unidentified: Type.Optional(Type.Array(UnidentifiedProcess, { maxItems: 1 << 20 })),
    /**
     * Where the ranks were read from when not from running processes: core files.
     * Absent for a live snapshot. Ranks of a core snapshot have pausedMicros 0.
     */
    source: Type.Optional(SnapshotSource),
  },
  { additionalProperties: false },
);
export type JobSnapshot = Static<typeof JobSnapshot>;
