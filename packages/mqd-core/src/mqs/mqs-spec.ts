// THE spec of the MPI message-queue debugging interface (mqs_*), compatibility level 2 (no
// MPI-2 job callbacks), as the MPI library's DLL and the debugger share it. Every type, enum,
// constant, callback table and entry point is here, once, with its memory layout on LP64.
// Sources of the facts: the MPI Forum draft "MPI Message Queue Dumping Interface", Open MPI's
// ompi/debuggers/msgq_interface.h and MPICH's src/mpi/debugger/mpi_interface.h (what the two
// real DLLs do: docs/mpi-facts.md). Written here, not copied.
//
// Conventions (the koffi traps behind them: packages/mqd-core/README.md):
// - Opaque handles (mqs_image *, mqs_process *, mqs_type *, *_info *) are integers: the
//   debugger chooses image/process/type handles (small non-zero keys into JS maps), the DLL
//   chooses info pointers (stored and handed back untouched).
// - mqs_taddr_t is unsigned long (8 bytes), mqs_tword_t is long (8 bytes).
// - Out-pointers may be NULL (Open MPI passes NULL to find_function and find_symbol).
import koffi from 'koffi';

/** The only compatibility level this debugger speaks. */
export const MQS_INTERFACE_COMPATIBILITY = 2;

/** Generic result codes. DLL-specific codes start at mqs_first_user_code. */
export const mqs_ok = 0;
export const mqs_no_information = 1;
export const mqs_end_of_list = 2;
export const mqs_first_user_code = 100;

/**
 * What this debugger's callbacks return on failure. The text says find_function, find_symbol
 * and fetch_data return mqs_no_information when they cannot answer; both real DLLs only compare
 * the result with mqs_ok (Open MPI 4.1.4 ompi_common_dll.c, MPICH 4.0.2 dll_mpich.c) and never
 * print it or call errorstring. So no private codes cross the interface: why a callback failed
 * (an unreadable address, the read budget, a missing symbol) stays on our side (the shim's
 * failure kind and address, the session's last callback failure) and is added to the message
 * of the DLL error it caused.
 */
export const CALLBACK_FAILURE = mqs_no_information;

/** errorstring's answer for the only failure code the callbacks return. */
export const CALLBACK_FAILURE_TEXT =
  'debugger: no information (a symbol, type or target memory the DLL asked for is not available)';

/** mqd_shim_walk_ops's own code (never from a DLL): the walk buffer could not grow. */
export const WALK_OUT_OF_MEMORY = -1;

/** mqs_lang_code */
export const mqs_lang = { c: 0x63, cplus: 0x43, f77: 0x66, f90: 0x46 } as const;

/** mqs_op_class */
export const mqs_op_class = { pending_sends: 0, pending_receives: 1, unexpected_messages: 2 } as const;

/** enum mqs_status */
export const mqs_status = { pending: 0, matched: 1, complete: 2 } as const;

/**
 * mqs_target_type_sizes. The standard layout has 5 ints (short, int, long, long long,
 * pointer); Open MPI's header adds bool and size_t (7 ints) and overwrites all 7 from the
 * target's MPIR_debug_typedefs_sizeof. The debugger fills only the first 5, which is right
 * for both layouts.
 */
export const TYPE_SIZES_FIELDS = [
  'short_size',
  'int_size',
  'long_size',
  'long_long_size',
  'pointer_size',
] as const;

/** mqs_communicator: { mqs_taddr_t unique_id; mqs_tword_t local_rank; mqs_tword_t size; char name[64]; } */
export const COMMUNICATOR = {
  size: 88,
  unique_id: 0,
  local_rank: 8,
  size_: 16,
  name: 24,
  nameLen: 64,
} as const;

/**
 * mqs_pending_operation (416 bytes on LP64):
 *   int status; long desired_local_rank; long desired_global_rank; int tag_wild;
 *   long desired_tag; long desired_length; int system_buffer; unsigned long buffer;
 *   long actual_local_rank; long actual_global_rank; long actual_tag; long actual_length;
 *   char extra_text[5][64];
 * The DLLs widen target ints into these 8-byte fields without sign extension: read ranks and
 * tags as int32 (MPICH also reads a receive's rank as 2 bytes: ANY_SOURCE shows as 65534).
 */
export const PENDING_OPERATION = {
  size: 416,
  status: 0,
  desired_local_rank: 8,
  desired_global_rank: 16,
  tag_wild: 24,
  desired_tag: 32,
  desired_length: 40,
  system_buffer: 48,
  buffer: 56,
  actual_local_rank: 64,
  actual_global_rank: 72,
  actual_tag: 80,
  actual_length: 88,
  extra_text: 96,
  extraLines: 5,
  extraLineLen: 64,
} as const;

