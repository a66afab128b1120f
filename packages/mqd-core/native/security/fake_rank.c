/* A process that looks like an MPI rank: maps libmpi.so.40 (fake_mpi.c), has a rank in its
   environment (set by the test), names argv[1] in MPIR_dll_name, prints READY, waits. */
#include <stdio.h>
#include <unistd.h>

void fake_mpi_init(const char *dll);

int main(int argc, char **argv) {
  fake_mpi_init(argc > 1 ? argv[1] : "");
  printf("FAKE_READY %d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
