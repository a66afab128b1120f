/* mqdtest_target DLL_PATH MODE RANK: sets up the queues, says READY, then waits forever. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "mqdtest.h"

void mqdtest_init(const char *dll, int mode, int my_rank);

/* The types are used here too, so a dwz multifile shares them between the two debug files. */
extern mqdtest_comm_t *mqdtest_comms;
volatile mqdtest_comm_t *mqdtest_seen;
volatile struct mqdtest_op *mqdtest_first_op;

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mqdtest_target DLL MODE RANK\n"); return 2; }
  mqdtest_init(argv[1], atoi(argv[2]), atoi(argv[3]));
  mqdtest_seen = mqdtest_comms;
  mqdtest_first_op = mqdtest_comms->queues[0];
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
