/* The hot callbacks of the mqs_* interface, answered in C.
 *
 * A DLL walking a deep queue calls fetch_data ~20 times per entry; through koffi each call was
 * a trip into JavaScript (~13 us with its page-cache lookup). Here the process callbacks
 * (fetch_data, get_global_rank, get_image, target_to_host) and the info keepers
 * (put/get_process_info, put/get_image_info) are plain C over tables that JavaScript fills
 * (src/inferior/shim.ts), and reads go through process_vm_readv with a page cache valid for one stop.
 * mqd_shim_walk_ops runs a whole queue walk (mqs_next_operation until it fails) without
 * returning to JavaScript; the records of every walk of a stop stay here, one after another,
 * and JavaScript copies them out only after the rank is resumed.
 *
 * Handles: the debugger's mqs_process and mqs_image handles are small integer keys chosen by
 * JavaScript; each indexes one slot here. Only one thread (the DLL host's JS thread) calls in.
 * Native memory: the slot table, the page cache and the walk buffer; the last two are reused
 * from stop to stop and trimmed after each (mqd_shim_end_stop), everything is freed by
 * mqd_shim_reset. mqd_shim_outstanding reports the bytes held, for the leak tests.
 *
 * Where a deep stop's time went (MPICH, 20,000 + 20,000, measured with the counters below): the
 * walk itself is ~1 us of CPU per operation (19 fetch_data, almost all served from the page
 * last used); the rest was page faults on cache pages freshly allocated in every stop, the copy
 * of the records into JavaScript inside the stop, and one process_vm_readv per 8 pages. Hence:
 * cache chunks kept mapped between stops (MADV_FREE beyond KEEP_CHUNKS: the kernel may take the
 * pages back, and does not fault them while it has not), read-ahead that grows on sequential
 * misses, and records copied out after the resume. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define PAGE 4096u
#define CHUNK_PAGES 256u /* 1 MiB per chunk */
#define KEEP_CHUNKS 16u  /* kept resident between stops: 16 MiB of cached pages */
#define MAX_CHUNKS 96u   /* kept mapped (MADV_FREE past KEEP_CHUNKS); more are unmapped after a stop */
#define KEEP_TABLE (1u << 16) /* hash entries retained (1 MiB) */
#define KEEP_OPS (1u << 16)   /* walk records retained (27 MiB): a deep queue does not refault */
#define OP_SIZE 416      /* mqs_pending_operation on LP64 (mqs-spec.ts PENDING_OPERATION) */

/* Must match mqs-spec.ts (CALLBACK_FAILURE, WALK_OUT_OF_MEMORY) and memory.ts (ReadFailure).
 * A failed callback answers mqs_no_information, as the interface text says; why it failed is
 * kept here (the slot's fail kind and address) for the debugger, never handed to the DLL. */
#define MQS_OK 0
#define MQS_NO_INFORMATION 1
#define WALK_OUT_OF_MEMORY (-1)
enum { FAIL_NONE = 0, FAIL_UNMAPPED = 1, FAIL_DENIED = 2, FAIL_GONE = 3, FAIL_BUDGET = 4, FAIL_MISSING = 5 };

/* A core file's memory: address ranges served by pread from a file (the core's own
 * segments, or a file the process had mapped), or known to have existed but be absent from the
 * core (fd -1). Sorted by start, disjoint; set by JavaScript (src/inferior/core-image.ts). */
typedef struct {
  uint64_t start, end;
  int64_t fd;
  uint64_t off; /* file offset of `start` */
} region_t;

/* Counters of the callbacks answered here, in this order (shim.ts SHIM_COUNTERS). */
enum {
  C_FETCH, C_RANK, C_IMAGE, C_T2H, C_PUT_PI, C_GET_PI, C_PUT_II, C_GET_II, C_SYSCALLS,
  C_MISSES,      /* page-cache misses: reads of target memory (one syscall, or preads for a core) */
  C_READ_NS,     /* wall time spent in them */
  C_WALK_NS,     /* wall time in mqd_shim_walk_ops (the DLL's mqs_next_operation loops) */
  C_WALK_CPU_NS, /* this thread's CPU time in the same: wall minus CPU = time not scheduled */
  C_N
};
static uint64_t counters[C_N];

