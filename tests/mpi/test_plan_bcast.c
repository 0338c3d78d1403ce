/*
 * The plan broadcast under mpiexec -n 1, 2 and 4: every rank ends with the
 * same plan, two epochs can be in flight at once, and every kind of
 * disagreement (a rank with its own seed, a wrong world size, another
 * dataset, a corrupted message, a rank 0 that cannot plan) fails with
 * SC_EPLAN or SC_EFORMAT on the rank that sees it, naming rank and epoch,
 * and never hangs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_bcast.h"
#include "plan_state.h"
#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static uint64_t sizes[997];

static sc_plan_params params(uint64_t epoch, sc_shuffle_mode mode)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    for (int i = 0; i < 997; i++)
        sizes[i] = 100 + (uint64_t)(i % 13);
    p.shard_sizes = sizes;
    p.nshards = 997;
    p.world_size = (uint32_t)size;
    p.seed = 2024;
    p.epoch = epoch;
    p.batch_size = 16;
    p.mode = mode;
    p.exchange = 0.2;
    p.fingerprint = 0x5eed;
    return p;
}

/* 1 when every rank passes the same value. */
static int all_same(uint64_t v)
{
    uint64_t in[2] = {v, ~v}, out[2];
    MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return out[0] == v && out[1] == ~v;
}

static void test_share_epochs(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        sc_plan *prev = NULL;
        for (uint64_t e = 0; e < 4; e++) {
            sc_plan_params p = params(e, m ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL);
            sc_plan *plan = NULL;
            sc_error err;
            SC_ASSERT_OK(sc_plan_share(MPI_COMM_WORLD, &p, prev, &plan, &err), &err);
            assert_true(all_same(plan->info.hash));
            /* Every rank can check it, against the same sticky history. */
            SC_ASSERT_OK(sc_plan_check(plan, &p, prev, &err), &err);
            sc_plan_free(prev);
            prev = plan;
        }
        sc_plan_free(prev);
    }
}

/* The plan for e+1 is posted before e is finished: both arrive intact. */
static void test_two_epochs_in_flight(void **state)
{
    (void)state;
    sc_plan_params p0 = params(10, SC_SHUFFLE_GLOBAL), p1 = params(11, SC_SHUFFLE_GLOBAL);
    sc_plan *mine0 = NULL, *mine1 = NULL, *got0 = NULL, *got1 = NULL;
    sc_error err;
    sc__plan_bcast b0, b1;
    if (rank == 0) {
        SC_ASSERT_OK(sc_plan_create(&p0, NULL, &mine0, &err), &err);
        SC_ASSERT_OK(sc_plan_create(&p1, NULL, &mine1, &err), &err);
    }
    /* Two in flight: headers and payloads on their own communicators. */
    MPI_Comm heads, data;
    MPI_Comm_dup(MPI_COMM_WORLD, &heads);
    MPI_Comm_dup(MPI_COMM_WORLD, &data);
    SC_ASSERT_OK(sc__plan_bcast_start(&b0, NULL, heads, data, 0, mine0, SC_OK, 10, &err), &err);
    SC_ASSERT_OK(sc__plan_bcast_start(&b1, &b0, heads, data, 0, mine1, SC_OK, 11, &err), &err);
    /* Progress both without blocking for a while, as a training loop would;
       the later one first, which must not let its payload overtake. */
    for (int i = 0; i < 100; i++) {
        int d0 = 0, d1 = 0;
        SC_ASSERT_OK(sc__plan_bcast_test(&b1, &d1, &err), &err);
        SC_ASSERT_OK(sc__plan_bcast_test(&b0, &d0, &err), &err);
        if (d0 && d1)
            break;
    }
    /* Finished out of order on purpose: payloads still pair up. */
    SC_ASSERT_OK(sc__plan_bcast_finish(&b1, &p1, &got1, &err), &err);
    SC_ASSERT_OK(sc__plan_bcast_finish(&b0, &p0, &got0, &err), &err);
    const sc_plan *a = rank == 0 ? mine0 : got0, *b = rank == 0 ? mine1 : got1;
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->info.epoch, 10);
    assert_int_equal(b->info.epoch, 11);
    /* Each rank recomputes: the broadcast plan is the deterministic one. */
    sc_plan *local = NULL;
    SC_ASSERT_OK(sc_plan_create(&p1, NULL, &local, &err), &err);
    assert_int_equal(local->info.hash, b->info.hash);
    sc_plan_free(local);
    sc_plan_free(mine0);
    sc_plan_free(mine1);
    sc_plan_free(got0);
    sc_plan_free(got1);
    MPI_Comm_free(&heads);
    MPI_Comm_free(&data);
}

/*
 * Expect `code` on rank `bad` (or on every rank when bad < 0) with all the
 * words in the message, and SC_OK elsewhere.
 */
static void expect_on(int bad, int rc, const sc_error *err, int code,
                      const char *w1, const char *w2)
{
    if (bad < 0 || rank == bad) {
        if (rc != code || !strstr(err->msg, w1) || !strstr(err->msg, w2))
            print_error("rank %d: got %s '%s', want %s with '%s' and '%s'\n",
                        rank, sc_status_name(rc), err->msg, sc_status_name(code),
                        w1, w2);
        assert_int_equal(rc, code);
        assert_non_null(strstr(err->msg, w1));
        assert_non_null(strstr(err->msg, w2));
    } else {
        SC_ASSERT_OK(rc, err);
    }
}

