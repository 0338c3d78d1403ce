/* base/vec: growth keeps the elements, and refuses sizes that overflow. */
#include <stdint.h>
#include <stdlib.h>

#include "sc_test.h"
#include "vec.h"

/* Appends keep every element in order through many doublings, few reallocations. */
static void test_vec_push_keeps_order(void **state)
{
    (void)state;
    uint64_t *v = NULL;
    size_t n = 0, cap = 0, moves = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        size_t before = cap;
        uint64_t *g = sc__vec_grow(v, &cap, n + 1, sizeof *v);
        assert_non_null(g);
        moves += cap != before;
        v = g;
        v[n++] = i * i;
    }
    assert_true(cap >= 1000 && cap < 4000);
    assert_true(moves <= 7); /* 16, 32, ..., 1024: amortized, not one per append */
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(v[i], i * i);
    free(v);
}

/* Growth is at least doubling (amortized appends) and at least what is asked. */
static void test_vec_grow_capacity(void **state)
{
    (void)state;
    size_t cap = 0;
    char *p = sc__vec_grow(NULL, &cap, 1, 1);
    assert_non_null(p);
    assert_int_equal(cap, 16);
    assert_ptr_equal(sc__vec_grow(p, &cap, 16, 1), p); /* room already */
    p = sc__vec_grow(p, &cap, 17, 1);
    assert_non_null(p);
    assert_int_equal(cap, 32);
    p = sc__vec_grow(p, &cap, 1000, 1);
    assert_non_null(p);
    assert_int_equal(cap, 1000);
    free(p);
}

/* A size that overflows is refused, and the old array is still the caller's. */
static void test_vec_overflow_refused(void **state)
{
    (void)state;
    size_t cap = 0;
    uint64_t *p = sc__vec_grow(NULL, &cap, 4, sizeof *p);
    assert_non_null(p);
    p[3] = 42;
    size_t before = cap;
    assert_null(sc__vec_grow(p, &cap, SIZE_MAX / 4, sizeof *p));
    assert_int_equal(cap, before);
    assert_int_equal(p[3], 42);
    assert_null(sc__vec_grow(p, &cap, SIZE_MAX, 2));
    assert_int_equal(cap, before);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_push_keeps_order),
        cmocka_unit_test(test_vec_grow_capacity),
        cmocka_unit_test(test_vec_overflow_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
