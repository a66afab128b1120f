/* The target side: a stand-in for an MPI library, with MPIR_dll_name and the queues. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "mqdtest.h"

char MPIR_dll_name[4096] = "";
/* Open MPI's "preferred" way to name the DLL: a NULL-terminated array of candidate paths
   (NULL in Open MPI 4.1.4). Filled from MQDTEST_DLL_LOCATIONS (colon-separated), if set. */
char **mpimsgq_dll_locations = 0;
static char *locations[9];
static char locations_text[4096];
int mqdtest_mode = 0;
mqdtest_comm_t *mqdtest_comms = 0;
static int world_group[4] = {0, 1, 2, 3};
static int named_group[2] = {3, 1};
static mqdtest_comm_t comms[3];
static struct mqdtest_op ops[8];
static char buffers[8][64];

/* Where a debugger's find_function hint points: its unit holds every type above. */
void mqdtest_debugger_hint(void) {
  static volatile struct mqdtest_op o;
  static volatile mqdtest_comm_t c;
  (void)o;
  (void)c;
}

static struct mqdtest_op *op(int i, int tag, int rank, long len, int status) {
  struct mqdtest_op *o = &ops[i];
  o->match.parts.tag = tag;
  o->match.parts.rank = rank;
  o->length = len;
  o->buffer = buffers[i];
  o->status = status;
  o->next = 0;
  return o;
}

void mqdtest_init(const char *dll, int mode, int my_rank) {
  strncpy(MPIR_dll_name, dll, sizeof MPIR_dll_name - 1);
  const char *where = getenv("MQDTEST_DLL_LOCATIONS");
  if (where) {
    snprintf(locations_text, sizeof locations_text, "%s", where);
    int n = 0;
    for (char *tok = strtok(locations_text, ":"); tok && n < 8; tok = strtok(0, ":")) locations[n++] = tok;
    locations[n] = 0;
    mpimsgq_dll_locations = locations;
  }
  mqdtest_mode = mode;
  mqdtest_debugger_hint();
  /* MPI_COMM_WORLD: a send to rank+1 tag 42, then a wildcard receive (ANY_SOURCE = -1, ANY_TAG = -1)
     and a receive from 2 tag 7; one unexpected message from 3 tag 9. */
  mqdtest_comm_t *w = &comms[0];
  strcpy(w->name, "MPI_COMM_WORLD");
  w->id = 0; w->size = 4; w->rank = my_rank; w->group = world_group;
  w->queues[0] = op(0, 42, (my_rank + 1) % 4, 4, 0);
  w->queues[1] = op(1, -1, -1, 16, 0);
  w->queues[1]->next = op(2, 7, 2, 8, 1);
  w->queues[2] = op(3, 9, 3, 12, 0);
  /* A named two-rank communicator: world ranks 3 and 1, one receive from local 0 (world 3). */
  mqdtest_comm_t *n = &comms[1];
  memset(n->name, 'x', sizeof n->name); /* 64 bytes, no NUL: the DLL must cope */
  memcpy(n->name, "mqd_named", 9);
  n->name[9] = 0;
  n->id = 5; n->size = 2; n->rank = 1; n->group = named_group;
  n->queues[1] = op(4, 11, 0, 32, 0);
  /* MPI_COMM_NULL: size 0, never listed by the debugger. */
  mqdtest_comm_t *z = &comms[2];
  strcpy(z->name, "MPI_COMM_NULL");
  z->id = 2; z->size = 0; z->rank = -2;
  w->next = n; n->next = z; z->next = 0;
  if (mode == MQDTEST_RENAMED_WORLD) {
    /* MPI_Comm_set_name(MPI_COMM_WORLD, ...) is legal, and so is naming any communicator
       "MPI_COMM_WORLD": identity, not the name, says which is the world. */
    strcpy(w->name, "renamed_world");
    strcpy(n->name, "MPI_COMM_WORLD");
  }
  if (mode == MQDTEST_ODD_OPS) {
    ops[0].status = 1;   /* the send has matched: its actual fields count */
    ops[1].length = -1;  /* the wildcard receive's length is unknown */
  }
  if (mode == MQDTEST_CYCLE) ops[2].next = &ops[1]; /* a corrupt, cyclic receive queue */
  if (mode == MQDTEST_BADPTR) ops[2].next = (struct mqdtest_op *)0x10; /* unmapped */
  mqdtest_comms = w;
}
