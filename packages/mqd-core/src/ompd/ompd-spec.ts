// THE spec of the OMPD interface as this reader uses it (OpenMP 5.0 OMPD, LLVM's libompd 16):
// return codes, thread-id kinds, scopes, task flags, the callback table the debugger gives
// ompd_initialize, and the library's entry points. Every layout is x86_64 LP64.
// Opaque handles and contexts are integers here (koffi trap 4, README.md): the library's
// handles are its pointers, handed back untouched; our contexts are small keys into maps.
import koffi from 'koffi';

/** The API version this reader speaks (ompd_get_api_version of LLVM 16's libompd). */
export const OMPD_API_VERSION = 201811;

/** ompd_rc_t, in order. */
export const OMPD_RC_NAMES = [
  'ompd_rc_ok',
  'ompd_rc_unavailable',
  'ompd_rc_stale_handle',
  'ompd_rc_bad_input',
  'ompd_rc_error',
  'ompd_rc_unsupported',
  'ompd_rc_needs_state_tracking',
  'ompd_rc_incompatible',
  'ompd_rc_device_read_error',
  'ompd_rc_device_write_error',
  'ompd_rc_nomem',
  'ompd_rc_incomplete',
  'ompd_rc_callback_error',
] as const;

export const ompd_rc = {
  ok: 0,
  unavailable: 1,
  stale_handle: 2,
  bad_input: 3,
  error: 4,
  unsupported: 5,
  device_read_error: 8,
  nomem: 10,
  callback_error: 12,
} as const;

export function rcName(rc: number): string {
  return OMPD_RC_NAMES[rc] ?? `ompd_rc_t ${rc}`;
}

/** ompd_thread_id_t kinds (LLVM ompd-types.h): a pthread_t, or a Linux LWP id (tid). */
export const OMPD_THREAD_ID_PTHREAD = 0;
export const OMPD_THREAD_ID_LWP = 1;

/** ompd_scope_t. */
export const ompd_scope = {
  global: 1,
  address_space: 2,
  thread: 3,
  parallel: 4,
  implicit_task: 5,
  task: 6,
} as const;

/** ompd_address_t: { ompd_seg_t segment; ompd_addr_t address; }, 16 bytes. */
export const OMPD_ADDRESS_SIZE = 16;
/** ompd_device_type_sizes_t: six uint8_t (char, short, int, long, long long, pointer). */
export const OMPD_TYPE_SIZES_SIZE = 6;

/** The ICVs this reader asks for, by the names ompd_enumerate_icvs gives them (LLVM's). */
export const WANTED_ICVS = {
  threadNum: 'thread-num-var',
  teamSize: 'team-size-var',
  levels: 'levels-var',
  activeLevels: 'active-levels-var',
  implicitTask: 'implicit-task-var',
} as const;
export type WantedIcv = keyof typeof WANTED_ICVS;

// ---- the callback table (ompd_callbacks_t), in field order -------------------------------
export const CALLBACK_NAMES = [
  'alloc_memory',
  'free_memory',
  'print_string',
  'sizeof_type',
  'symbol_addr_lookup',
  'read_memory',
  'write_memory',
  'read_string',
  'device_to_host',
  'host_to_device',
  'get_thread_context_for_thread_id',
] as const;
export type CallbackName = (typeof CALLBACK_NAMES)[number];

/**
 * Prototypes of the callbacks. Contexts are `uintptr_t` (our keys); every other pointer is
 * `void *` (a koffi External, possibly null: never written through unchecked).
 */
export const callbackProto: Record<CallbackName, ReturnType<typeof koffi.proto>> = {
  alloc_memory: koffi.proto('int mqd_ompd_alloc(uint64_t nbytes, void *ptr)'),
  free_memory: koffi.proto('int mqd_ompd_free(uintptr_t ptr)'),
  print_string: koffi.proto('int mqd_ompd_print(const char *text, int category)'),
  sizeof_type: koffi.proto('int mqd_ompd_sizeof(uintptr_t context, void *sizes)'),
  symbol_addr_lookup: koffi.proto(
    'int mqd_ompd_symbol(uintptr_t context, uintptr_t tcontext, const char *name, void *addr, const char *file)',
  ),
  read_memory: koffi.proto(
    'int mqd_ompd_read(uintptr_t context, uintptr_t tcontext, void *addr, uint64_t nbytes, void *buffer)',
  ),
  write_memory: koffi.proto(
    'int mqd_ompd_write(uintptr_t context, uintptr_t tcontext, void *addr, uint64_t nbytes, void *buffer)',
  ),
  read_string: koffi.proto(
    'int mqd_ompd_read_string(uintptr_t context, uintptr_t tcontext, void *addr, uint64_t nbytes, void *buffer)',
  ),
  device_to_host: koffi.proto(
    'int mqd_ompd_d2h(uintptr_t context, void *input, uint64_t unit, uint64_t count, void *output)',
  ),
  host_to_device: koffi.proto(
    'int mqd_ompd_h2d(uintptr_t context, void *input, uint64_t unit, uint64_t count, void *output)',
  ),
  get_thread_context_for_thread_id: koffi.proto(
    'int mqd_ompd_thread_context(uintptr_t context, uint64_t kind, uint64_t size, void *id, void *out)',
  ),
};

// ---- the library's entry points ------------------------------------------------------------
// Handles are `uintptr_t`; out-parameters are pointers to typed arrays handed to the call (koffi
// passes their memory; strings come back as addresses, freed with free_memory).
export const ENTRY_POINTS = {
  ompd_initialize: 'int ompd_initialize(int64_t version, uintptr_t callbacks)',
  ompd_get_api_version: 'int ompd_get_api_version(int64_t *version)',
  ompd_get_version_string: 'int ompd_get_version_string(uint64_t *text)',
  ompd_process_initialize: 'int ompd_process_initialize(uintptr_t context, uint64_t *handle)',
  ompd_rel_address_space_handle: 'int ompd_rel_address_space_handle(uintptr_t handle)',
  ompd_enumerate_states:
    'int ompd_enumerate_states(uintptr_t handle, int64_t current, int64_t *next, uint64_t *name, int64_t *more)',
  ompd_enumerate_icvs:
    'int ompd_enumerate_icvs(uintptr_t handle, uint64_t current, uint64_t *next, uint64_t *name, int32_t *scope, int32_t *more)',
  ompd_get_thread_handle:
    'int ompd_get_thread_handle(uintptr_t handle, uint64_t kind, uint64_t size, const void *id, uint64_t *thread)',
  ompd_rel_thread_handle: 'int ompd_rel_thread_handle(uintptr_t thread)',
  ompd_get_state: 'int ompd_get_state(uintptr_t thread, int64_t *state, uint64_t *waitId)',
  ompd_get_curr_parallel_handle: 'int ompd_get_curr_parallel_handle(uintptr_t thread, uint64_t *parallel)',
  ompd_rel_parallel_handle: 'int ompd_rel_parallel_handle(uintptr_t parallel)',
  ompd_get_curr_task_handle: 'int ompd_get_curr_task_handle(uintptr_t thread, uint64_t *task)',
  ompd_rel_task_handle: 'int ompd_rel_task_handle(uintptr_t task)',
  ompd_get_task_function: 'int ompd_get_task_function(uintptr_t task, uint64_t *entry)',
  ompd_get_icv_from_scope:
    'int ompd_get_icv_from_scope(uintptr_t handle, int32_t scope, uint64_t icv, int64_t *value)',
} as const;
export type OmpdEntry = keyof typeof ENTRY_POINTS;
