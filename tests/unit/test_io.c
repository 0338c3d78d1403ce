/*
 * base/io: direct reads and writes (O_DIRECT) deliver the bytes a buffered
 * pread delivers, on a filesystem that allows them (the disk under
 * $TMPDIR or /tmp) and on one that refuses them (the buffered fallback), for ranges whose ends and memory are aligned or not,
 * an unaligned tail of the file included; a direct read leaves no page in
 * the page cache; a direct write touches no byte outside its range.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "fault.h"
#include "io.h"
#include "mem.h"
#include "sc_test.h"

#define TMPFS_MAGIC_ 0x01021994
/* Over the bounce buffer's 4 MiB, and not a whole number of pages. */
#define FILE_BYTES ((uint64_t)(5 << 20) + 1234)

static unsigned char *want;

/* A file of FILE_BYTES known bytes in dir: its path into out, or 0 when dir is not usable. */
static int io_file(const char *dir, char *out, size_t n)
{
    snprintf(out, n, "%s/sc-test-io-%ld", dir, (long)getpid());
    int fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0)
        return 0;
    assert_null(sc__io_pwrite(fd, want, FILE_BYTES, 0));
    assert_int_equal(fdatasync(fd), 0);
    close(fd);
    return 1;
}

static int io_tmpfs(const char *dir)
{
    struct statfs s;
    return statfs(dir, &s) == 0 && s.f_type == TMPFS_MAGIC_;
}

/* Reads [off, off + n) at memory misaligned by `skew` from off's own alignment. */
static void io_check_range(int fd, int dfd, uint64_t off, uint64_t n, unsigned skew)
{
    unsigned char *mem = sc__big_alloc(n + 2 * SC__IO_ALIGN);
    assert_non_null(mem);
    unsigned char *buf = mem + (off + skew) % SC__IO_ALIGN;
    memset(buf, 0x5a, n);
    const char *why = sc__io_pread_direct(fd, dfd, buf, n, off);
    if (why)
        fail_msg("range %llu+%llu skew %u: %s", (unsigned long long)off,
                 (unsigned long long)n, skew, why);
    assert_memory_equal(buf, want + off, n);
    free(mem);
}

/* Every kind of range, read direct (dfd) or buffered, equals the file's bytes. */
static void io_check_file(int fd, int dfd)
{
    const uint64_t S = FILE_BYTES;
    const uint64_t ranges[][2] = {
        {0, S},                 /* all of it, the unaligned tail too */
        {1, S - 1},             /* both ends mid-page */
        {4096, 8192},           /* whole pages */
        {S - 100, 100},         /* the tail alone */
        {S - 5000, 5000},       /* a page and the tail */
        {7, 10},                /* inside one page */
        {4090, 20},             /* across one page boundary */
        {12345, (4 << 20) + 3}, /* more than one bounce */
    };
    for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++)
        for (unsigned skew = 0; skew < 2; skew++)
            io_check_range(fd, dfd, ranges[k][0], ranges[k][1], skew);
    unsigned char b[64];
    assert_non_null(sc__io_pread_direct(fd, dfd, b, 20, S - 10)); /* past the end */
}

/* The disk: direct reads are direct (no page cached after) and read right. */
static void test_io_direct_read_disk(void **state)
{
    (void)state;
    char path[4200];
    const char *base = getenv("TMPDIR");
    base = base && *base ? base : "/tmp";
    if (io_tmpfs(base) || !io_file(base, path, sizeof path))
        skip(); /* no disk here to test against */
    int fd = open(path, O_RDONLY), dfd = sc__io_open_direct(fd, O_RDONLY);
    assert_true(fd >= 0);
    if (dfd < 0 && errno == EINVAL) {
        unlink(path);
        skip(); /* this filesystem refuses O_DIRECT too */
    }
    assert_true(dfd >= 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    io_check_range(fd, dfd, 1, 3 << 20, 0);
    assert_false(sc__io_cached(fd, 4096 * 10, 4096 * 10)); /* read past the cache */
    io_check_file(fd, dfd);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    io_check_file(fd, -1); /* and buffered, from the device */
    io_check_file(fd, dfd); /* and the page cache's copy, now whole */
    close(dfd);
    close(fd);
    unlink(path);
}

/*
 * A filesystem that refuses O_DIRECT (tmpfs before Linux 6.6, some network
 * filesystems; here SC_FAULT=io-no-direct, on tmpfs where there is one):
 * the buffered fallback reads the same bytes; and tmpfs as it is.
 */
static void test_io_direct_refused(void **state)
{
    (void)state;
    char path[4200];
    const char *base = getenv("TMPDIR");
    if (!io_file(io_tmpfs("/dev/shm") ? "/dev/shm" : base && *base ? base : "/tmp", path,
                 sizeof path))
        skip();
    int fd = open(path, O_RDONLY), dfd = sc__io_open_direct(fd, O_RDONLY);
    assert_true(fd >= 0);
    io_check_file(fd, dfd); /* as this filesystem is */
    if (dfd >= 0)
        close(dfd);
    sc__fault_set("io-no-direct");
    errno = 0;
    dfd = sc__io_open_direct(fd, O_RDONLY);
    sc__fault_set(NULL);
    if (dfd >= 0) { /* a build without test hooks */
        close(dfd);
        close(fd);
        unlink(path);
        skip();
    }
    assert_int_equal(errno, EINVAL);
    io_check_file(fd, -1);
    close(fd);
    unlink(path);
}

/* A direct write of a range with unaligned ends writes it and nothing else. */
static void io_check_write(const char *dir)
{
    char path[4200];
    if (!io_file(dir, path, sizeof path))
        skip();
    int fd = open(path, O_RDWR), dfd = sc__io_open_direct(fd, O_WRONLY);
    assert_true(fd >= 0);
    const uint64_t off = 1000, n = (3 << 20) + 77;
    unsigned char *src = malloc(n + 1), *got = malloc(FILE_BYTES);
    for (uint64_t i = 0; i <= n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    for (unsigned skew = 0; skew < 2; skew++) { /* aligned like off, then not */
        const unsigned char *from = src + skew;
        assert_null(sc__io_pwrite_direct(fd, dfd, from, n, off + skew * 4096));
        memcpy(want + off + skew * 4096, from, n);
        assert_null(sc__io_pread(fd, got, FILE_BYTES, 0));
        assert_memory_equal(got, want, FILE_BYTES);
    }
    if (dfd >= 0)
        close(dfd);
    close(fd);
    unlink(path);
    free(src);
    free(got);
}

static void test_io_direct_write(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    io_check_write(base && *base ? base : "/tmp");
    if (io_tmpfs("/dev/shm"))
        io_check_write("/dev/shm");
}

static int io_setup(void **state)
{
    (void)state;
    want = malloc(FILE_BYTES);
    for (uint64_t i = 0; i < FILE_BYTES; i++)
        want[i] = (unsigned char)((i * 2654435761u) >> 13);
    return want ? 0 : -1;
}

static int io_teardown(void **state)
{
    (void)state;
    free(want);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_direct_read_disk),
        cmocka_unit_test(test_io_direct_refused),
        cmocka_unit_test(test_io_direct_write),
    };
    return cmocka_run_group_tests(tests, io_setup, io_teardown);
}
