/* mqdtest_target DLL_PATH MODE RANK: sets up the queues, says READY, then waits forever. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "mqdtest.h"

void mqdtest_init(const char *dll, int mode, int my_rank);

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mqdtest_target DLL MODE RANK\n"); return 2; }
  mqdtest_init(argv[1], atoi(argv[2]), atoi(argv[3]));
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
