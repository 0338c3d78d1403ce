/*
 * base/mem: the cache-bypassing copy gives memcpy's bytes for every
 * length and alignment, touches nothing outside its destination, and the
 * pool hands back the smallest buffer that fits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "sc_test.h"

enum { GUARD = 80 };

/* Every length to 600 bytes and some of megabytes, at every 16-byte misalignment of both. */
static void test_copy_nt_is_memcpy(void **state)
{
    (void)state;
    size_t most = (size_t)3 << 20;
    unsigned char *src = malloc(most + 64), *dst = malloc(most + 64 + 2 * GUARD);
    unsigned char *want = malloc(most + 64 + 2 * GUARD);
    assert_non_null(src), assert_non_null(dst), assert_non_null(want);
    uint64_t x = 0x243f6a8885a308d3ULL;
    for (size_t i = 0; i < most + 64; i++)
        x ^= x << 13, x ^= x >> 7, x ^= x << 17, src[i] = (unsigned char)x;
    size_t sizes[] = {1048576 + 13, 114660, 12296, (size_t)3 << 20};
    for (size_t n = 0; n < 600 + 4; n++) {
        size_t len = n < 600 ? n : sizes[n - 600];
        for (size_t so = 0; so < 16; so += n < 600 ? 1 : 5)
            for (size_t d = 0; d < 16; d += n < 600 ? 1 : 3) {
                memset(dst, 0xa5, len + 2 * GUARD), memset(want, 0xa5, len + 2 * GUARD);
                memcpy(want + GUARD + d, src + so, len);
                sc__copy_nt(dst + GUARD + d, src + so, len);
                sc__copy_fence();
                assert_memory_equal(dst, want, len + 2 * GUARD);
            }
    }
    free(src), free(dst), free(want);
}

/* Rings past a core's share of the cache (4 MiB) bypass it; smaller ones keep memcpy. */
static void test_copy_bypasses_large_rings(void **state)
{
    (void)state;
    assert_false(sc__copy_bypasses(3 * 393216));  /* three batches of 32 x 12 KiB */
    assert_true(sc__copy_bypasses(3 * 45864000)); /* three of resnet50's 400 x 112 KiB */
    assert_false(sc__copy_bypasses((4 << 20) - 1));
    assert_true(sc__copy_bypasses(4 << 20));
    assert_true(sc__copy_for((4 << 20) - 1) == memcpy);
    assert_true(sc__copy_for(4 << 20) == sc__copy_nt);
}

/* The pool gives the smallest buffer that fits, and keeps only up to its limit. */
static void test_pool_smallest_fit(void **state)
{
    (void)state;
    sc__pool p = {0};
    void *a = malloc(100), *b = malloc(300), *c = malloc(200);
    assert_null(sc__pool_put(&p, a, 100, 1000));
    assert_null(sc__pool_put(&p, b, 300, 1000));
    assert_null(sc__pool_put(&p, c, 200, 1000));
    void *big = malloc(500);
    assert_ptr_equal(sc__pool_put(&p, big, 500, 1000), big); /* 1100 > 1000: the caller's */
    free(big);
    uint64_t cap = 0;
    assert_ptr_equal(sc__pool_take(&p, 150, &cap), c);
    assert_int_equal(cap, 200);
    assert_null(sc__pool_take(&p, 301, &cap));
    assert_ptr_equal(sc__pool_shed(&p, 100, &cap), b); /* 400 held: the largest goes */
    assert_int_equal(p.bytes, 100);
    free(b), free(c);
    sc__pool_free(&p);
    assert_int_equal(p.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_nt_is_memcpy),
        cmocka_unit_test(test_copy_bypasses_large_rings),
        cmocka_unit_test(test_pool_smallest_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
