/* A conformance MQD DLL of our own (compatibility level 2). It reads libmpi_mqdtest.so's
 * queues ONLY through the debugger's callbacks and deliberately exercises every one of them,
 * including the failure paths a debugger must survive: missing symbols and types, NULL
 * out-pointers, failed reads, error strings both ways, a union member, an anonymous member,
 * and (on request of the target) a crash, an abort, a loop and a cyclic list.
 * The declarations below follow the public mqs_* interface; written for this project. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long mqs_taddr_t;
typedef long mqs_tword_t;
typedef struct mqs_image_ mqs_image;
typedef struct mqs_process_ mqs_process;
typedef struct mqs_type_ mqs_type;
typedef struct image_info mqs_image_info;
typedef struct process_info mqs_process_info;

enum { mqs_ok = 0, mqs_no_information = 1, mqs_end_of_list = 2, mqs_first_user_code = 100 };
enum { err_missing_type = 100, err_missing_symbol, err_read, err_bad_class, err_no_store, err_injected, err_private_code };
typedef enum { mqs_lang_c = 'c' } mqs_lang_code;
enum { mqs_pending_sends, mqs_pending_receives, mqs_unexpected_messages };

typedef struct { int short_size, int_size, long_size, long_long_size, pointer_size; } mqs_target_type_sizes;
typedef struct { mqs_taddr_t unique_id; mqs_tword_t local_rank; mqs_tword_t size; char name[64]; } mqs_communicator;
typedef struct {
  int status;
  mqs_tword_t desired_local_rank, desired_global_rank;
  int tag_wild;
  mqs_tword_t desired_tag, desired_length;
  int system_buffer;
  mqs_taddr_t buffer;
  mqs_tword_t actual_local_rank, actual_global_rank, actual_tag, actual_length;
  char extra_text[5][64];
} mqs_pending_operation;

typedef struct {
  void *(*malloc_fp)(size_t);
  void (*free_fp)(void *);
  void (*dprints_fp)(const char *);
  char *(*errorstring_fp)(int);
  void (*put_image_info_fp)(mqs_image *, mqs_image_info *);
  mqs_image_info *(*get_image_info_fp)(mqs_image *);
  void (*put_process_info_fp)(mqs_process *, mqs_process_info *);
  mqs_process_info *(*get_process_info_fp)(mqs_process *);
} mqs_basic_callbacks;
typedef struct {
  void (*get_type_sizes_fp)(mqs_process *, mqs_target_type_sizes *);
  int (*find_function_fp)(mqs_image *, char *, mqs_lang_code, mqs_taddr_t *);
  int (*find_symbol_fp)(mqs_image *, char *, mqs_taddr_t *);
  mqs_type *(*find_type_fp)(mqs_image *, char *, mqs_lang_code);
  int (*field_offset_fp)(mqs_type *, char *);
  int (*sizeof_fp)(mqs_type *);
} mqs_image_callbacks;
typedef struct {
  int (*get_global_rank_fp)(mqs_process *);
  mqs_image *(*get_image_fp)(mqs_process *);
  int (*fetch_data_fp)(mqs_process *, mqs_taddr_t, int, void *);
  void (*target_to_host_fp)(mqs_process *, const void *, void *, int);
} mqs_process_callbacks;

static const mqs_basic_callbacks *cb;

struct image_info {
  const mqs_image_callbacks *icb;
  int comm_next, comm_name, comm_id, comm_size, comm_rank, comm_group, comm_queues, comm_anon_flag;
  int op_next, op_match, op_length, op_buffer, op_status, op_sysbuf;
  int match_parts, parts_tag, parts_rank;
  int sizeof_comm, sizeof_op, sizeof_match;
  int missing_field; /* must come back -1 */
};
struct process_info {
  const mqs_process_callbacks *pcb;
  mqs_target_type_sizes sizes;
  mqs_taddr_t comms_sym, mode_sym;
  int mode, global_rank;
  mqs_taddr_t cur_comm, next_op;
  int cur_class, comm_count;
  char last_error[64];
};

#ifndef MQDTEST_COMPAT
#define MQDTEST_COMPAT 2
#endif
int mqs_version_compatibility(void) { return MQDTEST_COMPAT; }
#ifndef MQDTEST_VERSION
#define MQDTEST_VERSION "mqdtest conformance DLL 1.0 (MQD Dashboard tests)"
#endif
char *mqs_version_string(void) { return MQDTEST_VERSION; }
int mqs_dll_taddr_width(void) { return sizeof(mqs_taddr_t); }
void mqs_setup_basic_callbacks(const mqs_basic_callbacks *b) { cb = b; }

