/*
 * cacheplace.c - where one rank's cache lives (see cacheplace.h).
 */
#include "cacheplace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "config.h"
#include "log.h"
#include "output.h"

void sc__cache_place_init(sc__cache_place *p)
{
    p->rootfd = p->dfd = p->lock_fd = -1;
    p->private_dir = p->own_root = 0;
    p->root[0] = p->dir[0] = p->node[0] = '\0';
}

static int place_same(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* What st is, for a message: "a directory owned by bob (uid 1001) with mode 777". */
static void place_describe(const struct stat *st, char *buf, size_t n)
{
    char who[64];
    snprintf(buf, n, "%s owned by %s (uid %lu) with mode %03o",
             S_ISLNK(st->st_mode)  ? "a symbolic link"
             : S_ISDIR(st->st_mode) ? "a directory"
                                    : "a file",
             sc__cachedir_user((unsigned)st->st_uid, who, sizeof who), (unsigned long)st->st_uid,
             (unsigned)(st->st_mode & 07777));
}

/* Every directory made for a cache is its user's alone (0700): no one else plants entries. */
static int place_mkdirs(const char *path)
{
    char tmp[SC_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/*
 * The default root is a predictable name, often in a world-writable /tmp:
 * whoever makes it first owns it.  One that is not this user's private
 * directory (another user's, a symlink, one others may write) is never
 * used, as it could hold planted entries: the job caches in a fresh root
 * beside it (mkdtemp, 0700, removed at its close) and says whose the name
 * is, so that it runs, cold.
 */
static int place_default_root(sc__cache_place *p, sc_error *err)
{
    char what[256], was[SC_PATH_MAX], who[64];
    struct stat st;
    if (sc__cache_root(NULL, p->root, sizeof p->root - 8) != SC_OK)
        return sc__seterr(err, SC_EINVAL, "the default cache directory's path is too long: "
                          "set SC_CACHE_DIR");
    memcpy(was, p->root, sizeof was);
    *strrchr(was, '/') = '\0'; /* $TMPDIR: nobody else may swap what is in it */
    int rc = sc__cachedir_check_ancestors(was[0] ? was : "/", 0, err);
    if (rc != SC_OK)
        return rc;
    if (mkdir(p->root, 0700) != 0 && errno != EEXIST)
        return sc__seterr(err, SC_EIO, "cache root '%s': %s", p->root, strerror(errno));
    int fd = open(p->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int known = fd >= 0 ? fstat(fd, &st) == 0 : lstat(p->root, &st) == 0;
    if (fd >= 0)
        close(fd);
    if (!known)
        return sc__seterr(err, SC_EIO, "cache root '%s': %s", p->root, strerror(errno));
    if (fd >= 0 && st.st_uid == getuid() && !(st.st_mode & 077))
        return SC_OK;
    place_describe(&st, what, sizeof what);
    memcpy(was, p->root, sizeof was);
    strcat(p->root, ".XXXXXX");
    if (!mkdtemp(p->root))
        return sc__seterr(err, SC_EIO, "cache root '%s' is %s: not this user's private "
                          "directory (uid %lu, 0700), and no fresh root could be made beside "
                          "it: %s", was, what, (unsigned long)getuid(), strerror(errno));
    p->own_root = 1;
    sc__log(p->log_level, SC__LOG_WARN, p->rank,
            "cache root '%s' is %s: not this user's private directory (uid %lu, 0700), so it "
            "is not used; this job caches in the fresh private root '%s' (cold), removed at "
            "its end; remove '%s' (or ask %s or an administrator to) or set SC_CACHE_DIR",
            was, what, (unsigned long)getuid(), p->root, was,
            sc__cachedir_user((unsigned)st.st_uid, who, sizeof who));
    return SC_OK;
}

/* The root: chosen, every directory down to it checked, and held open. */
static int place_root(sc__cache_place *p, const char *cache_dir, sc_error *err)
{
    int rc = SC_OK;
    if (!cache_dir[0])
        rc = place_default_root(p, err);
    else if ((size_t)snprintf(p->root, sizeof p->root, "%s", cache_dir) >= sizeof p->root)
        rc = sc__seterr(err, SC_EINVAL, "cache directory '%s' is too long", cache_dir);
    else if (place_mkdirs(p->root) != 0)
        rc = sc__seterr(err, SC_EIO, "cache directory '%s': %s", p->root, strerror(errno));
    if (rc == SC_OK)
        rc = sc__cachedir_check_ancestors(p->root, p->group, err);
    if (rc == SC_OK && (p->rootfd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = sc__seterr(err, SC_EIO, "cache directory '%s': %s", p->root, strerror(errno));
    return rc;
}

/*
 * Whether directory st may hold this cache: 0 yes; 1 someone else's
 * (another user's, a link, or in group mode one every user may write):
 * never used, fallen back from; -1 this user's but others may write it,
 * the user's own mistake: refused (err).
 */
static int place_check_dir(const sc__cache_place *p, const struct stat *st, sc_error *err)
{
    mode_t others = p->group ? 002 : 022;
    int mine = st->st_uid == getuid();
    int ours = p->group && sc__in_group((unsigned)st->st_gid) && !(st->st_mode & 002);
    if (!S_ISDIR(st->st_mode) || !(mine || ours))
        return 1;
    if (!mine || !(st->st_mode & others))
        return 0;
    sc__seterr(err, SC_EIO,
               "cache directory '%s' is a directory owned by uid %lu (group %lu) with mode %03o: "
               "another user could plant entries in it; it must be yours (uid %lu) and writable "
               "by you alone (chmod go-w)%s",
               p->dir, (unsigned long)st->st_uid, (unsigned long)st->st_gid,
               (unsigned)(st->st_mode & 07777), (unsigned long)getuid(),
               p->group ? ", not writable by everyone"
                        : ", or SC_CACHE_SHARE=group for a group's own scratch");
    return -1;
}

static void place_untake(sc__cache_place *p)
{
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    if (p->dfd >= 0)
        close(p->dfd);
    p->lock_fd = p->dfd = -1;
}

enum { TAKEN, BUSY, GONE, SQUATTED, REFUSED = -1, FAILED = -2 };

/*
 * The lock of the directory open at p->dfd (which is `dir` at `name`):
 * place_try's codes.  A lock that is no plain file (a symlink, a FIFO:
 * opened without blocking) or cannot be opened was put there by someone
 * else (a member, in group mode): fallen back from, never fatal.
 */
static int place_lock(sc__cache_place *p, const char *name, const struct stat *dir, char *why,
                      size_t n)
{
    struct stat st, now;
    p->lock_fd = openat(p->dfd, SC__CACHEDIR_LOCK,
                        O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        p->group ? 0660 : 0600);
    if (p->lock_fd < 0 && errno == ENOENT)
        return place_untake(p), GONE;
    if (p->lock_fd < 0 || fstat(p->lock_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *e = p->lock_fd < 0 ? strerror(errno) : "not a plain file";
        if (fstatat(p->dfd, SC__CACHEDIR_LOCK, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            char what[200];
            place_describe(&st, what, sizeof what);
            snprintf(why, n, "has a lock that is %s (%s)", what, e);
        } else
            snprintf(why, n, "has a lock that cannot be taken (%s)", e);
        return place_untake(p), SQUATTED;
    }
    if (p->group && st.st_uid == getuid())
        fchmod(p->lock_fd, 0660); /* past the umask: the group's processes take it too */
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        place_untake(p);
        errno = e;
        return e == EWOULDBLOCK ? BUSY : FAILED;
    }
    /* The lock still at its name, the directory still at its: else removed meanwhile. */
    if (fstatat(p->dfd, SC__CACHEDIR_LOCK, &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        !place_same(&st, &now) ||
        fstatat(p->rootfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || !place_same(dir, &now))
        return place_untake(p), GONE;
    return TAKEN;
}

/*
 * One try at directory `name` under the root: TAKEN (p->dfd, p->lock_fd
 * held), BUSY (another live process holds it), GONE (removed meanwhile:
 * try again), SQUATTED (someone else's: *why says whose), REFUSED (err),
 * FAILED (errno).
 */
static int place_try(sc__cache_place *p, const char *name, char *why, size_t n, sc_error *err)
{
    struct stat st;
    if (mkdirat(p->rootfd, name, 0700) != 0 && errno != EEXIST)
        return errno == ENOENT ? GONE : FAILED;
    p->dfd = openat(p->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (p->dfd < 0 && errno != ELOOP && errno != ENOTDIR)
        return errno == ENOENT ? GONE : FAILED;
    if (p->dfd < 0 ? fstatat(p->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0
                   : fstat(p->dfd, &st) != 0)
        return place_untake(p), GONE;
    int is = place_check_dir(p, &st, err);
    if (is != 0) {
        char what[200];
        place_describe(&st, what, sizeof what);
        snprintf(why, n, "is %s, not this user's: someone else made it", what);
        return place_untake(p), is > 0 ? SQUATTED : REFUSED;
    }
    if (p->group && st.st_uid == getuid())
        fchmod(p->dfd, 02770); /* a group's cache: its members write it, new files keep its group */
    return place_lock(p, name, &st, why, n);
}

/* place_try, a few times: a remover (gc, a cleanup) holds a lock only for a moment. */
static int place_take(sc__cache_place *p, const char *name, char *why, size_t n, sc_error *err)
{
    int r = GONE;
    for (int t = 0; t < 5 && (r == GONE || (r == BUSY && t < 3)); t++) {
        if (t)
            usleep(10000);
        r = place_try(p, name, why, n, err);
    }
    if (r == BUSY)
        snprintf(why, n, "is in use by another loader on this node (another process's, or "
                         "one this process has not closed)");
    if (r == GONE)
        snprintf(why, n, "keeps being removed or replaced");
    return r == BUSY || r == GONE ? SQUATTED : r;
}

/*
 * A private (cold) directory beside the shared one, for this process
 * alone: mkdtemp makes a name nobody could have made first, and gc knows
 * it (-p<pid>.XXXXXX): a killed process's goes at the next open.
 */
static int place_fall_back(sc__cache_place *p, const char *why, sc_error *err)
{
    char shared[SC_PATH_MAX], again[320];
    memcpy(shared, p->dir, sizeof shared);
    sc__cachedir_private(p->dir, sizeof p->dir);
    if (!mkdtemp(p->dir))
        return sc__seterr(err, SC_EIO, "cache '%s' %s, and no private directory could be made "
                          "beside it: %s", shared, why, strerror(errno));
    sc__log(p->log_level, SC__LOG_WARN, p->rank,
            "cache '%s' %s; using the private (cold) cache '%s' instead", shared, why, p->dir);
    int r = place_take(p, strrchr(p->dir, '/') + 1, again, sizeof again, err);
    p->private_dir = r == TAKEN;
    if (r == FAILED)
        return sc__seterr(err, SC_EIO, "cache '%s': %s", p->dir, strerror(errno));
    if (r != TAKEN && r != REFUSED)
        return sc__seterr(err, SC_EIO, "private cache '%s' %s", p->dir, again);
    return r == TAKEN ? SC_OK : SC_EIO;
}

/*
 * Private directories of processes that died without closing (killed
 * jobs): nothing can reuse them, so they go at the next open of the
 * shared one.  Dead means its lock is free (a process's flock dies with
 * it, in any pid namespace); a live process's, or another user's, stays.
 */
static void place_remove_stale(const sc__cache_place *p)
{
    const char *base = strrchr(p->dir, '/') + 1;
    size_t blen = strlen(base);
    int fd = dup(p->rootfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    sc_cache_dir_info *info = d ? malloc(sizeof *info) : NULL;
    struct dirent *e;
    if (!d && fd >= 0)
        close(fd);
    if (d)
        rewinddir(d); /* the offset is shared with rootfd's */
    while (info && (e = readdir(d)))
        if (!strncmp(e->d_name, base, blen) && !strncmp(e->d_name + blen, "-p", 2) &&
            sc__cachedir_describe(p->root, e->d_name, info) && info->owner_gone &&
            sc__cachedir_remove(info->path, info->dev, info->ino, -1) == 0)
            sc__log(p->log_level, SC__LOG_INFO, p->rank,
                    "removed '%s': the private cache of process %lld, which is gone", info->path,
                    (long long)info->pid);
    free(info);
    if (d)
        closedir(d);
}

/* Group mode trusts every member with every member's training data: said at each open. */
static void place_warn_group(const sc__cache_place *p)
{
    struct stat st;
    char g[64];
    if (!p->group || fstat(p->dfd, &st) != 0)
        return;
    sc__log(p->log_level, SC__LOG_WARN, p->rank,
            "SC_CACHE_SHARE=group: every member of group '%s' (gid %lu) can write the entries "
            "of '%s' and so choose the bytes this job trains on (an entry's checksum is no "
            "signature: whoever rewrites an entry can rewrite it); entries another member "
            "wrote are read into memory, never mapped, and checked on every read",
            sc__cachedir_group((unsigned)st.st_gid, g, sizeof g), (unsigned long)st.st_gid,
            p->dir);
}

int sc__cache_place_open(sc__cache_place *p, const char *cache_dir, uint64_t fingerprint,
                         sc_error *err)
{
    char why[320];
    int rc = place_root(p, cache_dir, err);
    if (rc != SC_OK)
        return rc;
    sc__cachedir_prefix(fingerprint, p->node, sizeof p->node);
    /* Room for the rank and the private suffix (-p<pid>.XXXXXX), and an entry's name after. */
    if (strlen(p->root) + strlen(p->node) + 96 > sizeof p->dir)
        return sc__seterr(err, SC_EINVAL, "cache directory '%s' is too long", p->root);
    snprintf(p->dir, sizeof p->dir, "%.3900s/%s%d", p->root, p->node, p->local_rank);
    int r = place_take(p, strrchr(p->dir, '/') + 1, why, sizeof why, err);
    if (r == TAKEN && p->own_root)
        p->private_dir = 1; /* the fresh root's: nobody else's, removed at close */
    else if (r == TAKEN)
        place_remove_stale(p); /* holding the shared directory: ours to tidy */
    else if (r == SQUATTED)
        rc = place_fall_back(p, why, err);
    else if (r == REFUSED)
        rc = SC_EIO;
    else
        rc = sc__seterr(err, SC_EIO, "cache directory '%s': %s", p->dir, strerror(errno));
    if (rc == SC_OK)
        place_warn_group(p);
    return rc;
}

int sc__cache_place_neighbor(const sc__cache_place *p, int lr)
{
    char name[96];
    struct stat st;
    snprintf(name, sizeof name, "%s%d", p->node, lr);
    int fd = openat(p->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && (fstat(fd, &st) != 0 || place_check_dir(p, &st, NULL) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

void sc__cache_place_close(sc__cache_place *p)
{
    /* A private directory is cold and nobody else's: it goes, before its lock. */
    if (p->private_dir && p->dfd >= 0)
        (void)sc__cachedir_remove_open(p->dir, p->dfd);
    place_untake(p);
    if (p->own_root && p->rootfd >= 0)
        (void)sc__cachedir_remove_open(p->root, p->rootfd);
    if (p->rootfd >= 0)
        close(p->rootfd);
    p->rootfd = -1;
    p->private_dir = p->own_root = 0;
}