static uint64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct {
  int used;
  int pid;
  int rank;
  intptr_t image;  /* for a process slot: its image key */
  uintptr_t info;  /* process info or image info, as the DLL stored it */
  int64_t budget;  /* bytes per stop */
  int64_t bytes;   /* read in this stop */
  int64_t reads;
  int fail;
  uint64_t fail_addr; /* the address of the first failed read in this stop */
  int64_t failed_reads;
  region_t *regions; /* non-NULL: a core, read by pread instead of process_vm_readv */
  size_t nregions;
} slot_t;

static slot_t *slots;
static size_t nslots;

static slot_t *slot_of(intptr_t key) {
  if (key <= 0 || (size_t)key >= nslots || !slots[key].used) return NULL;
  return &slots[key];
}

API int mqd_shim_abi(void) { return 5; }

API int mqd_shim_set(intptr_t key, int pid, int rank, intptr_t image, int64_t budget) {
  if (key <= 0 || key > (1 << 24)) return -1;
  if ((size_t)key >= nslots) {
    size_t n = nslots ? nslots : 64;
    while (n <= (size_t)key) n *= 2;
    slot_t *s = realloc(slots, n * sizeof *s);
    if (!s) return -1;
    memset(s + nslots, 0, (n - nslots) * sizeof *s);
    slots = s;
    nslots = n;
  }
  slot_t *s = &slots[key];
  if (!s->used) {
    free(s->regions);
    memset(s, 0, sizeof *s);
  }
  s->used = 1;
  s->pid = pid;
  s->rank = rank;
  s->image = image;
  s->budget = budget;
  return 0;
}

API void mqd_shim_drop(intptr_t key) {
  if (key > 0 && (size_t)key < nslots) {
    free(slots[key].regions);
    memset(&slots[key], 0, sizeof slots[key]);
  }
}

/* Makes process slot `key` a core: `n` regions of 4 words each (start, end, fd, offset). */
API int mqd_shim_set_regions(intptr_t key, const uint64_t *words, int64_t n) {
  slot_t *s = slot_of(key);
  if (!s || n < 0 || n > (1 << 24)) return -1;
  region_t *r = n ? malloc((size_t)n * sizeof *r) : NULL;
  if (n && !r) return -1;
  for (int64_t i = 0; i < n; i++) {
    r[i].start = words[4 * i];
    r[i].end = words[4 * i + 1];
    r[i].fd = (int64_t)words[4 * i + 2];
    r[i].off = words[4 * i + 3];
  }
  free(s->regions);
  s->regions = r;
  s->nregions = (size_t)n;
  return 0;
}

API uintptr_t mqd_shim_info(intptr_t key) {
  slot_t *s = slot_of(key);
  return s ? s->info : 0;
}

API uint64_t mqd_shim_counter(int i) { return i >= 0 && i < C_N ? counters[i] : 0; }

/* ---- the page cache: one, for the process being read (the host reads one rank at a time) --- */
typedef struct {
  uint64_t base; /* page address + 1 (0 = empty entry) */
  int32_t page;  /* index into the chunks, -1 = unreadable */
} entry_t;

static int cache_pid = -1;
static entry_t *table;
static size_t table_cap; /* power of two */
static size_t table_used;
static uint8_t **chunks;
static size_t nchunks, chunks_cap;
static size_t pages_used;

/* The last page served: most reads of a walk fall on the page of the one before. */
static uint64_t last_base = 1; /* never page-aligned: no match */
static const uint8_t *last_page;

/* Read-ahead (see page()): pages per miss, and the page right after the last window read. */
#define READ_AHEAD 8
#define MAX_READ_AHEAD 64
static int ra_len = READ_AHEAD;
static uint64_t ra_next = 1; /* never page-aligned: no match */

static void cache_clear(int pid) {
  last_base = 1;
  last_page = NULL;
  ra_next = 1;
  ra_len = READ_AHEAD;
  if (table) memset(table, 0, table_cap * sizeof *table);
  table_used = 0;
  pages_used = 0;
  cache_pid = pid;
}

