/* A fake MPI starter: publishes an MPIR process table listing whatever pids it is given
   (argv[1..]) on this host, as user memory can, prints READY and waits (security tests). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
  char *host_name;
  char *executable_name;
  int pid;
} MPIR_PROCDESC;

MPIR_PROCDESC *MPIR_proctable = 0;
int MPIR_proctable_size = 0;
volatile int MPIR_debug_state = 0;
volatile int MPIR_being_debugged = 0;
void MPIR_Breakpoint(void) {}

int main(int argc, char **argv) {
  int n = argc - 1;
  MPIR_proctable = calloc(n > 0 ? n : 1, sizeof *MPIR_proctable);
  for (int i = 0; i < n; i++) {
    MPIR_proctable[i].host_name = "localhost";
    MPIR_proctable[i].executable_name = "fake_rank";
    MPIR_proctable[i].pid = atoi(argv[i + 1]);
  }
  MPIR_proctable_size = n;
  MPIR_debug_state = 1;
  MPIR_Breakpoint();
  printf("FAKE_READY %d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
