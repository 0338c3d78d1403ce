/*
 * test_manifest.c - a layout-B directory's saved scan (runtime/storage/
 * manifest.c), without HDF5 or MPI: what is stored loads back byte for
 * byte; under another key it comes back stale (to say what changed, never
 * to use); another format, a flipped byte, a cut file, a file another user
 * could have written and a symbolic link are each refused with their
 * reason; a missing one is no error; a save's leftover temporary file is
 * swept once it is old, never while it may be another save's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "manifest.h"
#include "sc_test.h"

enum { KEY = 0x5eed, FORMAT = 7 };
static const char blob[] = "rank 0's scan: files, fields, sample counts";
static char dir[256], path[512];

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/sc-manifest-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/%s", dir, SC__MANIFEST_NAME);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void store(void)
{
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__manifest_store(dir, KEY, FORMAT, blob, sizeof blob, &err), &err);
}

/* Loads under key and format: the blob (freed here) and its *why; *stale out. */
static int load(uint64_t key, uint64_t format, const char **why, int *stale)
{
    size_t len = 0;
    void *b = sc__manifest_load(dir, key, format, &len, why, stale);
    int same = b && len == sizeof blob && !memcmp(b, blob, len);
    int got = b != NULL;
    free(b);
    assert_true(!got || same); /* whatever comes back is the blob saved */
    return got;
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *why = "unset";
    int stale = -1;
    assert_false(load(KEY, FORMAT, &why, &stale)); /* none saved yet: no error */
    assert_null(why);
    store();
    assert_true(load(KEY, FORMAT, &why, &stale));
    assert_null(why);
    assert_int_equal(stale, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644); /* readable by the job's other users */
}

static void test_another_key_is_stale(void **state)
{
    (void)state;
    store();
    const char *why = NULL;
    int stale = 0;
    assert_true(load(KEY + 1, FORMAT, &why, &stale)); /* back, to say what changed */
    assert_int_equal(stale, 1);
    assert_non_null(why);
    assert_non_null(strstr(why, "modified since it was written"));
}

static void test_another_format_is_refused(void **state)
{
    (void)state;
    store();
    const char *why = NULL;
    int stale = 1;
    assert_false(load(KEY, FORMAT + 1, &why, &stale));
    assert_int_equal(stale, 0);
    assert_string_equal(why, "another version of shardcache wrote it");
}

/* Byte `at` of the saved file (negative: from its end) changed, or the file cut to `cut`. */
static void damage(long at, long cut)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    if (cut >= 0) {
        assert_int_equal(ftruncate(fd, cut), 0);
    } else {
        unsigned char c;
        off_t off = at < 0 ? st.st_size + at : at;
        assert_int_equal(pread(fd, &c, 1, off), 1);
        c ^= 0x20;
        assert_int_equal(pwrite(fd, &c, 1, off), 1);
    }
    close(fd);
}

static void test_damage_is_refused(void **state)
{
    (void)state;
    /* the magic, the length, the blob, the checksum; then cut short, and cut to nothing */
    const long at[] = {0, 24, 40, -1, 0, 0};
    const long cut[] = {-1, -1, -1, -1, 40, 0};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        store();
        damage(at[i], cut[i]);
        const char *why = NULL;
        int stale = 1;
        assert_false(load(KEY, FORMAT, &why, &stale));
        assert_int_equal(stale, 0);
        if (!why || strcmp(why, "it is damaged"))
            fail_msg("damage %zu: why = '%s'", i, why ? why : "(null)");
    }
}

static void test_untrusted_is_refused(void **state)
{
    (void)state;
    store();
    assert_int_equal(chmod(path, 0664), 0); /* the group could have written it */
    const char *why = NULL;
    int stale = 1;
    assert_false(load(KEY, FORMAT, &why, &stale));
    assert_string_equal(why, "another user could have written it");
    assert_int_equal(stale, 0);

    char real[600];
    snprintf(real, sizeof real, "%s/real", dir);
    assert_int_equal(rename(path, real), 0);
    assert_int_equal(chmod(real, 0644), 0);
    assert_int_equal(symlink(real, path), 0); /* a whole, trusted file, behind a link */
    assert_false(load(KEY, FORMAT, &why, &stale));
    assert_string_equal(why, "it is a symbolic link");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(unlink(real), 0);
}

/* DIR/.shardcache-manifest.XXXXXX, its mtime `age` seconds ago. */
static void leftover(const char *suffix, long age, char *out, size_t n)
{
    snprintf(out, n, "%s/%s.%s", dir, SC__MANIFEST_NAME, suffix);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= age;
    tv[1] = tv[0];
    assert_int_equal(utimes(out, tv), 0);
}

static void test_old_leftovers_are_swept(void **state)
{
    (void)state;
    char old[600], young[600], other[600];
    leftover("aB3dE9", 7200, old, sizeof old);      /* a save killed two hours ago */
    leftover("Zz0Zz0", 10, young, sizeof young);    /* maybe a save under way */
    leftover("keep-me", 7200, other, sizeof other); /* not a mkstemp name */
    store();
    assert_int_equal(access(old, F_OK), -1);
    assert_int_equal(access(young, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    unlink(young);
    unlink(other);
}

static void test_unwritable_directory_is_named(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    char none[600];
    snprintf(none, sizeof none, "%s/no/such/dir", dir);
    SC_ASSERT_RC(sc__manifest_store(none, KEY, FORMAT, blob, sizeof blob, &err), SC_EIO, &err);
    assert_non_null(strstr(err.msg, none));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_another_key_is_stale),
        cmocka_unit_test(test_another_format_is_refused),
        cmocka_unit_test(test_damage_is_refused),
        cmocka_unit_test(test_untrusted_is_refused),
        cmocka_unit_test(test_old_leftovers_are_swept),
        cmocka_unit_test(test_unwritable_directory_is_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
