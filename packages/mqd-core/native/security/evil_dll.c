/* The attacker's "message-queue DLL": its constructor records who it runs as in EVIL_OUT (a
   path fixed at build time: the reader's environment is not the attacker's). It has no mqs_*
   entry points, so a reader that loads it answers with a coded error. */
#include <stdio.h>
#include <unistd.h>

#ifndef EVIL_OUT
#error "build with -DEVIL_OUT=\"/path\""
#endif

__attribute__((constructor)) static void evil(void) {
  FILE *f = fopen(EVIL_OUT, "a");
  if (!f) return;
  fprintf(f, "euid=%d uid=%d\n", (int)geteuid(), (int)getuid());
  fclose(f);
}
