/*
 * The ownership ledger under mpiexec -n 1, 2 and 4: a clean epoch verifies
 * exactly-once without any rank waiting; conflicting claims are caught
 * naming epoch, shard and owner; a batch with a foreign sample is refused;
 * SC_VERIFY=full names duplicated and skipped samples; a rank stopped on
 * a bad sample is named, with its epoch and policy, in the verdicts of
 * that epoch and of one it never ran; a rank may run
 * epochs ahead up to the lookahead bound; all of it across the owner
 * words' epoch-tag wrap.
 */
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "plan_state.h"
#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
enum { NSH = 40, PER = 5 };
static uint64_t sizes[NSH], first[NSH + 1];

static sc_plan *plan_for(uint64_t epoch, uint64_t seed)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = NSH;
    p.world_size = (uint32_t)size;
    p.seed = seed;
    p.epoch = epoch;
    p.batch_size = 1;
    sc_plan *plan = NULL;
    sc_error err;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &plan, &err), &err);
    return plan;
}

/* Delivers every sample of this rank's shards, once (or as `twist` says). */
static void deliver(sc__ledger *l, const sc_plan *plan, int dup_first, int skip_last)
{
    const uint32_t *mine;
    uint64_t n;
    sc_error err;
    sc_plan_rank(plan, (uint32_t)rank, &mine, &n, NULL);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ids[PER];
        for (int k = 0; k < PER; k++)
            ids[k] = first[mine[i]] + (uint64_t)k;
        uint64_t cnt = skip_last && i == n - 1 ? PER - 1 : PER;
        SC_ASSERT_OK(sc__ledger_check(l, plan->info.epoch, ids, cnt, &err), &err);
        SC_ASSERT_OK(sc__ledger_consume(l, plan->info.epoch, ids, cnt, 0, &err), &err);
        if (dup_first && i == 0)
            SC_ASSERT_OK(sc__ledger_consume(l, plan->info.epoch, ids, 1, 0, &err), &err);
    }
}

static void test_clean_epochs_verify(void **state)
{
    (void)state;
    sc__ledger *l;
    sc_error err;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    sc_plan *plans[3];
    for (uint64_t e = 0; e < 3; e++) {
        plans[e] = plan_for(e, 5);
        SC_ASSERT_OK(sc__ledger_begin(l, plans[e], &err), &err);
        deliver(l, plans[e], 0, 0);
        SC_ASSERT_OK(sc__ledger_end(l, e, &err), &err);
    }
    for (uint64_t e = 0; e < 3; e++) {
        sc_exactly_once v;
        SC_ASSERT_OK(sc__ledger_result(l, e, 1, &v, &err), &err);
        assert_true(v.verified);
        if (!v.ok)
            print_error("epoch %llu: %s\n", (unsigned long long)e, v.detail);
        assert_true(v.ok);
        assert_int_equal(v.samples, NSH * PER);
        assert_int_equal(v.delivered, NSH * PER);
        sc_plan_free(plans[e]);
    }
    sc__ledger_close(l);
}

/*
 * Rank 0 stops on sample 7 in epoch e and abandons e and e + 1 (whose plan
 * the others have); the others run both.  Epoch e's verdict names the
 * rank, sample and epoch; e + 1's says it cannot be verified because of
 * that stop; both name the policy it stopped under (under skip: nothing
 * could replace the sample; it said "SC_BAD_SAMPLE=error" under skip too).
 */
static void test_stop_names_epoch_and_policy(void **state)
{
    (void)state;
    sc__ledger *l;
    sc_error err;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    for (int skip = 0; skip < 2; skip++) {
        uint64_t e = 2 * (uint64_t)skip;
        sc__ledger_stopped why = {.sample = 7, .epoch = e, .skip = skip};
        for (uint64_t k = e; k < e + 2; k++) {
            sc_plan *plan = plan_for(k, 5);
            if (rank == 0) {
                SC_ASSERT_OK(sc__ledger_stop(l, k, &why, &err), &err);
            } else {
                SC_ASSERT_OK(sc__ledger_begin(l, plan, &err), &err);
                deliver(l, plan, 0, 0);
                SC_ASSERT_OK(sc__ledger_end(l, k, &err), &err);
            }
            sc_plan_free(plan);
        }
        for (uint64_t k = e; k < e + 2; k++) {
            sc_exactly_once v;
            char want[160];
            SC_ASSERT_OK(sc__ledger_result(l, k, 1, &v, &err), &err);
            assert_true(v.verified && !v.ok);
            assert_int_equal(v.stopped, 1);
            assert_int_equal(v.stopped_rank, 0);
            assert_int_equal(v.stopped_sample, 7);
            int at = k == e ? 0 : snprintf(want, sizeof want, "epoch %llu cannot be verified: ",
                                           (unsigned long long)k);
            snprintf(want + at, sizeof want - (size_t)at, "rank 0 stopped in epoch %llu on "
                     "sample 7", (unsigned long long)e);
            const char *policy = skip ? "SC_BAD_SAMPLE=skip, and no other sample of its shard "
                                        "could take its place"
                                      : "SC_BAD_SAMPLE=error; SC_BAD_SAMPLE=skip replaces";
            if (strncmp(v.detail, want, strlen(want)) || !strstr(v.detail, policy) ||
                (skip && strstr(v.detail, "=error")))
                fail_msg("epoch %llu: '%s' (wanted '%s', '%s')", (unsigned long long)k, v.detail,
                         want, policy);
        }
    }
    sc__ledger_close(l);
}

