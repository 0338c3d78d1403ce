/*
 * agree.h - "agree on failure": after a step that may fail on one rank,
 * every rank learns the worst status before the next collective step, so
 * that no rank waits in a collective the others skipped (Darshan's
 * allreduce after each step).  Statuses are SC_OK (0) or negative, so the
 * worst is the least, and a flag (1: fine here) agrees the same way.
 *
 * sc__agree_min is inline so that the Python extension, which links only
 * the public ABI, agrees with this one helper too (python/CMakeLists.txt).
 */
#ifndef SC_AGREE_H
#define SC_AGREE_H

#include <mpi.h>
#include <stdint.h>

#include "error.h"

/* The least of every rank's `mine` into *least: the worst status, or 1 only
   if every rank's flag is 1.  Collective; MPI's error code. */
static inline int sc__agree_min(MPI_Comm comm, int mine, int *least)
{
    *least = mine;
    return MPI_Allreduce(&mine, least, 1, MPI_INT, MPI_MIN, comm);
}

/*
 * Every rank's status `rc` of a step, agreed.  A rank that failed keeps its
 * own status and message; a rank that did not gets the worst status, and
 * err says "rank R: another rank <what> (STATUS)", `what` saying what
 * went wrong there ("could not find the source").  Collective.
 */
int sc__agree(MPI_Comm comm, int rc, const char *what, sc_error *err);

/* The least and the greatest of every rank's `v` (above INT_MIN: the
   greatest is found as the least of -v), in one reduction (a setting every
   rank must give alike: lo == hi).  Collective; MPI's code. */
int sc__agree_range(MPI_Comm comm, int v, int *lo, int *hi);

/* The same for n (at most 4) unsigned 64-bit values, in one reduction
   (the greatest as the least of ~v).  Collective; MPI's code. */
int sc__agree_range_u64(MPI_Comm comm, const uint64_t *v, int n, uint64_t *lo, uint64_t *hi);

#endif /* SC_AGREE_H */