// ---- callback prototypes (debugger side) ------------------------------------------------
// basic: malloc, free, dprints, errorstring, put/get image info, put/get process info
export const proto = {
  malloc: koffi.proto('uintptr_t mqs_malloc_ft(size_t size)'),
  free: koffi.proto('void mqs_free_ft(uintptr_t p)'),
  dprints: koffi.proto('void mqs_dprints_ft(const char *text)'),
  errorstring: koffi.proto('uintptr_t mqs_errorstring_ft(int code)'),
  put_image_info: koffi.proto('void mqs_put_image_info_ft(intptr_t image, uintptr_t info)'),
  get_image_info: koffi.proto('uintptr_t mqs_get_image_info_ft(intptr_t image)'),
  put_process_info: koffi.proto('void mqs_put_process_info_ft(intptr_t process, uintptr_t info)'),
  get_process_info: koffi.proto('uintptr_t mqs_get_process_info_ft(intptr_t process)'),
  // image: get_type_sizes, find_function, find_symbol, find_type, field_offset, sizeof
  get_type_sizes: koffi.proto('void mqs_get_type_sizes_ft(intptr_t process, void *sizes)'),
  find_function: koffi.proto(
    'int mqs_find_function_ft(intptr_t image, const char *name, int lang, void *addr)',
  ),
  find_symbol: koffi.proto('int mqs_find_symbol_ft(intptr_t image, const char *name, void *addr)'),
  find_type: koffi.proto('intptr_t mqs_find_type_ft(intptr_t image, const char *name, int lang)'),
  field_offset: koffi.proto('int mqs_field_offset_ft(intptr_t type, const char *field)'),
  sizeof: koffi.proto('int mqs_sizeof_ft(intptr_t type)'),
  // process: get_global_rank, get_image, fetch_data, target_to_host
  get_global_rank: koffi.proto('int mqs_get_global_rank_ft(intptr_t process)'),
  get_image: koffi.proto('intptr_t mqs_get_image_ft(intptr_t process)'),
  fetch_data: koffi.proto('int mqs_fetch_data_ft(intptr_t process, uint64_t addr, int size, void *buf)'),
  target_to_host: koffi.proto('void mqs_target_to_host_ft(intptr_t process, void *in, void *out, int size)'),
} as const;

/** Order of the function pointers in each callback table (mqs_basic_callbacks etc.). */
export const BASIC_CALLBACKS = [
  'malloc',
  'free',
  'dprints',
  'errorstring',
  'put_image_info',
  'get_image_info',
  'put_process_info',
  'get_process_info',
] as const;
export const IMAGE_CALLBACKS = [
  'get_type_sizes',
  'find_function',
  'find_symbol',
  'find_type',
  'field_offset',
  'sizeof',
] as const;
export const PROCESS_CALLBACKS = ['get_global_rank', 'get_image', 'fetch_data', 'target_to_host'] as const;

// ---- DLL entry points --------------------------------------------------------------------
/** Required entry points of a compatibility-level-2 DLL. */
export const ENTRY_POINTS = {
  mqs_version_compatibility: 'int mqs_version_compatibility()',
  mqs_version_string: 'const char *mqs_version_string()',
  mqs_dll_taddr_width: 'int mqs_dll_taddr_width()',
  mqs_setup_basic_callbacks: 'void mqs_setup_basic_callbacks(void *cb)',
  mqs_dll_error_string: 'const char *mqs_dll_error_string(int code)',
  mqs_setup_image: 'int mqs_setup_image(intptr_t image, void *cb)',
  mqs_image_has_queues: 'int mqs_image_has_queues(intptr_t image, _Out_ const char **message)',
  mqs_destroy_image_info: 'void mqs_destroy_image_info(uintptr_t info)',
  mqs_setup_process: 'int mqs_setup_process(intptr_t process, void *cb)',
  mqs_process_has_queues: 'int mqs_process_has_queues(intptr_t process, _Out_ const char **message)',
  mqs_destroy_process_info: 'void mqs_destroy_process_info(uintptr_t info)',
  mqs_update_communicator_list: 'int mqs_update_communicator_list(intptr_t process)',
  mqs_setup_communicator_iterator: 'int mqs_setup_communicator_iterator(intptr_t process)',
  mqs_get_communicator: 'int mqs_get_communicator(intptr_t process, void *comm)',
  mqs_next_communicator: 'int mqs_next_communicator(intptr_t process)',
  mqs_setup_operation_iterator: 'int mqs_setup_operation_iterator(intptr_t process, int op)',
  mqs_next_operation: 'int mqs_next_operation(intptr_t process, void *op)',
} as const;

/** Optional entry points: looked up one by one, absent is fine (MPICH has no comm group). */
export const OPTIONAL_ENTRY_POINTS = {
  mqs_get_comm_group: 'int mqs_get_comm_group(intptr_t process, void *group)',
} as const;

export type EntryName = keyof typeof ENTRY_POINTS;
export type OptionalEntryName = keyof typeof OPTIONAL_ENTRY_POINTS;
