/* XXH64 against the reference implementation's digests (xxhsum -H64). */
#include <string.h>

#include "hash.h"
#include "sc_test.h"

static void test_xxh64_vectors(void **state)
{
    (void)state;
    char pattern[101];
    for (int i = 0; i < 100; i++)
        pattern[i] = (char)(32 + i % 90);
    pattern[100] = '\0';
    assert_int_equal(sc__xxh64("", 0, 0), UINT64_C(0xef46db3751d8e999));
    assert_int_equal(sc__xxh64("a", 1, 0), UINT64_C(0xd24ec4f1a98c6e5b));
    assert_int_equal(sc__xxh64("abc", 3, 0), UINT64_C(0x44bc2cf5ad770999));
    assert_int_equal(sc__xxh64(pattern, 100, 0), UINT64_C(0xc073f906c58dad78));
    assert_int_not_equal(sc__xxh64("abc", 3, 1), sc__xxh64("abc", 3, 0));
}

/* Streaming over any split gives the one-shot digest. */
static void test_xxh64_streaming_splits(void **state)
{
    (void)state;
    unsigned char data[300];
    for (int i = 0; i < 300; i++)
        data[i] = (unsigned char)(i * 31 + 7);
    for (size_t len = 0; len <= 300; len += 13) {
        uint64_t want = sc__xxh64(data, len, 99);
        for (size_t cut1 = 0; cut1 <= len; cut1 += 7) {
            for (size_t cut2 = cut1; cut2 <= len; cut2 += 11) {
                sc__xxh64_state s;
                sc__xxh64_init(&s, 99);
                sc__xxh64_update(&s, data, cut1);
                sc__xxh64_update(&s, data + cut1, cut2 - cut1);
                sc__xxh64_update(&s, data + cut2, len - cut2);
                assert_int_equal(sc__xxh64_final(&s), want);
            }
        }
    }
}

static void test_rng_is_counter_based_and_unbiased(void **state)
{
    (void)state;
    sc__rng a, b;
    sc__rng_init(&a, sc__rng_key(1, 2, 3, 4));
    sc__rng_init(&b, sc__rng_key(1, 2, 3, 4));
    for (int i = 0; i < 1000; i++)
        assert_int_equal(sc__rng_next(&a), sc__rng_next(&b));
    sc__rng_init(&b, sc__rng_key(1, 2, 3, 5));
    assert_int_not_equal(sc__rng_next(&a), sc__rng_next(&b));

    /* below(7): each face within 5 sigma of 1/7 over 70000 draws. */
    unsigned count[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint64_t v = sc__rng_below(&a, 7);
        assert_true(v < 7);
        count[v]++;
    }
    for (int i = 0; i < 7; i++)
        assert_true(count[i] > 10000 - 5 * 93 && count[i] < 10000 + 5 * 93);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sc__rng_below(&a, 1), 0);
}

static void test_le_roundtrip(void **state)
{
    (void)state;
    unsigned char b[8];
    sc__put_u64(b, UINT64_C(0x0102030405060708));
    assert_int_equal(b[0], 8);
    assert_int_equal(b[7], 1);
    assert_int_equal(sc__get_u64(b), UINT64_C(0x0102030405060708));
    sc__put_u32(b, 0xA1B2C3D4u);
    assert_int_equal(b[0], 0xD4);
    assert_int_equal(sc__get_u32(b), 0xA1B2C3D4u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xxh64_vectors),
        cmocka_unit_test(test_xxh64_streaming_splits),
        cmocka_unit_test(test_rng_is_counter_based_and_unbiased),
        cmocka_unit_test(test_le_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
