/* stall_target DLL [vfork] [read:PATH] [threads:N]: a rank of the conformance library with
 * threads that cannot take a ptrace interrupt, for test/stop-release.test.ts.
 *   vfork       a thread calls vfork(); the child says VFORK_CHILD pid=C and stops itself
 *               (SIGSTOP), so the thread waits in the kernel (wait_for_vfork_done, state D)
 *               until the child is continued; then it says VFORK_DONE.
 *   read:PATH   a thread reads PATH (a file of a FUSE server that does not answer: state D once
 *               interrupted); when the read returns it says READ_DONE n=BYTES.
 *   threads:N   N more threads with 64 KiB stacks, parked in pause().
 *   rootthread  (started as root) one more thread that keeps root's credentials while every
 *               other thread drops to uid/gid 65534 by itself (raw setresuid: Linux credentials
 *               are per thread), created last (put it after vfork): a reader as 65534
 *               seizes the others, then meets a thread it may not trace.
 * Says STALL_READY pid=P once every parked thread is parked and the others have started. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

void mqdtest_init(const char *dll, int mode, int my_rank);

static pthread_barrier_t parked;
static int drop_parked = 0;

/* This thread only becomes 65534 (glibc's setuid would change every thread). */
static void drop_self(void) {
  syscall(SYS_setgroups, 0, NULL);
  syscall(SYS_setresgid, 65534, 65534, 65534);
  syscall(SYS_setresuid, 65534, 65534, 65534);
}

static void say(const char *line) {
  /* write(2), not stdio: the vfork child shares this memory and may only make system calls. */
  ssize_t n = write(1, line, strlen(line));
  (void)n;
}

static void *vfork_thread(void *arg) {
  char line[64];
  if (drop_parked) drop_self();
  pid_t child = vfork();
  if (child == 0) {
    snprintf(line, sizeof line, "VFORK_CHILD pid=%d\n", (int)getpid());
    say(line);
    raise(SIGSTOP);
    _exit(0);
  }
  say("VFORK_DONE\n");
  waitpid(child, NULL, 0);
  for (;;) pause();
  return arg;
}

static void *read_thread(void *arg) {
  char buf[64], line[64];
  int fd = open((const char *)arg, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
  snprintf(line, sizeof line, "READ_DONE n=%d\n", (int)n);
  say(line);
  for (;;) pause();
  return arg;
}

static void *parked_thread(void *arg) {
  if (drop_parked) drop_self();
  pthread_barrier_wait(&parked);
  for (;;) pause();
  return arg;
}

static void *root_thread(void *arg) {
  for (;;) pause();
  return arg;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: stall_target DLL [vfork] [read:PATH] [threads:N]\n");
    return 2;
  }
  mqdtest_init(argv[1], 0, 0);
  int extra = 0;
  for (int i = 2; i < argc; i++)
    if (strncmp(argv[i], "threads:", 8) == 0) extra = atoi(argv[i] + 8);
    else if (strcmp(argv[i], "rootthread") == 0) drop_parked = 1;
  pthread_attr_t small;
  pthread_attr_init(&small);
  pthread_attr_setstacksize(&small, 64 * 1024);
  pthread_barrier_init(&parked, NULL, (unsigned)extra + 1);
  for (int i = 0; i < extra; i++) {
    pthread_t t;
    if (pthread_create(&t, &small, parked_thread, NULL) != 0) {
      fprintf(stderr, "pthread_create failed after %d threads\n", i);
      return 1;
    }
  }
  pthread_barrier_wait(&parked);
  for (int i = 2; i < argc; i++) {
    pthread_t t;
    if (strcmp(argv[i], "vfork") == 0) pthread_create(&t, &small, vfork_thread, NULL);
    else if (strncmp(argv[i], "read:", 5) == 0) pthread_create(&t, &small, read_thread, argv[i] + 5);
    else if (strcmp(argv[i], "rootthread") == 0) pthread_create(&t, &small, root_thread, NULL);
  }
  if (drop_parked) {
    drop_self();
    /* A credential change makes the process undumpable, which would refuse every thread. */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  }
  char line[64];
  snprintf(line, sizeof line, "STALL_READY pid=%d\n", (int)getpid());
  say(line);
  for (;;) pause();
}
