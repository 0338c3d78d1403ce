/*
 * output.c - see output.h.  Everything happens relative to the parent
 * directory's descriptor, opened once: what was checked at the name is
 * what is removed and created there, whatever happens to the path around
 * it meanwhile.
 */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* Opens the directory holding `path` and points *name at its last part. */
static int output_parent(const char *path, const char *what, int *dirfd, const char **name,
                         sc_error *err)
{
    const char *slash = strrchr(path, '/');
    char dir[SC_PATH_MAX];
    *name = slash ? slash + 1 : path;
    if (!**name || strlen(path) >= sizeof dir)
        return sc__seterr(err, SC_EINVAL, "%s '%s': not a file name", what, path);
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    *dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return sc__seterr(err, SC_EIO, "%s: cannot create '%s': its directory '%s': %s", what,
                          path, dir, strerror(errno));
    return SC_OK;
}

/* The refusal of something already at the name: what it is, whose. */
static int output_refuse(int dirfd, const char *name, const char *path, const char *what,
                         const struct stat *st, sc_error *err)
{
    if (S_ISLNK(st->st_mode)) {
        char to[SC_PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, to, sizeof to - 1);
        to[n < 0 ? 0 : n] = '\0';
        return sc__seterr(err, SC_EIO,
                          "%s '%s' is a symbolic link (to '%s', owner uid %u): not followed; "
                          "remove it or write elsewhere",
                          what, path, to, (unsigned)st->st_uid);
    }
    if (st->st_uid != geteuid())
        return sc__seterr(err, SC_EIO,
                          "%s '%s' exists and belongs to uid %u, not to this user (uid %u): "
                          "not replaced; write elsewhere",
                          what, path, (unsigned)st->st_uid, (unsigned)geteuid());
    return sc__seterr(err, SC_EIO, "%s '%s' exists and is not a regular file: not replaced",
                      what, path);
}

/* Removes this user's regular file at name; refuses anything else there. */
static int output_clear_at(int dirfd, const char *name, const char *path, const char *what,
                           sc_error *err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? SC_OK
                               : sc__seterr(err, SC_EIO, "%s '%s': %s", what, path,
                                            strerror(errno));
    if (S_ISLNK(st.st_mode) || st.st_uid != geteuid() || !S_ISREG(st.st_mode))
        return output_refuse(dirfd, name, path, what, &st, err);
    /* A new inode, not the old one truncated: a hard link to it keeps its bytes. */
    if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
        return sc__seterr(err, SC_EIO, "%s '%s': cannot replace it: %s", what, path,
                          strerror(errno));
    return SC_OK;
}

int sc__output_clear(const char *path, const char *what, sc_error *err)
{
    int dirfd;
    const char *name;
    int rc = path ? output_parent(path, what, &dirfd, &name, err)
                  : sc__seterr(err, SC_EINVAL, "%s: no path", what);
    if (rc != SC_OK)
        return rc;
    rc = output_clear_at(dirfd, name, path, what, err);
    close(dirfd);
    return rc;
}

int sc_output_open(const char *path, int *fd, sc_error *err)
{
    const char *what = "output file", *name;
    int dirfd;
    if (!fd)
        return sc__seterr(err, SC_EINVAL, "sc_output_open: no place for the descriptor");
    *fd = -1;
    int rc = path ? output_parent(path, what, &dirfd, &name, err)
                  : sc__seterr(err, SC_EINVAL, "sc_output_open: no path");
    if (rc != SC_OK)
        return rc;
    rc = output_clear_at(dirfd, name, path, what, err);
    if (rc == SC_OK) {
        *fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (*fd < 0 && errno == EEXIST)
            rc = sc__seterr(err, SC_EIO,
                            "%s '%s' appeared while it was being created (another "
                            "process made it): not replaced",
                            what, path);
        else if (*fd < 0)
            rc = sc__seterr(err, SC_EIO, "%s '%s': %s", what, path, strerror(errno));
    }
    close(dirfd);
    return rc == SC_OK ? sc__errok(err) : rc;
}

int sc__in_group(unsigned gid)
{
    int n = getgroups(0, NULL), in = (gid_t)gid == getgid();
    gid_t *groups = n > 0 ? malloc(sizeof *groups * (size_t)n) : NULL;
    n = groups ? getgroups(n, groups) : 0;
    for (int i = 0; i < n && !in; i++)
        in = groups[i] == (gid_t)gid;
    free(groups);
    return in;
}

int sc__path_swappable(const char *dir, int group, char *bad, size_t n, struct stat *st)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return -1;
    size_t len = strlen(real);
    /* Each prefix ending at a '/' (the first: "/" itself), then the whole. */
    for (size_t i = 0; i <= len; i++) {
        if (i && real[i] != '/' && real[i])
            continue;
        snprintf(bad, n, "%.*s", i ? (int)i : 1, real);
        if (lstat(bad, st) != 0)
            return -1;
        /* The sticky bit keeps others' hands off, not its owner's: root's or ours only. */
        if ((st->st_mode & S_ISVTX) && (st->st_uid == 0 || st->st_uid == geteuid()))
            continue;
        if ((st->st_mode & S_ISVTX) && (st->st_mode & 022))
            return 1;
        if ((st->st_mode & 002) ||
            ((st->st_mode & 020) && !(group && sc__in_group((unsigned)st->st_gid))))
            return 1;
    }
    return 0;
}

int sc_output_dir(const char *path, sc_error *err)
{
    struct stat st;
    if (!path || !*path)
        return sc__seterr(err, SC_EINVAL, "sc_output_dir: no directory named");
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return sc__seterr(err, SC_EIO, "output directory '%s': cannot create it: %s", path,
                          strerror(errno));
    if (lstat(path, &st) != 0)
        return sc__seterr(err, SC_EIO, "output directory '%s': %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return sc__seterr(err, SC_EIO,
                          "output directory '%s' is a symbolic link (owner uid %u): not "
                          "followed; remove it or write elsewhere",
                          path, (unsigned)st.st_uid);
    if (!S_ISDIR(st.st_mode))
        return sc__seterr(err, SC_EIO, "output directory '%s' exists and is not a directory",
                          path);
    if (st.st_uid != geteuid())
        return sc__seterr(err, SC_EIO,
                          "output directory '%s' belongs to uid %u, not to this user (uid "
                          "%u), who could change what is written there: write elsewhere",
                          path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return sc__seterr(err, SC_EIO,
                          "output directory '%s' (mode %03o) is writable by others, who "
                          "could change what is written there: chmod go-w it or write "
                          "elsewhere",
                          path, (unsigned)(st.st_mode & 07777));
    /* Files go in by path over a whole job: no one may swap the directory meanwhile. */
    char bad[PATH_MAX];
    int swap = sc__path_swappable(path, 0, bad, sizeof bad, &st);
    if (swap < 0)
        return sc__seterr(err, SC_EIO, "output directory '%s': %s", path, strerror(errno));
    if (swap)
        return sc__seterr(err, SC_EIO,
                          "output directory '%s': '%s' (owner uid %u, mode %03o) may be "
                          "written by other users without the sticky bit: they could rename "
                          "the directory away and put a link in its place mid-job; write "
                          "under a directory only you can write (your home), or under one "
                          "with the sticky bit, like /tmp",
                          path, bad, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return sc__errok(err);
}
