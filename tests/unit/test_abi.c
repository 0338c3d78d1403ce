/*
 * The sizes of the public structs the library writes into a caller's
 * memory are part of the ABI (include/shardcache.h, "ABI"): within a major
 * version they never change; new fields take their room from `reserved`.
 * A change here is an ABI break: bump SC_VERSION_MAJOR and these numbers
 * together, never these alone.  (x86-64 / LP64 figures.)
 */
#include <stddef.h>
#include <string.h>

#include "sc_test.h"

static void test_struct_sizes_are_the_abi(void **state)
{
    (void)state;
    assert_int_equal(SC_VERSION_MAJOR, 0);
    assert_int_equal(sizeof(sc_config), 18040);
    assert_int_equal(sizeof(sc_batch), 456);
    assert_int_equal(sizeof(sc_epoch_info), 120);
    assert_int_equal(sizeof(sc_epoch_summary), 528);
    assert_int_equal(sizeof(sc_error), 516);
}

/* Reserved space sits last, so every field before it keeps its offset. */
static void test_reserved_space_is_last(void **state)
{
    (void)state;
    assert_int_equal(offsetof(sc_config, reserved) + sizeof(((sc_config *)0)->reserved),
                     sizeof(sc_config));
    assert_int_equal(offsetof(sc_batch, reserved) + sizeof(((sc_batch *)0)->reserved),
                     sizeof(sc_batch));
    assert_int_equal(offsetof(sc_epoch_info, reserved) + sizeof(((sc_epoch_info *)0)->reserved),
                     sizeof(sc_epoch_info));
    assert_int_equal(offsetof(sc_epoch_summary, reserved) +
                         sizeof(((sc_epoch_summary *)0)->reserved),
                     sizeof(sc_epoch_summary));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_struct_sizes_are_the_abi),
        cmocka_unit_test(test_reserved_space_is_last),
        cmocka_unit_test(test_reserved_space_starts_zeroed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
