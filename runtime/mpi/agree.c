/*
 * agree.c - every rank's status of a step, agreed (agree.h).
 */
#include "agree.h"

#include <limits.h>

#include "invariant.h"
#include "mpierr.h"

int sc__agree(MPI_Comm comm, int rc, const char *what, sc_error *err)
{
    int worst = rc, rank = 0;
    MPI_Comm_rank(comm, &rank);
    SC_MPI_CHECK(err, sc__agree_min(comm, rc, &worst));
    if (rc == SC_OK && worst != SC_OK)
        return sc__seterr(err, worst, "rank %d: another rank %s (%s)", rank, what,
                          sc_status_name(worst));
    return rc;
}

int sc__agree_range(MPI_Comm comm, int v, int *lo, int *hi)
{
    SC__ASSERT(v > INT_MIN);
    int mine[2] = {v, -v}, job[2] = {v, -v};
    int e = MPI_Allreduce(mine, job, 2, MPI_INT, MPI_MIN, comm);
    *lo = job[0];
    *hi = -job[1];
    return e;
}
