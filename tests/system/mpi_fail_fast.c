/*
 * An MPI test whose assertion fails on one rank while the others wait in
 * a collective: run by test_mpi_fail_fast.sh, it must end the job at once
 * (the suite sets CMOCKA_TEST_ABORT=1 for MPI tests), never hang.
 */
#include "sc_test.h"

static int rank;

static void test_one_rank_fails_in_a_collective(void **state)
{
    (void)state;
    if (rank == 1)
        assert_int_equal(1, 2); /* fails: the job must end here */
    MPI_Barrier(MPI_COMM_WORLD); /* the others wait for rank 1 forever */
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_fails_in_a_collective),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return failed != 0;
}
