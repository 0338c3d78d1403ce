/*
 * test_quality.c - sc_plan_quality: its figures on cases worked by hand,
 * against a uniform permutation's, and the shuffle promise it measures:
 * on class-sorted labels, every rank's batches come within 0.05 bits of a
 * uniform random order's label entropy once the window spans a share.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "sc_test.h"
#include "shardcache/plan.h"

typedef struct qcase {
    uint64_t *sizes, nshards;
    uint32_t *labels, classes;
} qcase;

/* nshards shards of `shard` samples, labels in `classes` contiguous blocks. */
static qcase qcase_sorted(uint64_t nshards, uint64_t shard, uint32_t classes)
{
    qcase c = {malloc(sizeof *c.sizes * nshards), nshards, NULL, classes};
    uint64_t n = nshards * shard;
    c.labels = malloc(sizeof *c.labels * n);
    for (uint64_t k = 0; k < nshards; k++)
        c.sizes[k] = shard;
    for (uint64_t i = 0; i < n; i++)
        c.labels[i] = (uint32_t)(i * classes / n);
    return c;
}

static void qcase_free(qcase *c)
{
    free(c->sizes);
    free(c->labels);
}

static sc_quality measure(const qcase *c, sc_shuffle_mode mode, uint32_t R, uint64_t batch,
                          uint64_t window, uint64_t seed, uint64_t epochs)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = c->sizes, p.nshards = c->nshards, p.world_size = R;
    p.batch_size = batch, p.seed = seed, p.mode = mode, p.exchange = 0.1;
    sc_quality_params qp = {.shard_sizes = c->sizes, .nshards = c->nshards,
                            .batch_size = batch, .window = window, .seed = seed,
                            .labels = c->labels, .nclasses = c->classes};
    sc_plan *prev = NULL, *plan;
    sc_quality q = {0};
    sc_error err;
    for (p.epoch = 0; p.epoch < epochs; p.epoch++) { /* the last epoch's figures */
        SC_ASSERT_OK(sc_plan_create(&p, prev, &plan, &err), &err);
        SC_ASSERT_OK(sc_plan_quality(plan, &qp, &q, &err), &err);
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    return q;
}

/* One rank, no window: a batch is one shard of one class. */
static void test_by_hand(void **state)
{
    (void)state;
    qcase c = qcase_sorted(8, 16, 8);
    sc_quality q = measure(&c, SC_SHUFFLE_GLOBAL, 1, 16, 1, sc_test_seed(), 1);
    assert_int_equal(q.batches, 8);
    assert_true(q.plan.shards == 1.0);
    assert_true(q.plan.classes == 1.0);
    assert_true(q.plan.bits == 0.0);
    /* A uniform order of 128 samples of 8 classes in batches of 16 mixes them. */
    assert_true(q.uniform.classes > 5.0 && q.uniform.bits > 2.0 && q.uniform.bits <= 3.0);
    assert_true(fabs(q.uniform.moved - 1.0 / 3.0) < 0.06);
    qcase_free(&c);
}

/*
 * The promise, with random world sizes, seeds and shard counts: windows
 * spanning a share of at least 32 shards reach the uniform entropy within
 * 0.05 bits in both modes (sticky after epochs of moves); window 1 does not.
 */
static void test_sorted_labels_mix(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 11, 12, 13));
    for (int i = 0; i < 6; i++) {
        uint32_t R = 1 + (uint32_t)sc__rng_below(&r, 8);
        uint64_t shard = 64 << sc__rng_below(&r, 3), per = 32 + sc__rng_below(&r, 32);
        qcase c = qcase_sorted(R * per, shard, 10);
        uint64_t seed = sc__rng_next(&r), share = per * shard;
        for (int m = 0; m < 2; m++) {
            sc_shuffle_mode mode = m ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
            sc_quality wide = measure(&c, mode, R, 64, share, seed, m ? 12 : 1);
            sc_quality none = measure(&c, mode, R, 64, 1, seed, 1);
            print_message("R=%u shards/rank=%llu shard=%llu %s: %.3f bits (window 1: %.3f, "
                          "uniform %.3f), %.1f shards/batch\n", R, (unsigned long long)per,
                          (unsigned long long)shard, m ? "sticky" : "global", wide.plan.bits,
                          none.plan.bits, wide.uniform.bits, wide.plan.shards);
            assert_true(wide.plan.bits > wide.uniform.bits - 0.05);
            assert_true(none.plan.bits < wide.uniform.bits - 0.5);
            assert_true(fabs(wide.plan.moved - 1.0 / 3.0) < 0.05);
        }
        qcase_free(&c);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    qcase c = qcase_sorted(4, 8, 2);
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = c.sizes, p.nshards = 4, p.world_size = 2, p.batch_size = 4;
    sc_plan *plan;
    sc_error err;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &plan, &err), &err);
    sc_quality q;
    sc_quality_params qp = {.shard_sizes = c.sizes, .nshards = 4, .batch_size = 4,
                            .window = 8, .labels = c.labels, .nclasses = 2};
    SC_ASSERT_OK(sc_plan_quality(plan, &qp, &q, &err), &err);
    SC_ASSERT_RC(sc_plan_quality(NULL, &qp, &q, &err), SC_EINVAL, &err);
    SC_ASSERT_RC(sc_plan_quality(plan, NULL, &q, &err), SC_EINVAL, &err);
    qp.nshards = 3;
    SC_ASSERT_RC(sc_plan_quality(plan, &qp, &q, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "3 shard sizes of 24 samples"));
    assert_non_null(strstr(err.msg, "for a plan of 4 shards of 32 samples"));
    qp.nshards = 4, c.sizes[3] = 9; /* more samples than the plan's: ids past the labels */
    SC_ASSERT_RC(sc_plan_quality(plan, &qp, &q, &err), SC_EINVAL, &err);
    c.sizes[3] = 8, qp.batch_size = 5; /* another batch size than the plan's */
    SC_ASSERT_RC(sc_plan_quality(plan, &qp, &q, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "batch 5"));
    qp.batch_size = 4;
    qp.nshards = 4, qp.window = UINT64_MAX;
    SC_ASSERT_RC(sc_plan_quality(plan, &qp, &q, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "not auto"));
    qp.window = 8, qp.nclasses = 1;
    SC_ASSERT_RC(sc_plan_quality(plan, &qp, &q, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "sample 16 has label 1"));
    sc_plan_free(plan);
    qcase_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_sorted_labels_mix),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
