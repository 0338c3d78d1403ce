/*
 * attend.c - whether a window's atomics need their target inside MPI
 * (attend.h).
 *
 * On one host it depends on the window: osc/sm's atomics land in shared
 * memory, osc/pt2pt's wait for their target even there.  So it is tried
 * once: rank 1 leaves MPI and says so in its first word; rank 0, once it
 * reads that, swaps rank 1's second word from 0 to 1, as a claim would;
 * rank 1 watches the second without entering MPI and tells everyone
 * whether the swap came.  Where a read needs its target (pt2pt), rank 0
 * reads the first word only when rank 1 is back in MPI, after its watch,
 * so the swap cannot come in time however the ranks are scheduled.
 */
#include "attend.h"

#include <unistd.h>

#include "agree.h"
#include "clock.h"
#include "mpierr.h"
#include "node.h"

#define ATTEND_S 0.5 /* how long rank 1 watches, and rank 0 waits to read */

/* Rank 0: once rank 1 says it is out of MPI, swaps its other word as a claim would. */
static int attend_swap(MPI_Win win, MPI_Aint out, MPI_Aint swap, double until)
{
    uint32_t zero = 0, one = 1, got = 0;
    int m = MPI_SUCCESS;
    while (m == MPI_SUCCESS && !got && sc__clock_s() < until) {
        m = MPI_Fetch_and_op(&zero, &got, MPI_UINT32_T, 1, out, MPI_NO_OP, win);
        if (m == MPI_SUCCESS)
            m = MPI_Win_flush(1, win);
    }
    if (m == MPI_SUCCESS && got)
        m = MPI_Compare_and_swap(&one, &zero, &got, MPI_UINT32_T, 1, swap, win);
    if (m == MPI_SUCCESS && got)
        m = MPI_Win_flush(1, win);
    return m;
}

/* Rank 1: says it is out of MPI, then watches for rank 0's swap without entering MPI. */
static int attend_watch(uint32_t *base, MPI_Aint out, MPI_Aint swap, double until)
{
    __atomic_store_n(&base[out], 1u, __ATOMIC_RELEASE);
    while (sc__clock_s() < until) {
        if (__atomic_load_n(&base[swap], __ATOMIC_ACQUIRE) != 0)
            return 1;
        usleep(100);
    }
    return 0;
}

int sc__win_attended(MPI_Comm comm, MPI_Win win, uint32_t *base, MPI_Aint at, int *attended,
                     sc_error *err)
{
    int rank = 0, size = 1, local = 0;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    SC_MPI_CHECK(err, MPI_Comm_size(comm, &size));
    int one = sc__node_local(comm, NULL, &local, NULL) == SC_OK && local == size;
    SC_MPI_CHECK(err, MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_MIN, comm));
    *attended = !one;
    if (!one || size < 2)
        return SC_OK; /* alone, no other rank touches a word of this one's */
    int seen = 0, m = MPI_Barrier(comm);
    double until = sc__clock_s() + ATTEND_S;
    if (m == MPI_SUCCESS && rank == 0)
        m = attend_swap(win, at, at + 1, until);
    if (m == MPI_SUCCESS && rank == 1)
        seen = attend_watch(base, at, at + 1, until);
    int b = MPI_Bcast(&seen, 1, MPI_INT, 1, comm); /* every rank, whatever failed */
    m = m == MPI_SUCCESS ? b : m;
    *attended = !seen;
    int rc = m == MPI_SUCCESS ? SC_OK : sc__mpi_err(err, m, "a try of the window", __FILE__,
                                                    __LINE__);
    return sc__agree(comm, rc, "could not try the window", err);
}
