/*
 * cachedir.c - cache directories as whole things (see cachedir.h).
 *
 * A cache directory is `shardcache-<fingerprint>-l<local rank>` (a live
 * process that found it locked uses `...-p<pid>` beside it) under the
 * root.  It is in use while a process holds its lock (flock), so a live
 * job's directory is never touched; another user's neither.
 */
#include "cachedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "entry.h"
#include "error.h"
#include "output.h"
#include "log.h"
#include "vec.h"

static int cachedir_same(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/*
 * The lock of the directory open at dfd, taken without waiting: the fd,
 * -1 if a live process holds it, -2 if it has none (LOCK_EX makes it).
 */
static int cachedir_lock_at(int dfd, int how)
{
    /* To remove, there is always a lock to hold: made if missing. */
    int fd = openat(dfd, SC__CACHEDIR_LOCK,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (how == LOCK_EX ? O_CREAT : 0),
                    0600);
    struct stat held, now;
    if (fd < 0)
        return -2;
    if (flock(fd, how | LOCK_NB) == 0 && fstat(fd, &held) == 0 &&
        fstatat(dfd, SC__CACHEDIR_LOCK, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        cachedir_same(&held, &now))
        return fd;
    close(fd);
    return -1;
}

/* Directory `name` under rootfd, never through a symlink (ELOOP or ENOTDIR). */
static int cachedir_open_at(int rootfd, const char *name)
{
    return openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Whether the directory open at dfd is the one to remove: this user's,
 * and the one listed (dev, ino), or the one whose lock `held` is.
 */
static int cachedir_is_it(int dfd, uint64_t dev, uint64_t ino, int held)
{
    struct stat st, lock, mine;
    if (fstat(dfd, &st) != 0 || st.st_uid != getuid())
        return 0;
    if (held >= 0)
        return fstat(held, &mine) == 0 &&
               fstatat(dfd, SC__CACHEDIR_LOCK, &lock, AT_SYMLINK_NOFOLLOW) == 0 &&
               cachedir_same(&mine, &lock);
    return (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
}

/*
 * Empties the directory open at dfd (`name` under rootfd) and removes it:
 * each entry unlinked where it is (a symlink is removed, never followed;
 * a subdirectory is none of ours and stays, and with it the directory),
 * the lock last (an opener that finds it gone tries again), then the
 * directory, if `name` is still it.  0, or -1 (errno; ENOTEMPTY: a job
 * made files in it meanwhile).
 */
static int cachedir_empty_at(int rootfd, const char *name, int dfd)
{
    int fd = dup(dfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *e;
    struct stat was, now;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d); /* a dup shares its offset with dfd, which may have been read */
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            strcmp(e->d_name, SC__CACHEDIR_LOCK))
            unlinkat(dfd, e->d_name, 0);
    closedir(d);
    unlinkat(dfd, SC__CACHEDIR_LOCK, 0);
    if (fstat(dfd, &was) != 0 || fstatat(rootfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0)
        return -1;
    if (!cachedir_same(&was, &now)) {
        errno = ESTALE; /* swapped meanwhile: what is there now is not ours to remove */
        return -1;
    }
    return unlinkat(rootfd, name, AT_REMOVEDIR);
}

/* Splits dir into its root (opened, following a link: the user's own choice) and name. */
static int cachedir_open_root(const char *dir, const char **name)
{
    char root[SC_PATH_MAX + 64];
    const char *slash = strrchr(dir, '/');
    if (strlen(dir) >= sizeof root) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(root, sizeof root, "%.*s", slash ? (int)(slash - dir) : 1, slash ? dir : ".");
    *name = slash ? slash + 1 : dir;
    return open(slash == dir ? "/" : root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/*
 * Every removal of a cache directory works on descriptors: the name is
 * opened once, never through a symlink, and checked to be the directory
 * listed and this user's; from then on nothing is looked up by path, so
 * a name swapped for a symlink to another directory (by anyone who can
 * write the root) costs nothing but this removal.
 */
int sc__cachedir_remove(const char *dir, uint64_t dev, uint64_t ino, int held)
{
    const char *name;
    int rootfd = cachedir_open_root(dir, &name), rc = -1, why;
    int dfd = rootfd < 0 ? -1 : cachedir_open_at(rootfd, name);
    int fd = held;
    if (dfd >= 0 && !cachedir_is_it(dfd, dev, ino, held))
        errno = EPERM; /* another user's, or not the directory listed */
    else if (dfd >= 0 && held < 0 && (fd = cachedir_lock_at(dfd, LOCK_EX)) < 0)
        rc = 1; /* a live process holds it */
    else if (dfd >= 0)
        rc = cachedir_empty_at(rootfd, name, dfd);
    why = errno;
    if (fd >= 0 && fd != held)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (rootfd >= 0)
        close(rootfd);
    if (rc != 0 && why == ENOTEMPTY)
        return 1; /* a job made it again meanwhile: in use after all */
    errno = why;
    return rc;
}

int sc__cachedir_remove_open(const char *dir, int dfd)
{
    const char *name;
    struct stat st;
    int rootfd = cachedir_open_root(dir, &name), rc = -1, why = EPERM;
    if (rootfd < 0 || fstat(dfd, &st) != 0)
        why = errno;
    else if (st.st_uid == getuid()) {
        rc = cachedir_empty_at(rootfd, name, dfd);
        why = errno;
    }
    if (rootfd >= 0)
        close(rootfd);
    errno = why;
    return rc;
}

const char *sc__cachedir_user(unsigned uid, char *buf, size_t n)
{
    char tmp[4096];
    struct passwd pw, *p = NULL;
    if (getpwuid_r((uid_t)uid, &pw, tmp, sizeof tmp, &p) == 0 && p)
        snprintf(buf, n, "%s", p->pw_name);
    else
        snprintf(buf, n, "uid %u", uid);
    return buf;
}

const char *sc__cachedir_group(unsigned gid, char *buf, size_t n)
{
    char tmp[4096];
    struct group gr, *g = NULL;
    if (getgrgid_r((gid_t)gid, &gr, tmp, sizeof tmp, &g) == 0 && g)
        snprintf(buf, n, "%s", g->gr_name);
    else
        snprintf(buf, n, "gid %u", gid);
    return buf;
}

/*
 * Whether others may write directory st without the sticky bit (with
 * it, as /tmp has, they cannot rename or remove what is not theirs).
 */

int sc__cachedir_check_ancestors(const char *dir, int group, sc_error *err)
{
    char at[PATH_MAX], who[64], grp[64];
    struct stat st;
    int swap = sc__path_swappable(dir, group, at, sizeof at, &st);
    if (swap < 0)
        return sc__seterr(err, SC_EIO, "cache directory '%s': %s", dir, strerror(errno));
    if (!swap)
        return SC_OK;
    return sc__seterr(err, SC_EINVAL,
                      "cache directory '%s': '%s' (owner %s, group %s, mode %03o) may be "
                      "written by %s without the sticky bit: they could rename the cache away "
                      "and put their own in its place; use a directory whose every parent only "
                      "you can write%s",
                      dir, at, sc__cachedir_user((unsigned)st.st_uid, who, sizeof who),
                      sc__cachedir_group((unsigned)st.st_gid, grp, sizeof grp),
                      (unsigned)(st.st_mode & 07777),
                      st.st_mode & 002 ? "every user" : "the members of its group",
                      group ? " (or your group: SC_CACHE_SHARE=group)"
                            : ", or one with the sticky bit, like /tmp");
}

void sc__cachedir_prefix(uint64_t fingerprint, char *buf, size_t n)
{
    snprintf(buf, n, "shardcache-%016llx-l", (unsigned long long)fingerprint);
}

void sc__cachedir_private(char *dir, size_t n)
{
    size_t len = strlen(dir);
    snprintf(dir + len, n - len, "-p%ld.XXXXXX", (long)getpid());
}

/*
 * Exactly shardcache-<16 hex>-l<rank>[-p<pid>[.XXXXXX]] (the suffix a
 * private directory's mkdtemp adds): nothing else is ours to remove.
 */
static int cachedir_parse_name(const char *name, sc_cache_dir_info *d)
{
    static const char digits[] = "0123456789";
    unsigned long long fp;
    int end = 0;
    if (strncmp(name, "shardcache-", 11) || strspn(name + 11, "0123456789abcdef") != 16 ||
        strncmp(name + 27, "-l", 2) || !strspn(name + 29, digits) ||
        sscanf(name, "shardcache-%16llx-l%d%n", &fp, &d->local_rank, &end) != 2 ||
        end != 29 + (int)strspn(name + 29, digits))
        return 0;
    d->fingerprint = fp;
    if (!name[end])
        return 1;
    int more = (int)strspn(name + end + 2, digits);
    const char *tail = name + end + 2 + more;
    static const char temp[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int suffix = !*tail || (tail[0] == '.' && strspn(tail + 1, temp) == 6 && !tail[7]);
    return !strncmp(name + end, "-p", 2) && more && suffix &&
           sscanf(name + end + 2, "%" SCNd64, &d->pid) == 1 && d->pid > 0;
}

/* A file's stamp as the note keeps it: size, mtime (s), inode, change time (ns). */
static void cachedir_stamp(const struct stat *st, unsigned long long v[4])
{
    v[0] = (unsigned long long)st->st_size;
    v[1] = (unsigned long long)st->st_mtime;
    v[2] = (unsigned long long)st->st_ino;
    v[3] = (unsigned long long)st->st_ctim.tv_sec * 1000000000ull +
           (unsigned long long)st->st_ctim.tv_nsec;
}

void sc__cachedir_note_source(int dfd, const char *source, int mode)
{
    char tmp[32], real[SC_PATH_MAX];
    struct stat st;
    unsigned long long v[4];
    /* Absolute: `shardcache cache gc` may run from anywhere. */
    if (!realpath(source, real) || stat(real, &st) != 0)
        return;
    cachedir_stamp(&st, v);
    snprintf(tmp, sizeof tmp, "source.%ld", (long)getpid());
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return;
    }
    fprintf(f, "%s\n%llu %llu %llu %llu\n", real, v[0], v[1], v[2], v[3]);
    if (fclose(f) != 0 || renameat(dfd, tmp, dfd, "source") != 0)
        unlinkat(dfd, tmp, 0);
}

/*
 * The source it was made from, and whether that source is still the same:
 * its stamp (a note from before inodes and change times were kept has the
 * size and mtime only, and is judged by them).
 */
static void cachedir_read_source(sc_cache_dir_info *d, int dfd)
{
    unsigned long long was[4], now[4];
    struct stat st;
    int fd = openat(dfd, "source", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f && fd >= 0)
        close(fd);
    d->source[0] = '\0';
    if (f && fgets(d->source, sizeof d->source, f))
        d->source[strcspn(d->source, "\n")] = '\0';
    int known = f ? fscanf(f, "%llu %llu %llu %llu", &was[0], &was[1], &was[2], &was[3]) : 0;
    if (f)
        fclose(f);
    if (known < 2)
        return;
    if (stat(d->source, &st) == 0) {
        cachedir_stamp(&st, now);
        /* A directory's own stamp moves with any file added: only files are judged. */
        d->source_changed = !S_ISDIR(st.st_mode) && memcmp(was, now, sizeof *was * (size_t)known);
        return;
    }
    /* Gone, or only not mounted here?  Gone if its directory is here without it. */
    char parent[SC_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", d->source);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = '\0';
    d->source_changed = errno == ENOENT && slash && stat(parent, &st) == 0;
}

/* Its entries, their bytes and the latest use. */
static void cachedir_count(sc_cache_dir_info *d, int dfd)
{
    int fd = dup(dfd);
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *e;
    if (!dir && fd >= 0)
        close(fd);
    while (dir && (e = readdir(dir))) {
        struct stat st;
        if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        uint64_t shard;
        if (sc__entry_name_parse(e->d_name, &shard) == 1) {
            d->entries++;
            d->bytes += (uint64_t)st.st_size;
        }
        if (st.st_mtime > d->last_use)
            d->last_use = st.st_mtime;
    }
    if (dir)
        closedir(dir);
}

/*
 * Opens a listed directory into *dfd, never through a symlink, and tells
 * it in *st: 1, or 0 if it is no directory.  Another user's unreadable
 * one is told by lstat alone (*dfd -1).
 */
static int cachedir_open_listed(const char *path, int *dfd, struct stat *st)
{
    *dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0)
        return errno == EACCES && lstat(path, st) == 0 && S_ISDIR(st->st_mode);
    if (fstat(*dfd, st) == 0)
        return 1;
    close(*dfd);
    *dfd = -1;
    return 0;
}

int sc__cachedir_describe(const char *root, const char *name, sc_cache_dir_info *d)
{
    struct stat st;
    int dfd;
    memset(d, 0, sizeof *d);
    if (!cachedir_parse_name(name, d) ||
        (size_t)snprintf(d->path, sizeof d->path, "%s/%s", root, name) >= sizeof d->path ||
        !cachedir_open_listed(d->path, &dfd, &st))
        return 0;
    /* Told of the directory opened: a removal refuses any other at its name. */
    d->dev = (uint64_t)st.st_dev;
    d->ino = (uint64_t)st.st_ino;
    d->mine = st.st_uid == getuid();
    /* Another user's unreadable one is listed by name and owner alone. */
    int fd = dfd < 0 ? -2 : cachedir_lock_at(dfd, LOCK_SH); /* looking: a job can take it */
    d->in_use = fd == -1;
    /* A private dir's lock dies with its process (another user's cannot be told). */
    d->owner_gone = d->mine && d->pid > 0 && fd != -1;
    if (fd >= 0)
        close(fd);
    if (dfd >= 0) {
        cachedir_read_source(d, dfd);
        cachedir_count(d, dfd);
        close(dfd);
    }
    return 1;
}

int sc_cache_list(const char *root, int (*each)(const sc_cache_dir_info *d, void *arg),
                  void *arg, sc_error *err)
{
    if (!root || !each)
        return sc__seterr(err, SC_EINVAL, "sc_cache_list: NULL argument");
    DIR *dir = opendir(root);
    if (!dir)
        return sc__seterr(err, SC_EIO, "cache root '%s': %s", root, strerror(errno));
    sc_cache_dir_info *d = malloc(sizeof *d);
    struct dirent *e;
    int stop = 0;
    while (d && !stop && (e = readdir(dir)))
        if (sc__cachedir_describe(root, e->d_name, d))
            stop = each(d, arg);
    closedir(dir);
    free(d);
    return d ? sc__errok(err) : sc__seterr(err, SC_ENOMEM, "cache root '%s': no memory", root);
}

int sc_cache_remove(const char *path, int *removed, sc_error *err)
{
    if (!path || !removed)
        return sc__seterr(err, SC_EINVAL, "sc_cache_remove: NULL argument");
    *removed = 0;
    char root[SC_PATH_MAX + 64];
    snprintf(root, sizeof root, "%s", path);
    char *slash = strrchr(root, '/');
    sc_cache_dir_info *d = slash ? malloc(sizeof *d) : NULL;
    if (slash)
        *slash = '\0';
    int is = d && sc__cachedir_describe(slash == root ? "/" : root, slash + 1, d);
    int mine = is && d->mine;
    uint64_t dev = mine ? d->dev : 0, ino = mine ? d->ino : 0;
    free(d);
    if (!mine)
        return sc__seterr(err, SC_EINVAL, "'%s' is not a cache directory of this user", path);
    int rc = sc__cachedir_remove(path, dev, ino, -1);
    if (rc < 0)
        return sc__seterr(err, SC_EIO, "cannot remove '%s': %s", path, strerror(errno));
    *removed = rc == 0;
    return sc__errok(err);
}

/* ---- room for a new cache ------------------------------------------------------ */

typedef struct cachedir_set {
    sc_cache_dir_info *d;
    size_t n, cap;
    uint64_t keep, held; /* held: the bytes keep's own directories hold already */
    int oom;
} cachedir_set;

/*
 * Keeps what could be evicted: this user's idle directories of another
 * dataset; and sums what keep's shared directories hold (a private one
 * goes at its process's close).
 */
static int cachedir_gather(const sc_cache_dir_info *d, void *arg)
{
    cachedir_set *s = arg;
    if (d->fingerprint == s->keep && !d->pid)
        s->held += d->bytes;
    if (!d->mine || d->in_use || d->fingerprint == s->keep)
        return 0;
    sc_cache_dir_info *p = sc__vec_grow(s->d, &s->cap, s->n + 1, sizeof *p);
    if (!p)
        return s->oom = 1;
    s->d = p;
    s->d[s->n++] = *d;
    return 0;
}

static int cachedir_older(const void *a, const void *b)
{
    const sc_cache_dir_info *x = a, *y = b;
    return (x->last_use > y->last_use) - (x->last_use < y->last_use);
}

#ifdef SC_TESTING
/* Every cache directory's bytes under root (the test hook's notion of used). */
static int cachedir_sum(const sc_cache_dir_info *d, void *arg)
{
    *(uint64_t *)arg += d->bytes;
    return 0;
}
#endif

int sc__cachedir_space(const char *root, uint64_t *size, uint64_t *avail)
{
#ifdef SC_TESTING
    const char *fake = getenv("SC_TEST_CACHE_FS");
    unsigned long long s, used;
    if (fake && sscanf(fake, "%llu,%llu", &s, &used) == 2) {
        uint64_t caches = 0;
        sc_cache_list(root, cachedir_sum, &caches, NULL);
        *size = s;
        *avail = s > used + caches ? s - used - caches : 0;
        return 0;
    }
#endif
    struct statvfs v;
    if (statvfs(root, &v) != 0)
        return -1;
    *size = (uint64_t)v.f_blocks * v.f_frsize;
    *avail = (uint64_t)v.f_bavail * v.f_frsize;
    return 0;
}

uint64_t sc__cachedir_make_room(const char *root, uint64_t keep, uint64_t want, int rank,
                                int log_level)
{
    uint64_t size, avail, freed = 0;
    struct stat st;
    /* Only under a root of this user's (the cache's open refuses any other, after this). */
    if (!want || lstat(root, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        sc__cachedir_space(root, &size, &avail) != 0)
        return 0;
    uint64_t reserve = size / 100 * SC_CACHE_RESERVE_PCT;
    uint64_t room = avail > reserve ? avail - reserve : 0;
    if (room >= want)
        return 0;
    cachedir_set s = {.keep = keep};
    sc_cache_list(root, cachedir_gather, &s, NULL);
    /* What this dataset's caches hold already is no room to make (a warm job evicts nothing). */
    want = want > s.held ? want - s.held : 0;
    if (s.n)
        qsort(s.d, s.n, sizeof *s.d, cachedir_older);
    for (size_t i = 0; i < s.n && room + freed < want; i++) {
        const sc_cache_dir_info *d = &s.d[i];
        char when[32] = "-";
        time_t t = (time_t)d->last_use;
        if (sc__cachedir_remove(d->path, d->dev, d->ino, -1) != 0)
            continue; /* taken by a job meanwhile, or not removable: the next */
        freed += d->bytes;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
        sc__log(log_level, SC__LOG_WARN, rank,
                "removed the cache '%s' (%.1f MiB of '%s', last used %s), the least recently "
                "used one of another dataset: this dataset's cache wants %.1f MiB more than its "
                "%.1f MiB and %.1f MiB were free above the %d%% reserve of the filesystem",
                d->path, (double)d->bytes / (1 << 20), d->source[0] ? d->source : "?", when,
                (double)want / (1 << 20), (double)s.held / (1 << 20), (double)room / (1 << 20),
                SC_CACHE_RESERVE_PCT);
    }
    free(s.d);
    return freed;
}