/* The classic bug: one rank shuffles with its own seed. */
static void test_rank_with_its_own_seed_is_caught(void **state)
{
    (void)state;
    int bad = size - 1;
    sc_plan_params p = params(3, SC_SHUFFLE_GLOBAL);
    sc_plan *plan = NULL, *local = NULL;
    sc_error err = SC_ERROR_INIT;
    if (rank == bad)
        p.seed += 1;
    /* Its own plan really differs from the one the job uses... */
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &local, &err), &err);
    uint64_t h = local->info.hash;
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (size > 1)
        assert_true(lo != hi);
    sc_plan_free(local);

    /* ...and the broadcast catches it on that rank, naming rank and epoch. */
    char want[64];
    snprintf(want, sizeof want, "rank %d: plan for epoch 3", bad);
    if (size == 1) {
        /* Alone, rank 0 plans with its own seed; check it against the job's. */
        sc__plan_bcast b;
        sc_plan *mine = NULL, *got = NULL;
        SC_ASSERT_OK(sc_plan_create(&p, NULL, &mine, &err), &err);
        sc_plan_params job = p;
        job.seed += 1;
        SC_ASSERT_OK(sc__plan_bcast_start(&b, NULL, MPI_COMM_WORLD, MPI_COMM_WORLD, 0, mine, SC_OK, 3, &err), &err);
        int rc = sc__plan_bcast_finish(&b, &job, &got, &err);
        expect_on(0, rc, &err, SC_EPLAN, want, "seed 2025, this rank expects 2026");
        sc_plan_free(mine);
        return;
    }
    int rc = sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err);
    expect_on(bad, rc, &err, SC_EPLAN, want, "seed 2024, this rank expects 2025");
    sc_plan_free(plan);
}

static void test_world_size_mismatch(void **state)
{
    (void)state;
    sc_plan_params p = params(4, SC_SHUFFLE_GLOBAL);
    p.world_size = (uint32_t)size + 1;
    sc_plan *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err);
    char want[64];
    snprintf(want, sizeof want, "rank %d: epoch 4", rank);
    expect_on(-1, rc, &err, SC_EPLAN, want, "configured for");
    assert_null(plan);
}

static void test_fingerprint_mismatch(void **state)
{
    (void)state;
    int bad = size > 1 ? 1 : 0;
    sc_plan_params p = params(5, SC_SHUFFLE_STICKY);
    sc_plan *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    if (size == 1) {
        /* Alone there is nobody to disagree with; covered by np 2 and 4. */
        SC_ASSERT_OK(sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err), &err);
        sc_plan_free(plan);
        return;
    }
    if (rank == bad)
        p.fingerprint ^= 1;
    int rc = sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err);
    expect_on(bad, rc, &err, SC_EPLAN, "rank 1: plan for epoch 5",
              "dataset fingerprint");
    sc_plan_free(plan);
}

/* Rank 0 cannot plan: every rank fails, none waits for a payload. */
static void test_root_failure_reaches_everyone(void **state)
{
    (void)state;
    sc_plan_params p = params(6, SC_SHUFFLE_GLOBAL);
    p.batch_size = 0;
    sc_plan *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err);
    if (rank == 0)
        expect_on(0, rc, &err, SC_EINVAL, "epoch 6", "batch size is 0");
    else
        expect_on(rank, rc, &err, SC_EPLAN, "rank 0 could not compute", "epoch 6");
    assert_null(plan);
}

/* A corrupted message is refused by its receivers, not trusted. */
static void test_corrupted_payload(void **state)
{
    (void)state;
    sc_plan_params p = params(7, SC_SHUFFLE_GLOBAL);
    sc_plan *mine = NULL, *got = NULL;
    sc_error err = SC_ERROR_INIT;
    sc__plan_bcast b;
    if (rank == 0) {
        SC_ASSERT_OK(sc_plan_create(&p, NULL, &mine, &err), &err);
        mine->wire[mine->wire_len / 2] ^= 0x40; /* a bit flipped in flight */
    }
    SC_ASSERT_OK(sc__plan_bcast_start(&b, NULL, MPI_COMM_WORLD, MPI_COMM_WORLD, 0, mine, SC_OK, 7, &err), &err);
    int rc = sc__plan_bcast_finish(&b, &p, &got, &err);
    if (rank != 0) {
        char want[64];
        snprintf(want, sizeof want, "rank %d: plan for epoch 7 from rank 0", rank);
        expect_on(rank, rc, &err, SC_EFORMAT, want, "corrupted");
        assert_null(got);
    }
    sc_plan_free(mine);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_epochs),
        cmocka_unit_test(test_two_epochs_in_flight),
        cmocka_unit_test(test_rank_with_its_own_seed_is_caught),
        cmocka_unit_test(test_world_size_mismatch),
        cmocka_unit_test(test_fingerprint_mismatch),
        cmocka_unit_test(test_root_failure_reaches_everyone),
        cmocka_unit_test(test_corrupted_payload),
    };
    /* One rank's failure fails the job, even if the others passed. */
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), NULL);
}
