/*
 * manifest.c - a layout-B directory's scan, saved beside its files
 * (.shardcache-manifest), so that the next jobs' rank 0 stats each file
 * instead of opening it with HDF5 and reading its fields' headers, which
 * is most of a first job's start over many files (docs/benchmarks.md,
 * "Many files").
 *
 * Layout, little-endian u64s after the magic: "SCMANIF1", the format (the
 * writer's build: the blob holds its field descriptions as they lie in
 * memory), the key (xxh64 of every file's real path and stamp: size, mtime,
 * inode and change time, in the directory's order: what the source's
 * fingerprint covers),
 * the blob's length, the blob (what rank 0 sends the other ranks at open),
 * then the xxh64 of all before it.  A saved scan is used only when its key
 * is the files' key now, when it is whole, and when whoever could have
 * written it could have written the files as well: owned by this user or
 * by the directory's owner, and writable by nobody else.
 */
#include "manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "formats.h"
#include "hash.h"
#include "io.h"

#define HEAD 32                      /* magic, format, key, length */
#define MAX_BYTES ((uint64_t)1 << 32) /* far above any real directory's (docs/benchmarks.md) */

static int manifest_path(const char *dir, char *out, size_t n, const char *suffix)
{
    return (size_t)snprintf(out, n, "%s/%s%s", dir, SC__MANIFEST_NAME, suffix) < n ? 0 : -1;
}

/* Whether the open file `fd` could only have been written by this user or dir's owner. */
static const char *manifest_trusted(int fd, const char *dir, uint64_t *size)
{
    struct stat st, ds;
    if (stat(dir, &ds) != 0)
        return "its directory cannot be read";
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return "it is not a regular file";
    if ((st.st_uid != geteuid() && st.st_uid != ds.st_uid) || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return "another user could have written it";
    if (st.st_size < HEAD + 8 || (uint64_t)st.st_size > MAX_BYTES)
        return "it is damaged";
    *size = (uint64_t)st.st_size;
    return NULL;
}

/* Why buf[n] is not the scan saved under key and format, or NULL. */
static const char *manifest_check(const unsigned char *buf, uint64_t n, uint64_t key,
                                  uint64_t format)
{
    if (memcmp(buf, SC__MANIFEST_MAGIC, 8) != 0 || sc__get_u64(buf + 24) != n - HEAD - 8 ||
        sc__get_u64(buf + n - 8) != sc__xxh64(buf, (size_t)(n - 8), 0))
        return "it is damaged";
    if (sc__get_u64(buf + 8) != format)
        return "another version of shardcache wrote it";
    if (sc__get_u64(buf + 16) != key)
        return "a file was added, removed, moved or modified since it was written";
    return NULL;
}

void *sc__manifest_load(const char *dir, uint64_t key, uint64_t format, size_t *len,
                        const char **why, int *stale)
{
    char path[SC_PATH_MAX + 64];
    *why = NULL;
    *len = 0;
    *stale = 0;
    int fd = manifest_path(dir, path, sizeof path, "") == 0
                 ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                 : -1;
    if (fd < 0) {
        *why = errno == ENOENT ? NULL : errno == ELOOP ? "it is a symbolic link"
                                                       : "it cannot be opened";
        return NULL;
    }
    uint64_t n = 0;
    unsigned char *buf = NULL;
    if (!(*why = manifest_trusted(fd, dir, &n)) &&
        (!(buf = malloc((size_t)n)) || sc__io_pread(fd, buf, n, 0)))
        *why = "it cannot be read";
    close(fd);
    if (!*why)
        *why = manifest_check(buf, n, key, format);
    /* Saved for other files, but whole, trusted and of this format: kept to say what changed. */
    *stale = *why && buf && !manifest_check(buf, n, sc__get_u64(buf + 16), format);
    if (*why && !*stale) {
        free(buf);
        return NULL;
    }
    *len = (size_t)(n - HEAD - 8);
    memmove(buf, buf + HEAD, *len);
    return buf;
}

static int manifest_write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            errno = put < 0 ? errno : EIO;
            return -1;
        }
        p += put, n -= (size_t)put;
    }
    return 0;
}

/*
 * Removes what a save killed between mkstemp and rename left: this user's
 * DIR/.shardcache-manifest.XXXXXX older than an hour (a younger one may
 * be another save's, under way).  Never read; only its space is lost.
 */
static void manifest_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t pre = strlen(SC__MANIFEST_NAME);
    time_t old = time(NULL) - 3600;
    while (d && (e = readdir(d))) {
        struct stat st;
        if (!strncmp(e->d_name, SC__MANIFEST_NAME ".", pre + 1) &&
            strlen(e->d_name) == pre + 7 && fstatat(dirfd(d), e->d_name, &st,
                                                    AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_mtime < old)
            (void)unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
}

int sc__manifest_store(const char *dir, uint64_t key, uint64_t format, const void *blob,
                       size_t len, sc_error *err)
{
    char path[SC_PATH_MAX + 64], tmp[SC_PATH_MAX + 64];
    size_t n = len + HEAD + 8;
    unsigned char *buf = malloc(n);
    if (!buf)
        return sc__seterr(err, SC_ENOMEM, "manifest of '%s': no memory", dir);
    memcpy(buf, SC__MANIFEST_MAGIC, 8);
    sc__put_u64(buf + 8, format);
    sc__put_u64(buf + 16, key);
    sc__put_u64(buf + 24, len);
    memcpy(buf + HEAD, blob, len);
    sc__put_u64(buf + HEAD + len, sc__xxh64(buf, len + HEAD, 0));
    int fd = manifest_path(dir, path, sizeof path, "") == 0 &&
                     manifest_path(dir, tmp, sizeof tmp, ".XXXXXX") == 0
                 ? mkstemp(tmp)
                 : -1;
    if (fd < 0) {
        free(buf);
        return sc__seterr(err, SC_EIO, "cannot write a manifest in '%s': %s", dir,
                          strerror(errno));
    }
    /* Whole and on disk before it replaces the old one: a crash leaves one or the other. */
    int e = 0;
    errno = 0;
    if (fchmod(fd, 0644) != 0 || manifest_write_all(fd, buf, n) != 0 || fsync(fd) != 0)
        e = errno ? errno : EIO;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    free(buf);
    if (!e) { /* the rename itself on disk too; a failure here loses nothing but speed */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        manifest_sweep(dir);
        return SC_OK;
    }
    unlink(tmp);
    return sc__seterr(err, SC_EIO, "cannot write '%s': %s", path, strerror(e));
}
