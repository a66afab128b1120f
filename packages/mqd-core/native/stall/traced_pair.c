/* traced_pair: a child that asks to be traced (PTRACE_TRACEME) and stops itself, so it sits in a
 * tracing stop (State t, TracerPid = this parent) for as long as the parent lives: what a
 * leaked stop looks like, for test/tracing-stops.test.ts. Says PAIR tracer=P tracee=C. */
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  pid_t child = fork();
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    for (;;) pause();
  }
  int status;
  waitpid(child, &status, WUNTRACED); /* the child is in its tracing stop now */
  printf("PAIR tracer=%d tracee=%d\n", (int)getpid(), (int)child);
  fflush(stdout);
  for (;;) pause();
}