char *mqs_dll_error_string(int code) {
  switch (code) {
    case err_missing_type: return "mqdtest: a required type is missing from the debug info";
    case err_missing_symbol: return "mqdtest: a required symbol is missing";
    case err_read: return "mqdtest: the target could not be read";
    case err_bad_class: return "mqdtest: no such operation class";
    case err_no_store: return "mqdtest: no process info stored";
    case err_injected: return "mqdtest: injected failure (the target asked for it)";
    case err_private_code: return "mqdtest: a debugger callback failed with a code other than mqs_no_information";
    default: return cb->errorstring_fp(code); /* a debugger code: ask the debugger */
  }
}

int mqs_setup_image(mqs_image *image, const mqs_image_callbacks *icb) {
  mqs_image_info *ii = cb->malloc_fp(sizeof *ii);
  if (!ii) return err_no_store;
  memset(ii, 0, sizeof *ii);
  ii->icb = icb;
  cb->put_image_info_fp(image, ii);
  return mqs_ok;
}

int mqs_image_has_queues(mqs_image *image, char **message) {
  mqs_image_info *ii = cb->get_image_info_fp(image);
  const mqs_image_callbacks *icb = ii->icb;
  *message = 0;
  /* A hint, with a NULL out-pointer like Open MPI's. */
  icb->find_function_fp(image, "mqdtest_debugger_hint", mqs_lang_c, 0);
  /* A type that does not exist must come back NULL, not crash. */
  if (icb->find_type_fp(image, "mqdtest_no_such_type_t", mqs_lang_c) != 0) {
    *message = "debugger invented a type for %s";
    return err_missing_type;
  }
  mqs_type *comm = icb->find_type_fp(image, "mqdtest_comm_t", mqs_lang_c);  /* a typedef name */
  mqs_type *op = icb->find_type_fp(image, "mqdtest_op", mqs_lang_c);        /* a struct tag */
  mqs_type *match = icb->find_type_fp(image, "mqdtest_match_t", mqs_lang_c);
  mqs_type *parts = icb->find_type_fp(image, "mqdtest_match_parts", mqs_lang_c);
  if (!comm || !op || !match || !parts) {
    *message = "missing type in %s: no debug info for libmpi_mqdtest?";
    return err_missing_type;
  }
  ii->comm_next = icb->field_offset_fp(comm, "next");
  ii->comm_name = icb->field_offset_fp(comm, "name");
  ii->comm_id = icb->field_offset_fp(comm, "id");
  ii->comm_size = icb->field_offset_fp(comm, "size");
  ii->comm_rank = icb->field_offset_fp(comm, "rank");
  ii->comm_group = icb->field_offset_fp(comm, "group");
  ii->comm_queues = icb->field_offset_fp(comm, "queues");
  ii->comm_anon_flag = icb->field_offset_fp(comm, "anon_flag");
  ii->missing_field = icb->field_offset_fp(comm, "no_such_field");
  ii->op_next = icb->field_offset_fp(op, "next");
  ii->op_match = icb->field_offset_fp(op, "match");
  ii->op_length = icb->field_offset_fp(op, "length");
  ii->op_buffer = icb->field_offset_fp(op, "buffer");
  ii->op_status = icb->field_offset_fp(op, "status");
  ii->op_sysbuf = icb->field_offset_fp(op, "system_buffer");
  ii->match_parts = icb->field_offset_fp(match, "parts");
  ii->parts_tag = icb->field_offset_fp(parts, "tag");
  ii->parts_rank = icb->field_offset_fp(parts, "rank");
  ii->sizeof_comm = icb->sizeof_fp(comm);
  ii->sizeof_op = icb->sizeof_fp(op);
  ii->sizeof_match = icb->sizeof_fp(match);
  if (ii->comm_queues < 0 || ii->op_match < 0 || ii->match_parts != 0 || ii->missing_field != -1 ||
      ii->comm_anon_flag < 0 || ii->sizeof_match != 8) {
    *message = "wrong field offsets or sizes from the debugger for %s";
    return err_missing_type;
  }
  cb->dprints_fp("mqdtest: image has queues");
  return mqs_ok;
}

void mqs_destroy_image_info(mqs_image_info *ii) { cb->free_fp(ii); }

static int fetch(mqs_process *p, mqs_taddr_t addr, int size, void *out) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  return pi->pcb->fetch_data_fp(p, addr, size, out);
}

