/*
 * node.h - where a rank sits: its node's ranks.
 *
 * Ranks that share a node share its local disk (one cache directory each,
 * read by all of them) and its page cache.  This module finds them (the
 * collective halves of sc_dataset_open and sc_cache_open, which use it,
 * are open.c's).
 */
#ifndef SC_NODE_H
#define SC_NODE_H

#include <mpi.h>

#include "error.h"

/*
 * This rank's index among the ranks sharing its node, and their number
 * (either may be NULL).  Collective over comm.
 */
int sc__node_local(MPI_Comm comm, int *local_rank, int *local_size, sc_error *err);

/*
 * Compares a fixed-size identity (`bytes`, NUL-terminated: a GPU's PCI bus
 * id) across the ranks of this node: *distinct is how many different ones
 * they hold, *twin the lowest rank of comm (not this one) holding this
 * rank's, or -1.  An empty id is none: neither counted nor matched.
 * Collective over comm.
 */
int sc__node_same(MPI_Comm comm, const char *id, int bytes, int *distinct, int *twin,
                  sc_error *err);

/*
 * Every rank's node, as the lowest rank of comm on it: node_of[size].
 * Collective over comm.
 */
int sc__node_ids(MPI_Comm comm, int *node_of, sc_error *err);

/*
 * How many ranks of this node (this one included) may run on a core of
 * `mask` (an affinity mask of `bytes` bytes): their masks intersect it.
 * Collective over comm.
 */
int sc__node_overlap(MPI_Comm comm, const void *mask, int bytes, int *sharers, sc_error *err);

#endif /* SC_NODE_H */
