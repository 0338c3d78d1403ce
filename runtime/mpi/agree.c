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

int sc__agree_range_u64(MPI_Comm comm, const uint64_t *v, int n, uint64_t *lo, uint64_t *hi)
{
    SC__ASSERT(n >= 1 && n <= 4);
    uint64_t mine[8] = {0}, job[8] = {0};
    for (int i = 0; i < n; i++)
        mine[i] = v[i], mine[n + i] = ~v[i];
    int e = MPI_Allreduce(mine, job, 2 * n, MPI_UINT64_T, MPI_MIN, comm);
    for (int i = 0; i < n; i++)
        lo[i] = job[i], hi[i] = ~job[n + i];
    return e;
}