/* Reads a target int into the low end of a zeroed 8-byte word, without sign extension,
   as the real DLLs do: the debugger must read ranks and tags back as int32. */
static int fetch_int_widened(mqs_process *p, mqs_taddr_t addr, mqs_tword_t *out) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  char raw[8];
  int rc = pi->pcb->fetch_data_fp(p, addr, pi->sizes.int_size, raw);
  *out = 0;
  if (rc == mqs_ok) pi->pcb->target_to_host_fp(p, raw, out, pi->sizes.int_size);
  return rc;
}

static int fetch_ptr(mqs_process *p, mqs_taddr_t addr, mqs_taddr_t *out) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  char raw[8];
  int rc = pi->pcb->fetch_data_fp(p, addr, pi->sizes.pointer_size, raw);
  *out = 0;
  if (rc == mqs_ok) pi->pcb->target_to_host_fp(p, raw, out, pi->sizes.pointer_size);
  return rc;
}

int mqs_setup_process(mqs_process *p, const mqs_process_callbacks *pcb) {
  mqs_process_info *pi = cb->malloc_fp(sizeof *pi);
  if (!pi) return err_no_store;
  memset(pi, 0, sizeof *pi);
  pi->pcb = pcb;
  mqs_image *image = pcb->get_image_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(image);
  ii->icb->get_type_sizes_fp(p, &pi->sizes);
  pi->global_rank = pcb->get_global_rank_fp(p);
  cb->put_process_info_fp(p, pi);
  /* A missing symbol, asked with a NULL out-pointer like Open MPI's MPIR_Ignore_queues. */
  if (ii->icb->find_symbol_fp(image, "MPIR_Ignore_queues", 0) == mqs_ok) return mqs_no_information;
  /* The interface text: a callback that cannot answer returns mqs_no_information, no other code. */
  mqs_taddr_t where = 0;
  char probe[4];
  if (ii->icb->find_symbol_fp(image, "mqdtest_no_such_symbol", &where) != mqs_no_information ||
      ii->icb->find_function_fp(image, "mqdtest_no_such_function", mqs_lang_c, &where) != mqs_no_information ||
      pcb->fetch_data_fp(p, 0, (int)sizeof probe, probe) != mqs_no_information)
    return err_private_code;
  if (ii->icb->find_symbol_fp(image, "mqdtest_mode", &pi->mode_sym) != mqs_ok) return err_missing_symbol;
  mqs_tword_t mode = 0;
  if (fetch_int_widened(p, pi->mode_sym, &mode) != mqs_ok) return err_read;
  pi->mode = (int)mode;
  return mqs_ok;
}

int mqs_process_has_queues(mqs_process *p, char **msg) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image *image = pi->pcb->get_image_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(image);
  *msg = 0;
  if (pi->mode == 6) {
    *msg = "mqdtest: %s was started without queue support (100%% sure)";
    return err_missing_symbol;
  }
  if (ii->icb->find_symbol_fp(image, "mqdtest_comms", &pi->comms_sym) != mqs_ok) {
    *msg = "mqdtest: no mqdtest_comms symbol";
    return err_missing_symbol;
  }
  return mqs_ok;
}

void mqs_destroy_process_info(mqs_process_info *pi) { cb->free_fp(pi); }

int mqs_update_communicator_list(mqs_process *p) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  return pi ? mqs_ok : err_no_store;
}

int mqs_setup_communicator_iterator(mqs_process *p) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  pi->comm_count = 0;
  if (pi->mode == 11) return err_injected;
  if (fetch_ptr(p, pi->comms_sym, &pi->cur_comm) != mqs_ok) return err_read;
  return pi->cur_comm ? mqs_ok : mqs_end_of_list;
}

int mqs_get_communicator(mqs_process *p, mqs_communicator *c) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(pi->pcb->get_image_fp(p));
  if (!pi->cur_comm) return err_no_store;
  if (pi->mode == 8 && pi->comm_count == 1) return err_injected;
  mqs_tword_t id = 0, size = 0, rank = 0;
  if (fetch_ptr(p, pi->cur_comm + ii->comm_id, (mqs_taddr_t *)&id) != mqs_ok) return err_read;
  if (fetch_int_widened(p, pi->cur_comm + ii->comm_size, &size) != mqs_ok) return err_read;
  if (fetch_int_widened(p, pi->cur_comm + ii->comm_rank, &rank) != mqs_ok) return err_read;
  c->unique_id = (mqs_taddr_t)id;
  c->size = size;
  c->local_rank = rank;
  /* 64 bytes, not necessarily NUL-terminated (like Open MPI v4's c_name). */
  if (fetch(p, pi->cur_comm + ii->comm_name, 64, c->name) != mqs_ok) return err_read;
  return mqs_ok;
}

