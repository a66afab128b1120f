/* fuse_stall MOUNTPOINT: a FUSE file system (the kernel protocol on /dev/fuse, no libfuse) with
 * one file, /stall, whose reads are answered only when a line arrives on stdin: a stand-in for
 * a stalled NFS or Lustre server, for test/stop-release.test.ts. Interrupts are ignored, so a
 * reader that a signal or a ptrace interrupt wakes stays in the kernel's killable wait (state D)
 * until the answer. Says FUSE_READY once the kernel's INIT is answered and FUSE_READ for each
 * read it holds. Needs root (mount); mounted allow_other so any user can read the file. Exits on
 * stdin's end; closing /dev/fuse then aborts the connection (pending reads fail with ENOTCONN). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static const char CONTENT[] = "stalled\n";

static void say(const char *line) {
  ssize_t n = write(1, line, strlen(line));
  (void)n;
}

static void reply(int fd, uint64_t unique, int error, const void *data, size_t size) {
  struct fuse_out_header h = {.len = (uint32_t)(sizeof h + size), .error = error, .unique = unique};
  struct iovec v[2] = {{&h, sizeof h}, {(void *)data, size}};
  ssize_t n = writev(fd, v, size > 0 ? 2 : 1);
  (void)n;
}

static void attr_of(uint64_t node, struct fuse_attr *a) {
  memset(a, 0, sizeof *a);
  a->ino = node;
  if (node == FUSE_ROOT_ID) {
    a->mode = S_IFDIR | 0755;
    a->nlink = 2;
  } else {
    a->mode = S_IFREG | 0444;
    a->nlink = 1;
    a->size = sizeof CONTENT - 1;
  }
  a->blksize = 4096;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuse_stall MOUNTPOINT\n");
    return 2;
  }
  int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    perror("/dev/fuse");
    return 1;
  }
  char opts[128];
  snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
  if (mount("fuse_stall", argv[1], "fuse", MS_NOSUID | MS_NODEV, opts) != 0) {
    perror("mount");
    return 1;
  }
  static char buf[FUSE_MIN_READ_BUFFER + 65536];
  uint64_t held[64];
  int nheld = 0;
  struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (p[1].revents) {
      char line[64];
      if (read(0, line, sizeof line) <= 0) return 0; /* the test is gone */
      for (int i = 0; i < nheld; i++) reply(fd, held[i], 0, CONTENT, sizeof CONTENT - 1);
      nheld = 0;
    }
    if (!(p[0].revents & POLLIN)) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == ENODEV) return 0; /* unmounted */
      continue;
    }
    if ((size_t)n < sizeof(struct fuse_in_header)) continue;
    struct fuse_in_header *in = (struct fuse_in_header *)buf;
    const void *arg = in + 1;
    switch (in->opcode) {
      case FUSE_INIT: {
        const struct fuse_init_in *ii = arg;
        struct fuse_init_out o;
        memset(&o, 0, sizeof o);
        o.major = FUSE_KERNEL_VERSION;
        o.minor = FUSE_KERNEL_MINOR_VERSION;
        o.max_readahead = ii->max_readahead;
        o.max_write = 4096;
        reply(fd, in->unique, 0, &o, sizeof o);
        say("FUSE_READY\n");
        break;
      }
      case FUSE_LOOKUP: {
        if (in->nodeid != FUSE_ROOT_ID || strcmp((const char *)arg, "stall") != 0) {
          reply(fd, in->unique, -ENOENT, NULL, 0);
          break;
        }
        struct fuse_entry_out e;
        memset(&e, 0, sizeof e);
        e.nodeid = 2;
        e.generation = 1;
        attr_of(2, &e.attr);
        reply(fd, in->unique, 0, &e, sizeof e);
        break;
      }
      case FUSE_GETATTR: {
        struct fuse_attr_out a;
        memset(&a, 0, sizeof a);
        attr_of(in->nodeid, &a.attr);
        reply(fd, in->unique, 0, &a, sizeof a);
        break;
      }
      case FUSE_OPEN: {
        struct fuse_open_out o;
        memset(&o, 0, sizeof o);
        o.fh = 1;
        o.open_flags = FOPEN_DIRECT_IO; /* every read comes here, none from the page cache */
        reply(fd, in->unique, 0, &o, sizeof o);
        break;
      }
      case FUSE_READ:
        if (nheld < 64) held[nheld++] = in->unique;
        say("FUSE_READ\n");
        break;
      case FUSE_INTERRUPT:
      case FUSE_FORGET:
      case FUSE_BATCH_FORGET:
        break; /* no reply: an interrupt is ignored, a forget has none */
      case FUSE_FLUSH:
      case FUSE_RELEASE:
        reply(fd, in->unique, 0, NULL, 0);
        break;
      case FUSE_DESTROY:
        reply(fd, in->unique, 0, NULL, 0);
        return 0;
      default:
        reply(fd, in->unique, -ENOSYS, NULL, 0);
    }
  }
}