/* Two ranks with different plans: whoever claims second is refused. */
static void test_conflicting_claims(void **state)
{
    (void)state;
    if (size == 1)
        skip();
    sc__ledger *l;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    /* Rank 1 shuffles with its own seed, the classic bug. */
    sc_plan *plan = plan_for(0, rank == 1 ? 99 : 5);
    /* Everyone else claims first, so that rank 1 is the one to notice. */
    int rc = SC_OK;
    if (rank != 1)
        rc = sc__ledger_begin(l, plan, &err);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        rc = sc__ledger_begin(l, plan, &err);
    if (rank == 1) {
        if (rc != SC_EOWNERSHIP || !strstr(err.msg, "epoch 0: shard") ||
            !strstr(err.msg, "claimed by rank 1 is already owned by rank"))
            print_error("rank 1: %s %s\n", sc_status_name(rc), err.msg);
        assert_int_equal(rc, SC_EOWNERSHIP);
        assert_non_null(strstr(err.msg, "claimed by rank 1 is already owned by rank"));
    } else {
        SC_ASSERT_OK(rc, &err);
    }
    /* Everyone still closes the epoch; the verdict is not ok anywhere. */
    if (rc == SC_OK) {
        deliver(l, plan, 0, 0);
        SC_ASSERT_OK(sc__ledger_end(l, 0, &err), &err);
    } else {
        SC_ASSERT_OK(sc__ledger_abandon(l, 0, UINT64_MAX, &err), &err);
    }
    sc_exactly_once v;
    SC_ASSERT_OK(sc__ledger_result(l, 0, 1, &v, &err), &err);
    assert_true(v.verified);
    assert_false(v.ok);
    assert_non_null(strstr(v.detail, "abandoned"));
    sc_plan_free(plan);
    sc__ledger_close(l);
}

static void test_foreign_sample_refused(void **state)
{
    (void)state;
    sc__ledger *l;
    sc_error err;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    sc_plan *plan = plan_for(4, 5);
    SC_ASSERT_OK(sc__ledger_begin(l, plan, &err), &err);
    uint32_t owner = 0;
    uint64_t foreign = UINT64_MAX;
    for (uint64_t s = 0; s < NSH && foreign == UINT64_MAX; s++) {
        sc_plan_owner(plan, s, &owner);
        if (owner != (uint32_t)rank)
            foreign = first[s] + 2;
    }
    if (foreign != UINT64_MAX) {
        char want[128];
        snprintf(want, sizeof want, "epoch 4: sample %llu (shard %llu) delivered on rank %d "
                 "is owned by rank %u", (unsigned long long)foreign,
                 (unsigned long long)(foreign / PER), rank, owner);
        SC_ASSERT_RC(sc__ledger_check(l, 4, &foreign, 1, &err), SC_EOWNERSHIP, &err);
        if (!strstr(err.msg, want))
            print_error("'%s' lacks '%s'\n", err.msg, want);
        assert_non_null(strstr(err.msg, want));
    }
    uint64_t outside = NSH * PER + 3;
    SC_ASSERT_RC(sc__ledger_check(l, 4, &outside, 1, &err), SC_EOWNERSHIP, &err);
    assert_non_null(strstr(err.msg, "outside the dataset"));
    SC_ASSERT_RC(sc__ledger_check(l, 5, &outside, 1, &err), SC_EOWNERSHIP, &err);
    assert_non_null(strstr(err.msg, "has not begun"));
    deliver(l, plan, 0, 0);
    SC_ASSERT_OK(sc__ledger_end(l, 4, &err), &err);
    sc_exactly_once v;
    SC_ASSERT_OK(sc__ledger_result(l, 4, 1, &v, &err), &err);
    assert_true(v.ok);
    sc_plan_free(plan);
    sc__ledger_close(l);
}

