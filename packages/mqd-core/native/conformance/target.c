/* mqdtest_target DLL_PATH MODE RANK: sets up the queues, says READY, then waits forever. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <pthread.h>
#include "mqdtest.h"

void mqdtest_init(const char *dll, int mode, int my_rank);

/* The types are used here too, so a dwz multifile shares them between the two debug files. */
extern mqdtest_comm_t *mqdtest_comms;
volatile mqdtest_comm_t *mqdtest_seen;
volatile struct mqdtest_op *mqdtest_first_op;

/* Stack shapes for the unwinder tests (test/stacks.test.ts): MQDTEST_THREADS extra threads
 * parked in pause(), the main thread MQDTEST_DEPTH calls deep in mqdtest_deep. */
static pthread_barrier_t mqdtest_started;
static volatile int mqdtest_forever = 1;

static void *mqdtest_thread(void *arg) {
  pthread_barrier_wait(&mqdtest_started);
  for (;;) pause();
  return arg;
}

__attribute__((noinline)) int mqdtest_deep(int n) {
  if (n > 0) return mqdtest_deep(n - 1) + 1;
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
  while (mqdtest_forever) pause();
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mqdtest_target DLL MODE RANK\n"); return 2; }
  mqdtest_init(argv[1], atoi(argv[2]), atoi(argv[3]));
  mqdtest_seen = mqdtest_comms;
  mqdtest_first_op = mqdtest_comms->queues[0];
  const char *threads = getenv("MQDTEST_THREADS");
  const char *depth = getenv("MQDTEST_DEPTH");
  int nthreads = threads ? atoi(threads) : 0;
  if (nthreads > 0) {
    pthread_barrier_init(&mqdtest_started, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
      pthread_t t;
      pthread_create(&t, NULL, mqdtest_thread, NULL);
    }
    pthread_barrier_wait(&mqdtest_started);
  }
  if (depth) return mqdtest_deep(atoi(depth));
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
