/* base/vec: growth keeps the elements, and refuses sizes that overflow. */
#include <stdint.h>
#include <stdlib.h>

#include "sc_test.h"
#include "vec.h"

/* Pushes keep every element in order through many doublings. */
static void test_vec_push_keeps_order(void **state)
{
    (void)state;
    sc__vec v = SC__VEC_INIT(uint64_t);
    for (uint64_t i = 0; i < 1000; i++) {
        uint64_t x = i * i;
        uint64_t *at = sc__vec_push(&v, &x);
        assert_non_null(at);
        assert_int_equal(*at, x);
    }
    assert_int_equal(v.n, 1000);
    assert_true(v.cap >= 1000 && v.cap < 4000);
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(((uint64_t *)v.p)[i], i * i);
    sc__vec_free(&v);
    assert_null(v.p);
    assert_int_equal(v.n + v.cap, 0);
    assert_int_equal(v.size, sizeof(uint64_t));
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
    sc__vec v = SC__VEC_INIT(uint64_t);
    assert_non_null(sc__vec_push(&v, NULL));
    assert_int_equal(sc__vec_reserve(&v, SIZE_MAX), -1);
    assert_int_equal(v.n, 1);
    sc__vec_free(&v);
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
