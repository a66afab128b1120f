/* fakeompd_target DLL MODE RANK, FAKE_OMPD=path in the environment: a conformance "rank" whose
 * executable defines the OpenMP runtime's OMPD symbols itself, naming FAKE_OMPD (a libompd that
 * crashes or loops), for the supervision tests. No OpenMP runtime is involved. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void mqdtest_init(const char *dll, int mode, int my_rank);

const char **ompd_dll_locations = 0;
uint64_t ompd_state = 0;
static const char *locations[3];

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: FAKE_OMPD=path fakeompd_target DLL MODE RANK\n");
    return 2;
  }
  const char *fake = getenv("FAKE_OMPD");
  mqdtest_init(argv[1], 0, atoi(argv[3]));
  /* As LLVM's runtime does: a relative name first, then the absolute path. */
  locations[0] = "libompd.so";
  locations[1] = fake ? fake : "/nonexistent/libompd.so";
  locations[2] = 0;
  ompd_dll_locations = locations;
  ompd_state = 1;
  printf("MQDTEST_READY pid=%d\n", (int)getpid());
  fflush(stdout);
  for (;;) pause();
}