int mqs_get_comm_group(mqs_process *p, int *group) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(pi->pcb->get_image_fp(p));
  mqs_tword_t size = 0;
  mqs_taddr_t g = 0;
  if (fetch_int_widened(p, pi->cur_comm + ii->comm_size, &size) != mqs_ok) return err_read;
  if (fetch_ptr(p, pi->cur_comm + ii->comm_group, &g) != mqs_ok || !g) return mqs_no_information;
  for (int i = 0; i < size; i++) {
    mqs_tword_t v = 0;
    if (fetch_int_widened(p, g + (mqs_taddr_t)i * 4, &v) != mqs_ok) return err_read;
    group[i] = (int)v;
  }
  return mqs_ok;
}

int mqs_next_communicator(mqs_process *p) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(pi->pcb->get_image_fp(p));
  mqs_taddr_t next = 0;
  if (pi->mode == 9) return err_injected;
  if (fetch_ptr(p, pi->cur_comm + ii->comm_next, &next) != mqs_ok) return err_read;
  pi->cur_comm = next;
  pi->comm_count++;
  return next ? mqs_ok : mqs_end_of_list;
}

int mqs_setup_operation_iterator(mqs_process *p, int op_class) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(pi->pcb->get_image_fp(p));
  if (op_class < 0 || op_class > 2) return err_bad_class;
  if (op_class == mqs_unexpected_messages && pi->mode == 7) return mqs_no_information;
  if (op_class == mqs_pending_receives && pi->mode == 10) return err_injected;
  pi->cur_class = op_class;
  return fetch_ptr(p, pi->cur_comm + ii->comm_queues + (mqs_taddr_t)op_class * pi->sizes.pointer_size, &pi->next_op) ==
                 mqs_ok
             ? mqs_ok
             : err_read;
}

int mqs_next_operation(mqs_process *p, mqs_pending_operation *res) {
  mqs_process_info *pi = cb->get_process_info_fp(p);
  mqs_image_info *ii = cb->get_image_info_fp(pi->pcb->get_image_fp(p));
  if (pi->mode == 1) raise(SIGSEGV);
  if (pi->mode == 2) abort();
  if (pi->mode == 3) for (volatile int spin = 1; spin;) {}
  if (!pi->next_op) return mqs_end_of_list;
  mqs_taddr_t o = pi->next_op, next = 0, buf = 0;
  mqs_tword_t tag = 0, rank = 0, len = 0, status = 0, sysbuf = 0;
  int rc;
  if ((rc = fetch_ptr(p, o + ii->op_next, &next)) != mqs_ok ||
      (rc = fetch_int_widened(p, o + ii->op_match + ii->match_parts + ii->parts_tag, &tag)) != mqs_ok ||
      (rc = fetch_int_widened(p, o + ii->op_match + ii->match_parts + ii->parts_rank, &rank)) != mqs_ok ||
      (rc = fetch(p, o + ii->op_length, 8, &len)) != mqs_ok || (rc = fetch_ptr(p, o + ii->op_buffer, &buf)) != mqs_ok ||
      (rc = fetch_int_widened(p, o + ii->op_status, &status)) != mqs_ok ||
      (rc = fetch_int_widened(p, o + ii->op_sysbuf, &sysbuf)) != mqs_ok) {
    /* Error strings the other way: the debugger's text for its own code. */
    strncpy(pi->last_error, cb->errorstring_fp(rc), sizeof pi->last_error - 1);
    return rc;
  }
  res->status = (int)status;
  res->desired_local_rank = rank; /* ANY_SOURCE (-1) shows as 4294967295 here */
  res->desired_global_rank = -1;  /* unknown: the debugger derives it from the group */
  res->tag_wild = (int)tag == -1;
  res->desired_tag = tag;
  res->desired_length = len;
  res->system_buffer = (int)sysbuf;
  res->buffer = buf;
  res->actual_local_rank = rank;
  res->actual_global_rank = -1;
  res->actual_tag = tag;
  res->actual_length = len;
  strcpy(res->extra_text[0], pi->cur_class == 0 ? "mqdtest send" : pi->cur_class == 1 ? "mqdtest receive" : "mqdtest unexpected");
  res->extra_text[1][0] = 0;
  strcpy(res->extra_text[2], "line three");
  pi->next_op = next;
  return mqs_ok;
}