/* Sketch and full mode both see a duplicate and a skip on the last rank. */
static void test_duplicate_and_skip_found(void **state)
{
    (void)state;
    for (int full = 0; full < 2; full++) {
        sc__ledger_opts o = {full, NULL};
        sc__ledger *l;
        sc_error err;
        SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, &o, &l, &err), &err);
        sc_plan *plan = plan_for(7, 5);
        SC_ASSERT_OK(sc__ledger_begin(l, plan, &err), &err);
        int last = rank == size - 1;
        deliver(l, plan, last, last);
        SC_ASSERT_OK(sc__ledger_end(l, 7, &err), &err);
        sc_exactly_once v;
        SC_ASSERT_OK(sc__ledger_result(l, 7, 1, &v, &err), &err);
        assert_true(v.verified);
        assert_false(v.ok);
        assert_int_equal(v.full, full);
        if (full) {
            assert_int_equal(v.duplicated, 1);
            assert_int_equal(v.skipped, 1);
            assert_non_null(strstr(v.detail, " x2"));
            assert_non_null(strstr(v.detail, " x0"));
        } else {
            /* One extra, one missing: the count balances, the hashes do not. */
            assert_non_null(strstr(v.detail, "as many duplicated as skipped"));
        }
        sc_plan_free(plan);
        sc__ledger_close(l);
    }
}

/* A rank may be several epochs ahead; the bound makes it wait, not fail. */
static void test_run_ahead_within_bound(void **state)
{
    (void)state;
    sc__ledger *l;
    sc_error err;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    sc_plan *plans[5];
    for (uint64_t e = 0; e < 5; e++) {
        plans[e] = plan_for(e, 11);
        SC_ASSERT_OK(sc__ledger_begin(l, plans[e], &err), &err);
        deliver(l, plans[e], 0, 0);
        SC_ASSERT_OK(sc__ledger_end(l, e, &err), &err);
        /* Rank 0 is slow: it reads nothing until the end. */
        if (rank != 0 && e > 0) {
            sc_exactly_once v;
            SC_ASSERT_OK(sc__ledger_result(l, e - 1, 0, &v, &err), &err);
            if (v.verified)
                assert_true(v.ok);
        }
    }
    for (uint64_t e = 0; e < 5; e++) {
        sc_exactly_once v;
        int rc = sc__ledger_result(l, e, 1, &v, &err);
        /* Already read by a fast rank above: that is fine too. */
        if (rc == SC_OK)
            assert_true(!v.verified || v.ok);
        sc_plan_free(plans[e]);
    }
    sc__ledger_close(l);
}

/*
 * Owner words carry a 12-bit epoch tag that wraps every 4095 epochs: claims
 * and verdicts go on across the wrap (a previous use of a word must not
 * look like a later epoch's), and a double claim there is still caught.
 */
static void test_epochs_across_the_tag_wrap(void **state)
{
    (void)state;
    sc__ledger *l;
    sc_error err = SC_ERROR_INIT;
    sc_exactly_once v;
    SC_ASSERT_OK(sc__ledger_open(MPI_COMM_WORLD, NSH, SC__PLAN_MAX_CUTS(size), first, NULL, &l, &err), &err);
    const uint64_t wrap = 4095, last = wrap + 8;
    for (uint64_t e = wrap - 7; e < last; e++) {
        sc_plan *plan = plan_for(e, 7);
        SC_ASSERT_OK(sc__ledger_begin(l, plan, &err), &err);
        deliver(l, plan, 0, 0);
        SC_ASSERT_OK(sc__ledger_end(l, e, &err), &err);
        SC_ASSERT_OK(sc__ledger_result(l, e, 1, &v, &err), &err);
        if (!v.ok)
            print_error("epoch %llu: %s\n", (unsigned long long)e, v.detail);
        assert_true(v.verified && v.ok);
        sc_plan_free(plan);
    }
    if (size > 1) {
        sc_plan *plan = plan_for(last, rank == 1 ? 99 : 7);
        int rc = SC_OK;
        if (rank != 1)
            rc = sc__ledger_begin(l, plan, &err);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            rc = sc__ledger_begin(l, plan, &err);
            assert_int_equal(rc, SC_EOWNERSHIP);
            assert_non_null(strstr(err.msg, "epoch 4103: shard"));
            assert_non_null(strstr(err.msg, "in this epoch"));
            SC_ASSERT_OK(sc__ledger_abandon(l, last, UINT64_MAX, &err), &err);
        } else {
            SC_ASSERT_OK(rc, &err);
            deliver(l, plan, 0, 0);
            SC_ASSERT_OK(sc__ledger_end(l, last, &err), &err);
        }
        SC_ASSERT_OK(sc__ledger_result(l, last, 1, &v, &err), &err);
        assert_false(v.ok);
        sc_plan_free(plan);
    }
    sc__ledger_close(l);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    first[0] = 0;
    for (int s = 0; s < NSH; s++) {
        sizes[s] = PER;
        first[s + 1] = first[s] + PER;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_epochs_verify),
        cmocka_unit_test(test_conflicting_claims),
        cmocka_unit_test(test_stop_names_epoch_and_policy),
        cmocka_unit_test(test_foreign_sample_refused),
        cmocka_unit_test(test_duplicate_and_skip_found),
        cmocka_unit_test(test_run_ahead_within_bound),
        cmocka_unit_test(test_epochs_across_the_tag_wrap),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), NULL);
}
