/* The attacker's "message-queue DLL": its constructor records who it runs as in EVIL_OUT (a
   path fixed at build time: the reader's environment is not the attacker's). It has no mqs_*
   entry points, so a reader that loads it answers with a coded error. Built with
   -DEVIL_ENV_OUT="/path" it also writes the environment it was given there, one variable a
   line: what a user's code learns of root's environment. */
#include <stdio.h>
#include <unistd.h>

extern char **environ;

#ifndef EVIL_OUT
#error "build with -DEVIL_OUT=\"/path\""
#endif

__attribute__((constructor)) static void evil(void) {
  FILE *f = fopen(EVIL_OUT, "a");
  if (!f) return;
  fprintf(f, "euid=%d uid=%d\n", (int)geteuid(), (int)getuid());
  fclose(f);
#ifdef EVIL_ENV_OUT
  FILE *e = fopen(EVIL_ENV_OUT, "w");
  if (!e) return;
  for (char **v = environ; *v; v++) fprintf(e, "%s\n", *v);
  fclose(e);
#endif
}
