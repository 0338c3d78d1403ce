/*
 * sc_test.h - what every cmocka test of shardcache shares.
 *
 * SC_ASSERT_OK prints the status's name, its text and the sc_error message
 * when a call fails, so that a red test says what went wrong without a
 * debugger.  Tests that need something this machine lacks exit 77.
 */
#ifndef SC_TEST_H
#define SC_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shardcache.h"

void sc_test_fail(const char *file, int line, const char *call, int rc,
                  const sc_error *err);

#define SC_ASSERT_OK(call, errp)                                             \
    do {                                                                     \
        int sc_t_rc = (call);                                                \
        if (sc_t_rc != SC_OK)                                                \
            sc_test_fail(__FILE__, __LINE__, #call, sc_t_rc, (errp));        \
    } while (0)

#define SC_ASSERT_RC(call, want, errp)                                       \
    do {                                                                     \
        int sc_t_rc = (call);                                                \
        if (sc_t_rc != (want)) {                                             \
            print_error("expected %s, got %s\n", sc_status_name(want),       \
                        sc_status_name(sc_t_rc));                            \
            sc_test_fail(__FILE__, __LINE__, #call, sc_t_rc, (errp));        \
        }                                                                    \
    } while (0)

/* Number of randomized cases: SC_TEST_CASES in the environment, else dflt. */
unsigned sc_test_cases(unsigned dflt);

/* A seed for randomized tests: SC_TEST_SEED, else time; printed once.  In an
 * MPI test, rank 0's (collective on the first call). */
uint64_t sc_test_seed(void);

#endif
