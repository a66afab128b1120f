/* A libompd that misbehaves: built with -DOMPD_CRASH (SIGSEGV in ompd_initialize) or
 * -DOMPD_LOOP (loops forever in ompd_process_initialize). Every entry point the reader needs
 * exists, so it is loaded and called like the real one. */
#include <stdint.h>
#include <stddef.h>

typedef int64_t ompd_word_t;
typedef int ompd_rc_t;
#define ompd_rc_error 4

ompd_rc_t ompd_get_api_version(ompd_word_t *v) { *v = 201811; return 0; }
ompd_rc_t ompd_get_version_string(const char **s) { *s = "fake libompd (misbehaving)"; return 0; }

ompd_rc_t ompd_initialize(ompd_word_t version, const void *callbacks) {
#ifdef OMPD_CRASH
  volatile int *p = (volatile int *)(uintptr_t)16;
  *p = 1;
#endif
  return 0;
}

ompd_rc_t ompd_process_initialize(void *context, void **handle) {
#ifdef OMPD_LOOP
  for (volatile unsigned long i = 0;; i++) {
  }
#endif
  return ompd_rc_error;
}

#define FAIL(name) \
  ompd_rc_t name(void) { return ompd_rc_error; }
FAIL(ompd_finalize)
FAIL(ompd_rel_address_space_handle)
FAIL(ompd_enumerate_states)
FAIL(ompd_enumerate_icvs)
FAIL(ompd_get_thread_handle)
FAIL(ompd_rel_thread_handle)
FAIL(ompd_get_state)
FAIL(ompd_get_curr_parallel_handle)
FAIL(ompd_rel_parallel_handle)
FAIL(ompd_get_curr_task_handle)
FAIL(ompd_rel_task_handle)
FAIL(ompd_get_task_function)
FAIL(ompd_get_icv_from_scope)
