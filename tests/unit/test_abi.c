/*
 * The sizes of the public structs are part of the ABI (include/shardcache.h,
 * "ABI"): within a major version they never change; new fields take their
 * room from `reserved`.
 * A change here is an ABI break: bump SC_VERSION_MAJOR and these numbers
 * together, never these alone.  (x86-64 / LP64 figures.)
 */
#include <stddef.h>
#include <string.h>

#include "sc_test.h"

/* Every public struct with its LP64 size; X(type, size). */
#define SC_T_ABI_STRUCTS(X)                                                  \
    X(sc_config, 18040) X(sc_batch, 456) X(sc_epoch_info, 120)              \
    X(sc_epoch_summary, 592) X(sc_exactly_once, 392) X(sc_transform, 6224)  \
    X(sc_field_info, 384) X(sc_plan_params, 136) X(sc_plan_info, 200)       \
    X(sc_dataset_info, 120) X(sc_cache_stats, 144)                          \
    X(sc_features, 52) X(sc_quality_params, 88) X(sc_quality, 168)         \
    X(sc_cache_dir_info, 8384) X(sc_quality_figures, 64) X(sc_plan_cut, 72)

static void test_struct_sizes_are_the_abi(void **state)
{
    (void)state;
    assert_int_equal(SC_VERSION_MAJOR, 0);
    assert_int_equal(sizeof(sc_error), 516); /* fixed: a message buffer, no reserve */
#define SC_T_SIZE(type, size) assert_int_equal(sizeof(type), size);
    SC_T_ABI_STRUCTS(SC_T_SIZE)
#undef SC_T_SIZE
}

/* Reserved space sits last, so every field before it keeps its offset. */
static void test_reserved_space_is_last(void **state)
{
    (void)state;
#define SC_T_LAST(type, size)                                                \
    assert_int_equal(offsetof(type, reserved) + sizeof(((type *)0)->reserved), sizeof(type));
    SC_T_ABI_STRUCTS(SC_T_LAST)
#undef SC_T_LAST
}

/* A fresh config's reserved space is zero, so a later field's 0 is its default. */
static void test_reserved_space_starts_zeroed(void **state)
{
    (void)state;
    sc_config cfg;
    memset(&cfg, 0xa5, sizeof cfg);
    assert_int_equal(sc_config_init(&cfg, NULL), SC_OK);
    for (size_t i = 0; i < sizeof cfg.reserved / sizeof cfg.reserved[0]; i++)
        assert_int_equal(cfg.reserved[i], 0);
}

/*
 * The *_INIT initializers are designated: each names the fields it sets, and
 * every other field (reserved space included) is 0.
 */
static void test_initializers_name_their_fields(void **state)
{
    (void)state;
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    assert_int_equal(p.world_size, 1);
    assert_int_equal(p.batch_size, 1);
    assert_int_equal(p.remainder, SC_REMAINDER_DROP);
    assert_int_equal(p.mode, SC_SHUFFLE_GLOBAL);
    assert_null(p.shard_sizes);
    assert_true(!p.nshards && !p.seed && !p.epoch && p.exchange == 0.0 && !p.fingerprint &&
                !p.partitions);
    for (size_t i = 0; i < sizeof p.reserved / sizeof p.reserved[0]; i++)
        assert_int_equal(p.reserved[i], 0);
    sc_error e = SC_ERROR_INIT;
    assert_int_equal(e.code, SC_OK);
    assert_string_equal(e.msg, "");
    /* sc_config_print takes a FILE *, no longer a void *: the compiler checks. */
    int (*print)(const sc_config *, FILE *) = sc_config_print;
    assert_int_equal(print(NULL, stderr), SC_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_struct_sizes_are_the_abi),
        cmocka_unit_test(test_reserved_space_is_last),
        cmocka_unit_test(test_reserved_space_starts_zeroed),
        cmocka_unit_test(test_initializers_name_their_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
