/* Every status has a distinct name and a text; unknown codes never crash. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jpeg.h"
#include "sc_test.h"

static const int codes[] = {
#define SC_T_CODE(name, value, text) value,
    SC_STATUS_LIST(SC_T_CODE)
#undef SC_T_CODE
};

static void test_names_and_texts(void **state)
{
    (void)state;
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        assert_non_null(sc_strerror(codes[i]));
        assert_true(strlen(sc_strerror(codes[i])) > 3);
        assert_true(strncmp(sc_status_name(codes[i]), "SC_", 3) == 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(sc_status_name(codes[i]),
                                    sc_status_name(codes[j]));
        }
    }
    assert_string_equal(sc_status_name(SC_EPLAN), "SC_EPLAN");
    assert_string_equal(sc_strerror(12345), "unknown status code");
    assert_string_equal(sc_status_name(-999), "SC_UNKNOWN");
    /* -10 was SC_ENCCL, never returned: retired, and not given to another. */
    assert_string_equal(sc_status_name(-10), "SC_UNKNOWN");
}

static void test_error_helpers(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc__seterr(&err, SC_EIO, "file %s", "x.h5"), SC_EIO);
    assert_int_equal(err.code, SC_EIO);
    assert_string_equal(err.msg, "file x.h5");
    assert_int_equal(sc__errctx(&err, SC_EIO, "rank %d", 3), SC_EIO);
    assert_string_equal(err.msg, "rank 3: file x.h5");
    /* The status is the caller's, not read back from a buffer that may be absent. */
    assert_int_equal(sc__errctx(NULL, SC_EPLAN, "epoch %d", 1), SC_EPLAN);
    assert_int_equal(sc__seterr(NULL, SC_EINVAL, "ignored"), SC_EINVAL);
    /* Long messages are cut, never overflow. */
    char big[2 * SC_ERROR_MSG_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sc__seterr(&err, SC_EINVAL, "%s", big);
    assert_int_equal(strlen(err.msg), SC_ERROR_MSG_MAX - 1);
    assert_int_equal(sc__errok(&err), SC_OK);
    assert_int_equal(err.code, SC_OK);
}

/*
 * What sc_features_get reports is what the build and this process have:
 * the testing hooks of this (testing) build, JPEG exactly when the codec
 * can make a decoder, and no CUDA device once CUDA_VISIBLE_DEVICES hides
 * them all (set before this process's first CUDA call), whether or not
 * the build has CUDA: "no device" is an answer, never an error.
 */
static void test_features_match_the_build(void **state)
{
    (void)state;
    sc_features f;
    assert_int_equal(sc_features_get(NULL), SC_EINVAL);
    assert_int_equal(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
    memset(&f, 0xff, sizeof f); /* every field written, none left as it was */
    SC_ASSERT_OK(sc_features_get(&f), NULL);
#ifdef SC_TESTING
    assert_int_equal(f.testing, 1);
#else
    assert_int_equal(f.testing, 0);
#endif
    sc_error err = SC_ERROR_INIT;
    sc__jpeg *j = NULL;
    int jpeg = sc__jpeg_new(&j, &err);
    sc__jpeg_free(j);
    assert_int_equal(f.jpeg, jpeg == SC_OK);
    assert_true(f.cuda == 0 || f.cuda == 1);
    assert_int_equal(f.cuda_devices, 0);
    assert_true(f.nccl == 0 || f.nccl == 1);
    assert_true(f.nccl ? f.nccl_version > 0 : f.nccl_version == 0);
    for (size_t i = 0; i < sizeof f.reserved / sizeof f.reserved[0]; i++)
        assert_int_equal(f.reserved[i], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_texts),
        cmocka_unit_test(test_error_helpers),
        cmocka_unit_test(test_features_match_the_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