static int table_grow(void) {
  size_t cap = table_cap ? table_cap * 2 : 1024;
  entry_t *t = calloc(cap, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < table_cap; i++) {
    if (!table[i].base) continue;
    size_t h = (size_t)((table[i].base >> 12) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (t[h].base) h = (h + 1) & (cap - 1);
    t[h] = table[i];
  }
  free(table);
  table = t;
  table_cap = cap;
  return 0;
}

static uint8_t *page_ptr(size_t i) { return chunks[i / CHUNK_PAGES] + (i % CHUNK_PAGES) * PAGE; }

static int new_page(size_t *out) {
  if (pages_used == nchunks * CHUNK_PAGES) {
    if (nchunks == chunks_cap) {
      size_t cap = chunks_cap ? chunks_cap * 2 : 16;
      uint8_t **c = realloc(chunks, cap * sizeof *c);
      if (!c) return -1;
      chunks = c;
      chunks_cap = cap;
    }
    void *m = mmap(NULL, (size_t)CHUNK_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    chunks[nchunks++] = m;
  }
  *out = pages_used++;
  return 0;
}

static entry_t *lookup(uint64_t base) {
  size_t h = (size_t)((base >> 12) * 0x9E3779B97F4A7C15ull) & (table_cap - 1);
  while (table[h].base && table[h].base != base + 1) h = (h + 1) & (table_cap - 1);
  return &table[h];
}

static void classify(slot_t *s, ssize_t n) {
  if (n >= 0 || errno == EFAULT || errno == EIO) s->fail = FAIL_UNMAPPED;
  else if (errno == EPERM) s->fail = FAIL_DENIED;
  else if (errno == ESRCH) s->fail = FAIL_GONE;
  else s->fail = FAIL_UNMAPPED;
}

/* Fills one page of a core slot from its regions: 1 when every byte was served. A page no
 * region covers is unmapped (the process had nothing there); one inside a region without a
 * file, or a short pread, is missing (the process had memory there that the core lacks). */
static int core_fill(slot_t *s, uint64_t base, uint8_t *out) {
  uint64_t a = base, end = base + PAGE;
  size_t lo = 0, hi = s->nregions;
  while (lo < hi) { /* first region with end > a */
    size_t mid = (lo + hi) / 2;
    if (s->regions[mid].end <= a) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; a < end; i++) {
    if (i >= s->nregions || s->regions[i].start > a) {
      s->fail = FAIL_UNMAPPED;
      return 0;
    }
    const region_t *r = &s->regions[i];
    uint64_t stop = r->end < end ? r->end : end;
    if (r->fd < 0) {
      s->fail = FAIL_MISSING;
      return 0;
    }
    size_t want = (size_t)(stop - a);
    counters[C_SYSCALLS]++;
    ssize_t got = pread((int)r->fd, out + (a - base), want, (off_t)(r->off + (a - r->start)));
    if (got < 0) {
      s->fail = FAIL_MISSING;
      return 0;
    }
    /* A mapped file ends inside its last page: the process read zeros there. (A core cut short
     * was refused when it was opened, core-file.ts.) */
    if ((size_t)got < want) memset(out + (a - base) + got, 0, want - (size_t)got);
    a = stop;
  }
  return 1;
}

static const uint8_t *core_page(slot_t *s, uint64_t base) {
  entry_t *e = lookup(base);
  if (e->base) return e->page < 0 ? NULL : page_ptr((size_t)e->page);
  size_t idx;
  if (new_page(&idx) != 0) {
    s->fail = FAIL_UNMAPPED;
    return NULL;
  }
  counters[C_MISSES]++;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  int ok = core_fill(s, base, page_ptr(idx));
  counters[C_READ_NS] += now_ns(CLOCK_MONOTONIC) - t0;
  if (!ok) pages_used--;
  e = lookup(base);
  e->base = base + 1;
  e->page = ok ? (int32_t)idx : -1;
  table_used++;
  return ok ? page_ptr(idx) : NULL;
}

/* The cached page at `base` (read on a miss), or NULL when unreadable; sets s->fail then.
 * A miss reads ahead, in one process_vm_readv, the pages from `base` that are not cached yet:
 * READ_AHEAD of them, doubling up to MAX_READ_AHEAD while each miss falls right after the last
 * window (a deep queue's entries are allocated in runs: MPICH's 20,000 + 20,000 touch 10,164
 * pages, 40 MB, nearly all consecutive), back to READ_AHEAD on a jump (a 4-rank ring's few
 * pages: no bigger reads). The kernel stops at the first unreadable page and says how much it
 * read: pages past it are simply not cached. */

static const uint8_t *page(slot_t *s, uint64_t base) {
  if ((table_used + MAX_READ_AHEAD) * 2 >= table_cap && table_grow() != 0) return NULL;
  if (s->regions) return core_page(s, base);
  entry_t *e = lookup(base);
  if (e->base) return e->page < 0 ? NULL : page_ptr((size_t)e->page);
  ra_len = base == ra_next ? (ra_len * 2 > MAX_READ_AHEAD ? MAX_READ_AHEAD : ra_len * 2) : READ_AHEAD;
  struct iovec local[MAX_READ_AHEAD];
  size_t idx[MAX_READ_AHEAD];
  int n = 0, nio = 0;
  for (; n < ra_len; n++) {
    uint64_t b = base + (uint64_t)n * PAGE;
    if (n > 0 && lookup(b)->base) break;
    if (new_page(&idx[n]) != 0) break;
    uint8_t *p = page_ptr(idx[n]);
    /* Consecutive slots of one chunk are one buffer: one iovec. */
    if (nio > 0 && (uint8_t *)local[nio - 1].iov_base + local[nio - 1].iov_len == p) {
      local[nio - 1].iov_len += PAGE;
    } else {
      local[nio].iov_base = p;
      local[nio].iov_len = PAGE;
      nio++;
    }
  }
  if (n == 0) {
    s->fail = FAIL_UNMAPPED;
    return NULL; /* out of memory: do not cache the failure */
  }
  ra_next = base + (uint64_t)n * PAGE;
  struct iovec remote = {(void *)(uintptr_t)base, (size_t)n * PAGE};
  counters[C_SYSCALLS]++;
  counters[C_MISSES]++;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  ssize_t got = process_vm_readv(s->pid, local, (unsigned long)nio, &remote, 1, 0);
  int saved = errno;
  counters[C_READ_NS] += now_ns(CLOCK_MONOTONIC) - t0;
  errno = saved;
  int whole = got > 0 ? (int)(got / (ssize_t)PAGE) : 0;
  if (got < (ssize_t)PAGE) classify(s, got);
  for (int i = 0; i < n; i++) {
    uint64_t b = base + (uint64_t)i * PAGE;
    if (i >= whole && i > 0) break; /* not read: unknown, not cached */
    entry_t *t = lookup(b);
    t->base = b + 1;
    t->page = i < whole ? (int32_t)idx[i] : -1;
    table_used++;
  }
  /* Slots of pages not read go back (they are the last ones taken). */
  pages_used -= (size_t)(n - (whole > 0 ? whole : 0));
  entry_t *first = lookup(base);
  return first->page < 0 ? NULL : page_ptr((size_t)first->page);
}

static int read_into(slot_t *s, uint64_t addr, int64_t len, uint8_t *out);

/* Copies len bytes at addr of process `key` into out. 1 = read, 0 = not (s->fail says why,
 * s->fail_addr where the first failed read of the stop started). */
API int mqd_shim_read(intptr_t key, uint64_t addr, int64_t len, uint8_t *out) {
  slot_t *s = slot_of(key);
  if (!s || len < 0) return 0;
  if (read_into(s, addr, len, out)) return 1;
  if (!s->failed_reads++) s->fail_addr = addr;
  return 0;
}

static int read_into(slot_t *s, uint64_t addr, int64_t len, uint8_t *out) {
  s->reads++;
  s->bytes += len;
  if (s->bytes > s->budget) {
    s->fail = FAIL_BUDGET;
    return 0;
  }
  if (addr == 0) {
    s->fail = FAIL_UNMAPPED;
    return 0;
  }
  if (cache_pid != s->pid) cache_clear(s->pid);
  int64_t done = 0;
  while (done < len) {
    uint64_t a = addr + (uint64_t)done;
    uint64_t base = a & ~(uint64_t)(PAGE - 1);
    const uint8_t *p;
    if (base == last_base) {
      p = last_page;
    } else {
      p = page(s, base);
      if (!p) return 0;
      last_base = base;
      last_page = p;
    }
    int64_t off = (int64_t)(a - base);
    int64_t n = len - done < (int64_t)PAGE - off ? len - done : (int64_t)PAGE - off;
    memcpy(out + done, p + off, (size_t)n);
    done += n;
  }
  return 1;
}

static size_t ops_count;

/* A new stop of process `key`: the cache, the walk buffer and the per-stop counts start over. */
API void mqd_shim_begin_stop(intptr_t key) {
  slot_t *s = slot_of(key);
  if (!s) return;
  ops_count = 0;
  s->bytes = 0;
  s->reads = 0;
  s->fail = FAIL_NONE;
  s->fail_addr = 0;
  s->failed_reads = 0;
  cache_clear(s->pid);
}

API int mqd_shim_failure(intptr_t key) {
  slot_t *s = slot_of(key);
  return s ? s->fail : FAIL_NONE;
}

/* Reads that failed in this stop, and where the first of them started. */
API int64_t mqd_shim_failed_reads(intptr_t key) {
  slot_t *s = slot_of(key);
  return s ? s->failed_reads : 0;
}
API uint64_t mqd_shim_fail_addr(intptr_t key) {
  slot_t *s = slot_of(key);
  return s ? s->fail_addr : 0;
}

API int64_t mqd_shim_stop_reads(intptr_t key) {
  slot_t *s = slot_of(key);
  return s ? s->reads : 0;
}

/* ---- the walk buffer ---------------------------------------------------------------------- */
static uint8_t *ops;
static size_t ops_cap; /* in records; ops_count (above) = records of this stop so far */

typedef int (*next_op_fn)(intptr_t process, void *op);

/* Calls the DLL's mqs_next_operation until it returns non-zero or `max` records were read;
 * the records are appended to this stop's (mqd_shim_ops_count before and after says which are
 * this walk's; mqd_shim_ops_copy after the resume). Returns the last return code. */
API int mqd_shim_walk_ops(void *fn, intptr_t key, int64_t max) {
  next_op_fn next = (next_op_fn)fn;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  size_t first = ops_count;
  int rc = MQS_OK;
  while ((int64_t)(ops_count - first) < max) {
    if (ops_count == ops_cap) {
      size_t cap = ops_cap ? ops_cap * 2 : 256;
      uint8_t *o = realloc(ops, cap * OP_SIZE);
      if (!o) {
        rc = WALK_OUT_OF_MEMORY;
        break;
      }
      ops = o;
      ops_cap = cap;
    }
    uint8_t *rec = ops + ops_count * OP_SIZE;
    memset(rec, 0, OP_SIZE); /* MPICH leaves lines of extra_text untouched: start clean */
    rc = next(key, rec);
    if (rc != MQS_OK) break;
    ops_count++;
  }
  counters[C_WALK_NS] += now_ns(CLOCK_MONOTONIC) - t0;
  counters[C_WALK_CPU_NS] += now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  return rc;
}

API int64_t mqd_shim_ops_count(void) { return (int64_t)ops_count; }

/* Copies records [first, first + n) of this stop into dst. */
API void mqd_shim_ops_copy(uint8_t *dst, int64_t first, int64_t n) {
  if (first < 0 || n <= 0 || first > (int64_t)ops_count) return;
  if (n > (int64_t)ops_count - first) n = (int64_t)ops_count - first;
  memcpy(dst, ops + (size_t)first * OP_SIZE, (size_t)n * OP_SIZE);
}

/* After a stop: keep what a deep rank needs again next time (bounded), free the rest. The
 * retained blocks are reused, never grown per snapshot: a rank's next stop re-uses them without
 * page faults or reallocation copies inside the stop. Cache chunks past KEEP_CHUNKS stay mapped
 * but lazily freed (MADV_FREE): while the kernel has not taken their pages back, the next deep
 * stop writes into them without a page fault; past MAX_CHUNKS they are unmapped. */
API void mqd_shim_end_stop(void) {
  cache_clear(-1);
  while (nchunks > MAX_CHUNKS) munmap(chunks[--nchunks], (size_t)CHUNK_PAGES * PAGE);
  for (size_t i = KEEP_CHUNKS; i < nchunks; i++) madvise(chunks[i], (size_t)CHUNK_PAGES * PAGE, MADV_FREE);
  if (table_cap > KEEP_TABLE) {
    free(table);
    table = NULL;
    table_cap = 0;
  }
  if (ops_cap > KEEP_OPS) {
    free(ops);
    ops = NULL;
    ops_cap = 0;
  }
  ops_count = 0;
}

/* Frees everything (the session closed). */
API void mqd_shim_reset(void) {
  cache_clear(-1);
  while (nchunks > 0) munmap(chunks[--nchunks], (size_t)CHUNK_PAGES * PAGE);
  free(chunks);
  chunks = NULL;
  chunks_cap = 0;
  free(table);
  table = NULL;
  table_cap = 0;
  free(ops);
  ops = NULL;
  ops_cap = ops_count = 0;
  for (size_t i = 0; i < nslots; i++) free(slots[i].regions);
  free(slots);
  slots = NULL;
  nslots = 0;
}

/* Native bytes held now (cache chunks, hash table, walk buffer, slots). */
API int64_t mqd_shim_outstanding(void) {
  size_t regions = 0;
  for (size_t i = 0; i < nslots; i++) regions += slots[i].nregions * sizeof(region_t);
  return (int64_t)(regions + nchunks * CHUNK_PAGES * PAGE + table_cap * sizeof(entry_t) + ops_cap * OP_SIZE +
                   nslots * sizeof(slot_t) + chunks_cap * sizeof(uint8_t *));
}

/* ---- the callbacks the DLL calls (their addresses go into the mqs_*_callbacks tables) ------ */
API int mqd_cb_fetch_data(intptr_t process, uint64_t addr, int size, void *buf) {
  counters[C_FETCH]++;
  slot_t *s = slot_of(process);
  if (!s || !buf) return MQS_NO_INFORMATION;
  if (size <= 0) return MQS_OK;
  /* Most of a walk's reads fall inside the page the one before used: served here, with the same
   * accounting as read_into (which handles everything else). */
  uint64_t off = addr & (PAGE - 1);
  if ((addr & ~(uint64_t)(PAGE - 1)) == last_base && off + (uint64_t)size <= PAGE && cache_pid == s->pid &&
      s->bytes + size <= s->budget) {
    s->reads++;
    s->bytes += size;
    /* The DLLs read fields: fixed-size copies are inlined, a libc call costs more than the read. */
    const uint8_t *src = last_page + off;
    switch (size) {
      case 8: memcpy(buf, src, 8); break;
      case 4: memcpy(buf, src, 4); break;
      case 2: memcpy(buf, src, 2); break;
      case 1: memcpy(buf, src, 1); break;
      default: memcpy(buf, src, (size_t)size);
    }
    return MQS_OK;
  }
  if (mqd_shim_read(process, addr, size, buf)) return MQS_OK;
  memset(buf, 0, (size_t)size);
  return MQS_NO_INFORMATION;
}

API int mqd_cb_get_global_rank(intptr_t process) {
  counters[C_RANK]++;
  slot_t *s = slot_of(process);
  return s ? s->rank : -1;
}

API intptr_t mqd_cb_get_image(intptr_t process) {
  counters[C_IMAGE]++;
  slot_t *s = slot_of(process);
  return s ? s->image : 0;
}

API void mqd_cb_target_to_host(intptr_t process, const void *in, void *out, int size) {
  (void)process;
  counters[C_T2H]++;
  /* Same byte order on this host: a plain copy. */
  if (in && out && size > 0) memcpy(out, in, (size_t)size);
}

API void mqd_cb_put_process_info(intptr_t process, uintptr_t info) {
  counters[C_PUT_PI]++;
  slot_t *s = slot_of(process);
  if (s) s->info = info;
}

API uintptr_t mqd_cb_get_process_info(intptr_t process) {
  counters[C_GET_PI]++;
  slot_t *s = slot_of(process);
  return s ? s->info : 0;
}

API void mqd_cb_put_image_info(intptr_t image, uintptr_t info) {
  counters[C_PUT_II]++;
  slot_t *s = slot_of(image);
  if (s) s->info = info;
}

API uintptr_t mqd_cb_get_image_info(intptr_t image) {
  counters[C_GET_II]++;
  slot_t *s = slot_of(image);
  return s ? s->info : 0;
}
