/* omptest_target DLL MODE RANK: a conformance "rank" (libmpi_mqdtest: MPIR_dll_name and queues)
 * that runs OpenMP on LLVM's runtime and parks in a known shape, for test/ompd.test.ts.
 *   1 (single): 4 threads; the thread in `omp single` blocked in pause(), teammates at its barrier.
 *   2 (lock):   2 threads deadlocked on two omp_lock_t (each holds one, waits for the other).
 *   3 (task):   2 threads; an explicit task blocked in pause(), the other thread at the barrier.
 * Prints MQDTEST_READY once the blocking thread is in place; the test then waits until every
 * thread sleeps (OMP_WAIT_POLICY=passive, KMP_LOCK_KIND=futex). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void mqdtest_init(const char *dll, int mode, int my_rank);

static omp_lock_t lock_a, lock_b;
static volatile int holders = 0;

__attribute__((noinline)) static void omptest_ready(void) {
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
}

__attribute__((noinline)) void omptest_blocked(void) {
  omptest_ready();
  for (;;) pause();
}

__attribute__((noinline)) void omptest_task_body(void) {
  omptest_ready();
  for (;;) pause();
}

static void run_single(void) {
#pragma omp parallel num_threads(4)
  {
#pragma omp single
    omptest_blocked();
  }
}

static void run_lock(void) {
  omp_init_lock(&lock_a);
  omp_init_lock(&lock_b);
#pragma omp parallel num_threads(2)
  {
    int me = omp_get_thread_num();
    omp_lock_t *first = me == 0 ? &lock_a : &lock_b;
    omp_lock_t *second = me == 0 ? &lock_b : &lock_a;
    omp_set_lock(first);
    __atomic_add_fetch(&holders, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&holders, __ATOMIC_SEQ_CST) < 2) {
    }
    if (me == 0) omptest_ready();
    omp_set_lock(second);
  }
}

static void run_task(void) {
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {
#pragma omp task
      omptest_task_body();
#pragma omp taskwait
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: omptest_target DLL MODE RANK\n");
    return 2;
  }
  mqdtest_init(argv[1], 0, atoi(argv[3]));
  int mode = atoi(argv[2]);
  if (mode == 1) run_single();
  else if (mode == 2) run_lock();
  else if (mode == 3) run_task();
  else {
    fprintf(stderr, "unknown mode %d\n", mode);
    return 2;
  }
  return 0;
}
