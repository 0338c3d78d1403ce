/*
 * Removing a cache directory never follows a name swapped since it was
 * listed: a symlink to a victim directory, another directory put in its
 * place, or another user's directory is refused and their files stay.
 * The swap is made between the listing and the removal by hand, as
 * anyone who can write the root could make it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "sc_test.h"

static char root[256], victim[300];

/* A file `name` in directory d holding a few bytes. */
static void put(const char *d, const char *name)
{
    char f[600];
    snprintf(f, sizeof f, "%s/%s", d, name);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fputs("precious\n", fp);
    fclose(fp);
}

static int has(const char *d, const char *name)
{
    char f[600];
    snprintf(f, sizeof f, "%s/%s", d, name);
    return access(f, F_OK) == 0;
}

/* A cache directory `name` under root with an entry, as listed: its path and info. */
static void make_cache(const char *name, char *path, size_t n, sc_cache_dir_info *d)
{
    snprintf(path, n, "%s/%s", root, name);
    assert_int_equal(mkdir(path, 0700), 0);
    put(path, "s0.h5");
    put(path, "lock");
    assert_int_equal(sc__cachedir_describe(root, name, d), 1);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/sc-cachedir-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(root));
    snprintf(victim, sizeof victim, "%s/project", root);
    assert_int_equal(mkdir(victim, 0700), 0);
    put(victim, "a.txt");
    put(victim, "s1.h5");
    put(victim, "lock");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) != 0;
}

/* The victim directory holds all its files still. */
static void victim_whole(void)
{
    assert_true(has(victim, "a.txt"));
    assert_true(has(victim, "s1.h5"));
    assert_true(has(victim, "lock"));
}

/* Listed as a directory, then swapped for a symlink to the victim before its removal. */
static void test_swapped_for_a_symlink(void **state)
{
    (void)state;
    const char *name = "shardcache-00000000deadbeef-l0";
    char path[400], moved[400];
    sc_cache_dir_info d;
    make_cache(name, path, sizeof path, &d);
    snprintf(moved, sizeof moved, "%s/moved", root);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(symlink(victim, path), 0);

    struct stat vs;
    assert_int_equal(stat(victim, &vs), 0);
    /* Even given the victim's own identity, a symlink is never entered. */
    assert_int_equal(sc__cachedir_remove(path, (uint64_t)vs.st_dev, (uint64_t)vs.st_ino, -1), -1);
    victim_whole();
    int removed = 1;
    sc_error err;
    assert_int_not_equal(sc_cache_remove(path, &removed, &err), SC_OK);
    assert_int_equal(removed, 0);
    victim_whole();
    struct stat ls;
    assert_int_equal(lstat(path, &ls), 0);
    assert_true(S_ISLNK(ls.st_mode));
    unlink(path);
}

/* Listed, then swapped for another directory of this user's: not the one listed. */
static void test_swapped_for_another_directory(void **state)
{
    (void)state;
    const char *name = "shardcache-00000000deadbeef-l1";
    char path[400], moved[400];
    sc_cache_dir_info d;
    make_cache(name, path, sizeof path, &d);
    snprintf(moved, sizeof moved, "%s/moved1", root);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(rename(victim, path), 0);
    assert_int_equal(sc__cachedir_remove(path, d.dev, d.ino, -1), -1);
    assert_int_equal(rename(path, victim), 0);
    victim_whole();
    /* The one listed, under its own name again, goes. */
    assert_int_equal(rename(moved, path), 0);
    assert_int_equal(sc__cachedir_remove(path, d.dev, d.ino, -1), 0);
    assert_int_equal(access(path, F_OK), -1);
}

/* Another user's directory is never removed, even one this process may write. */
static void test_another_users_directory_stays(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* only root can give a directory to another uid */
    const char *name = "shardcache-00000000deadbeef-l2";
    char path[400];
    sc_cache_dir_info d;
    make_cache(name, path, sizeof path, &d);
    assert_int_equal(chown(path, 65534, 65534), 0);
    assert_int_equal(sc__cachedir_describe(root, name, &d), 1);
    assert_false(d.mine);
    assert_int_equal(sc__cachedir_remove(path, d.dev, d.ino, -1), -1);
    int removed = 1;
    sc_error err;
    assert_int_not_equal(sc_cache_remove(path, &removed, &err), SC_OK);
    assert_true(has(path, "s0.h5"));
    assert_true(has(path, "lock"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swapped_for_a_symlink),
        cmocka_unit_test(test_swapped_for_another_directory),
        cmocka_unit_test(test_another_users_directory_stays),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
