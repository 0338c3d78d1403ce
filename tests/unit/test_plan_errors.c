/* Bad planner input gets a clear status and message, never an abort. */
#include <math.h>
#include <string.h>

#include "plan_state.h"
#include "sc_test.h"

static uint64_t sizes[16] = {10, 10, 10, 10, 10, 10, 10, 10,
                             10, 10, 10, 10, 10, 10, 10, 10};

static sc_plan_params base(void)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = 16;
    p.world_size = 4;
    p.batch_size = 8;
    p.epoch = 5;
    return p;
}

static void expect_refusal(const sc_plan_params *p, const sc_plan *prev,
                           int code, const char *words)
{
    sc_plan *plan = (sc_plan *)0x1;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_RC(sc_plan_create(p, prev, &plan, &err), code, &err);
    assert_null(plan);
    assert_int_equal(err.code, code);
    if (!strstr(err.msg, words))
        print_error("message '%s' lacks '%s'\n", err.msg, words);
    assert_non_null(strstr(err.msg, words));
}

static void test_refusals(void **state)
{
    (void)state;
    sc_plan_params p;

    expect_refusal(NULL, NULL, SC_EINVAL, "NULL");
    p = base(), p.nshards = 0;
    expect_refusal(&p, NULL, SC_EINVAL, "zero shards");
    p = base(), p.shard_sizes = NULL;
    expect_refusal(&p, NULL, SC_EINVAL, "NULL");
    p = base(), p.world_size = 0;
    expect_refusal(&p, NULL, SC_EINVAL, "world size is 0");
    p = base(), p.world_size = 17;
    expect_refusal(&p, NULL, SC_EINVAL, "more ranks (17) than shards (16)");
    p = base(), p.batch_size = 0;
    expect_refusal(&p, NULL, SC_EINVAL, "batch size is 0");
    p = base(), p.exchange = -0.1;
    expect_refusal(&p, NULL, SC_EINVAL, "outside [0,1]");
    p = base(), p.exchange = 1.5;
    expect_refusal(&p, NULL, SC_EINVAL, "outside [0,1]");
    p = base(), p.exchange = NAN;
    expect_refusal(&p, NULL, SC_EINVAL, "outside [0,1]");
    p = base(), p.mode = (sc_shuffle_mode)7;
    expect_refusal(&p, NULL, SC_EINVAL, "shuffle mode");
    p = base(), p.remainder = (sc_remainder)9;
    expect_refusal(&p, NULL, SC_EINVAL, "remainder");
    p = base(), p.batch_size = 41; /* 160 samples, 4 x 41 = 164 a step */
    expect_refusal(&p, NULL, SC_EINVAL, "cannot give each of 4 ranks a batch of 41");
    p.remainder = SC_REMAINDER_PAD; /* ...which pad accepts: one padded batch */
    sc_plan *ok = NULL;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &ok, NULL), NULL);
    assert_int_equal(ok->info.batches_per_rank, 1);
    assert_int_equal(ok->info.padded, 4 * 41 - 160);
    sc_plan_free(ok);

    /* Partitions: R divides P, P divides R x B, P shards at least. */
    p = base(), p.partitions = 6;
    expect_refusal(&p, NULL, SC_EINVAL, "SC_PARTITIONS=6 is not a multiple of the 4 ranks");
    p = base(), p.partitions = 32;
    expect_refusal(&p, NULL, SC_EINVAL, "more than the 16 shards");
    p = base(), p.partitions = 16, p.batch_size = 2;
    expect_refusal(&p, NULL, SC_EINVAL, "4 ranks x 2 = 8 samples, is not a multiple");
    p = base(), p.partitions = 8, p.batch_size = 42, p.remainder = SC_REMAINDER_PAD;
    expect_refusal(&p, NULL, SC_EINVAL, "less than one global batch");

    uint64_t zero[3] = {5, 0, 5};
    p = base(), p.shard_sizes = zero, p.nshards = 3, p.world_size = 1;
    expect_refusal(&p, NULL, SC_EINVAL, "shard 1 has no samples");

    uint64_t huge[3] = {UINT64_MAX / 2, UINT64_MAX / 2, 3};
    p = base(), p.shard_sizes = huge, p.nshards = 3, p.world_size = 1;
    expect_refusal(&p, NULL, SC_EOVERFLOW, "overflow 64 bits at shard 2");

    /* A sticky plan cannot follow a plan of another shape. */
    sc_plan *prev = NULL;
    p = base();
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &prev, NULL), NULL);
    p.mode = SC_SHUFFLE_STICKY;
    p.world_size = 2;
    expect_refusal(&p, prev, SC_EPLAN, "previous plan");
    sc_plan_free(prev);

    sc_error err;
    SC_ASSERT_RC(sc_plan_create(&p, NULL, NULL, &err), SC_EINVAL, &err);
}

static void test_accessors_refuse_bad_input(void **state)
{
    (void)state;
    sc_plan_params p = base();
    sc_plan *plan = NULL;
    uint32_t r;
    sc_plan_info in;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &plan, NULL), NULL);
    assert_int_equal(sc_plan_owner(plan, 16, &r), SC_EINVAL);
    assert_int_equal(sc_plan_owner(NULL, 0, &r), SC_EINVAL);
    assert_int_equal(sc_plan_rank(plan, 4, NULL, NULL, NULL), SC_EINVAL);
    assert_int_equal(sc_plan_get_info(NULL, &in), SC_EINVAL);
    assert_int_equal(sc_plan_check(NULL, &p, NULL, NULL), SC_EINVAL);
    /* A plan checked against other inputs fails, naming what differs. */
    sc_error err;
    p.seed = 99;
    SC_ASSERT_RC(sc_plan_check(plan, &p, NULL, &err), SC_EPLAN, &err);
    assert_non_null(strstr(err.msg, "seed 0, this rank expects 99"));
    sc_plan_free(plan);
    sc_plan_free(NULL);
}

/* Sample -> shard over uneven shards, every boundary, and what lies outside. */
static void test_shard_of(void **state)
{
    (void)state;
    const uint64_t first[] = {0, 3, 3, 10, 11}; /* shard 1 is empty */
    uint64_t shard = 99;
    for (uint64_t id = 0; id < 11; id++) {
        assert_int_equal(sc__shard_of(first, 4, id, &shard), SC_OK);
        assert_true(first[shard] <= id && id < first[shard + 1]);
    }
    assert_int_equal(sc__shard_of(first, 4, 11, &shard), SC_EINVAL);
    assert_int_equal(sc__shard_of(first, 0, 0, &shard), SC_EINVAL);
    assert_int_equal(sc__shard_of(NULL, 4, 0, &shard), SC_EINVAL);
    assert_int_equal(sc__shard_of(first, 4, 0, NULL), SC_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_accessors_refuse_bad_input),
        cmocka_unit_test(test_shard_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
