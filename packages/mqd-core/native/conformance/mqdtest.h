/* The "MPI-like" library the conformance DLL reads: a few communicators, each with three
 * singly linked queues of operations. Shared by libmpi_mqdtest.so (the target's data) and
 * the DLL only by name: the DLL learns every offset through the debugger's callbacks. */
#ifndef MQDTEST_H
#define MQDTEST_H

typedef union mqdtest_match {
  struct mqdtest_match_parts { int tag; int rank; } parts; /* a union member: no data_member_location */
  long whole;
} mqdtest_match_t;

struct mqdtest_op {
  struct mqdtest_op *next;
  mqdtest_match_t match;
  long length;
  void *buffer;
  int status;
  int system_buffer;
};

typedef struct mqdtest_comm {
  struct mqdtest_comm *next;
  char name[64];
  long id;
  int size;
  int rank;
  int *group;
  struct mqdtest_op *queues[3]; /* sends, receives, unexpected */
  struct {                      /* an anonymous member: fields found inside it */
    int anon_flag;
  };
} mqdtest_comm_t;

/* Modes the target can ask the DLL to misbehave in (read by the DLL through fetch_data). */
enum {
  MQDTEST_OK = 0,
  MQDTEST_SEGV = 1,
  MQDTEST_ABORT = 2,
  MQDTEST_LOOP = 3,
  MQDTEST_CYCLE = 4,
  MQDTEST_BADPTR = 5,
  MQDTEST_NOQUEUES = 6,
  MQDTEST_NO_UNEXPECTED = 7,
  /* Interface corners: DLL errors in the walk, and data the real libraries rarely show. */
  MQDTEST_FAIL_GET_COMM = 8,   /* mqs_get_communicator fails on the second communicator */
  MQDTEST_FAIL_NEXT_COMM = 9,  /* mqs_next_communicator fails after the first */
  MQDTEST_FAIL_SETUP_OPS = 10, /* mqs_setup_operation_iterator(receives) fails with a DLL error */
  MQDTEST_FAIL_SETUP_COMMS = 11, /* mqs_setup_communicator_iterator fails with a DLL error */
  MQDTEST_RENAMED_WORLD = 12,  /* the world renamed; the two-rank communicator named "MPI_COMM_WORLD" */
  MQDTEST_ODD_OPS = 13         /* a matched send (actual fields) and a receive of unknown length */
};

#endif
