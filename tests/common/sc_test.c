#include "sc_test.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void sc_test_fail(const char *file, int line, const char *call, int rc,
                  const sc_error *err)
{
    print_error("%s:%d: %s returned %s (%s)%s%s\n", file, line, call,
                sc_status_name(rc), sc_strerror(rc), err ? ": " : "",
                err ? err->msg : "");
    fail();
}

unsigned sc_test_cases(unsigned dflt)
{
    const char *s = getenv("SC_TEST_CASES");
    long v = s ? strtol(s, NULL, 10) : 0;
    return v > 0 ? (unsigned)v : dflt;
}

uint64_t sc_test_seed(void)
{
    static uint64_t seed;
    static int done;
    if (!done) {
        const char *s = getenv("SC_TEST_SEED");
        seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
        /* Ranks started a second apart read different clocks: rank 0's
         * seed is the job's (every rank makes this first call together). */
        int mpi = 0, over = 0;
        MPI_Initialized(&mpi);
        MPI_Finalized(&over);
        if (mpi && !over)
            MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        done = 1;
        fprintf(stderr, "# randomized with SC_TEST_SEED=%llu\n",
                (unsigned long long)seed);
    }
    return seed;
}
