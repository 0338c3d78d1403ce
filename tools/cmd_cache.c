/*
 * cmd_cache.c - `shardcache cache list|gc|clear`: what this node's caches
 * hold, and reclaiming the ones nothing will read again.
 *
 * A cache directory is `shardcache-<fingerprint>-l<local rank>` (a live
 * process that found it locked uses `...-p<pid>` beside it) under the root
 * (`sc_cache_root`).  It is in use while a process holds its lock (flock),
 * so a live job's directory is never touched; another user's neither.
 * `gc` removes directories whose source changed or is gone (their
 * fingerprint is never asked for again) and private directories of
 * processes that are gone; `clear` removes every directory not in use.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* What one cache directory holds and whether anything may remove it. */
typedef struct cache_dir {
    char path[SC_PATH_MAX + 300], source[SC_PATH_MAX];
    unsigned long long fingerprint;
    int local_rank;
    long pid;           /* a private directory's process, else 0 */
    uint64_t entries, bytes;
    time_t last_use;
    int in_use, mine, source_changed, owner_gone;
} cache_dir;

/*
 * Its lock, taken without waiting (`how`: LOCK_SH to look, LOCK_EX to
 * remove): the fd, held until closed; -1 if a live process holds it (in
 * use), -2 if it has no lock file.
 */
static int cmd_cache_lock(const cache_dir *d, int how)
{
    char lock[sizeof d->path + 8];
    struct stat held, now;
    snprintf(lock, sizeof lock, "%s/lock", d->path);
    /* To remove, there is always a lock to hold: made if missing. */
    int fd = open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (how == LOCK_EX ? O_CREAT : 0), 0600);
    if (fd < 0)
        return -2;
    /* Held, and still the directory's lock (not one another remover unlinked). */
    if (flock(fd, how | LOCK_NB) == 0 && fstat(fd, &held) == 0 && lstat(lock, &now) == 0 &&
        held.st_ino == now.st_ino && held.st_dev == now.st_dev)
        return fd;
    close(fd);
    return -1;
}

/* The source it was made from, and whether that source is still the same. */
static void cmd_cache_read_source(cache_dir *d)
{
    char meta[sizeof d->path + 16];
    long long size = -1, mtime = -1;
    struct stat st;
    snprintf(meta, sizeof meta, "%s/source", d->path);
    FILE *f = fopen(meta, "r");
    d->source[0] = '\0';
    if (f && fgets(d->source, sizeof d->source, f))
        d->source[strcspn(d->source, "\n")] = '\0';
    int known = f && fscanf(f, "%lld %lld", &size, &mtime) == 2;
    if (f)
        fclose(f);
    if (!known)
        return;
    if (stat(d->source, &st) == 0) {
        /* A directory's own mtime moves with any file added: only files are judged. */
        d->source_changed = !S_ISDIR(st.st_mode) &&
                            (st.st_size != size || (long long)st.st_mtime != mtime);
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
static void cmd_cache_count(cache_dir *d)
{
    DIR *dir = opendir(d->path);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        char file[sizeof d->path + 300];
        struct stat st;
        snprintf(file, sizeof file, "%s/%s", d->path, e->d_name);
        if (lstat(file, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (e->d_name[0] == 's' && strstr(e->d_name, ".h5") && !strstr(e->d_name, ".tmp.")) {
            d->entries++;
            d->bytes += (uint64_t)st.st_size;
        }
        if (st.st_mtime > d->last_use)
            d->last_use = st.st_mtime;
    }
    if (dir)
        closedir(dir);
}

/* Exactly shardcache-<16 hex>-l<rank>[-p<pid>]: nothing else is ours to remove. */
static int cmd_cache_parse_name(const char *name, cache_dir *d)
{
    int end = 0, more = 0;
    static const char digits[] = "0123456789";
    if (strncmp(name, "shardcache-", 11) || strspn(name + 11, "0123456789abcdef") != 16 ||
        strncmp(name + 27, "-l", 2) || !strspn(name + 29, digits) ||
        sscanf(name, "shardcache-%16llx-l%d%n", &d->fingerprint, &d->local_rank, &end) != 2 ||
        end != 29 + (int)strspn(name + 29, digits))
        return 0;
    if (!name[end])
        return 1;
    more = (int)strspn(name + end + 2, digits);
    return !strncmp(name + end, "-p", 2) && more && !name[end + 2 + more] &&
           sscanf(name + end + 2, "%ld", &d->pid) == 1 && d->pid > 0;
}

/* 1 and *d filled if `name` under root is a cache directory. */
static int cmd_cache_describe(const char *root, const char *name, cache_dir *d)
{
    struct stat st;
    memset(d, 0, sizeof *d);
    if (!cmd_cache_parse_name(name, d))
        return 0;
    snprintf(d->path, sizeof d->path, "%s/%s", root, name);
    if (lstat(d->path, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    d->mine = st.st_uid == getuid();
    int fd = cmd_cache_lock(d, LOCK_SH); /* looking only: a job can still take it after */
    d->in_use = fd == -1;
    /* A private dir's lock dies with its process (another user's cannot be told). */
    d->owner_gone = d->mine && d->pid > 0 && fd != -1;
    if (fd >= 0)
        close(fd);
    cmd_cache_read_source(d);
    cmd_cache_count(d);
    return 1;
}

/*
 * Removes a cache directory while holding its lock, so no job can be
 * using it: its files (never a subdirectory), the lock last (a job that
 * opened it meanwhile finds it gone and starts again), then the directory.
 * 0 removed, 1 a live process holds it after all, -1 an error (errno).
 */
static int cmd_cache_remove(const cache_dir *d)
{
    int fd = cmd_cache_lock(d, LOCK_EX);
    if (fd < 0)
        return 1;
    DIR *dir = opendir(d->path);
    struct dirent *e;
    char file[sizeof d->path + 300];
    while (dir && (e = readdir(dir))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "lock")) {
            snprintf(file, sizeof file, "%s/%s", d->path, e->d_name);
            unlink(file);
        }
    }
    if (dir)
        closedir(dir);
    snprintf(file, sizeof file, "%s/lock", d->path);
    unlink(file);
    int rc = rmdir(d->path);
    int why = errno;
    close(fd);
    if (rc != 0 && why == ENOTEMPTY)
        return 1; /* a job made it again meanwhile: in use after all */
    errno = why;
    return rc;
}

static void cmd_cache_print(const cache_dir *d)
{
    char when[32] = "-";
    if (d->last_use)
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&d->last_use));
    printf("%s  fingerprint %016llx  local rank %d  %llu entries  %.1f MiB  last use %s  %s"
           "%s  source %s%s\n",
           d->path, d->fingerprint, d->local_rank, (unsigned long long)d->entries,
           (double)d->bytes / (1 << 20), when,
           !d->mine ? "unknown" : d->in_use ? "in use" : d->owner_gone ? "owner gone" : "idle",
           d->mine ? "" : " (another user's)", d->source[0] ? d->source : "?",
           d->source_changed ? " (changed)" : "");
}

/* What `action` (0 list, 1 gc, 2 clear) does with one directory. */
static int cmd_cache_act(int action, const cache_dir *d, uint64_t *freed)
{
    cmd_cache_print(d);
    int stale = d->source_changed || d->owner_gone;
    if (action == 0 || d->in_use || !d->mine || (action == 1 && !stale))
        return 0;
    int rc = cmd_cache_remove(d);
    if (rc == 1)
        return 0; /* taken by a job meanwhile: in use after all */
    if (rc != 0) {
        fprintf(stderr, "shardcache cache: cannot remove '%s': %s\n", d->path, strerror(errno));
        return 1;
    }
    printf("removed %s\n", d->path);
    *freed += d->bytes;
    return 0;
}

static int cmd_cache_usage(FILE *to)
{
    fprintf(to, "usage: shardcache cache list|gc|clear [--cache-dir DIR]\n"
                "  list   each cache directory: fingerprint, source, entries, bytes, last use,\n"
                "         in use / idle / owner gone\n"
                "  gc     remove those whose source changed or whose private owner is gone\n"
                "  clear  remove every one not in use\n"
                "  --cache-dir DIR  the root (default: SC_CACHE_DIR, else\n"
                "                   ${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/shardcache-<uid>)\n"
                "A directory a live job holds, or another user's, is never removed.\n");
    return to == stdout ? 0 : 2;
}

int cmd_cache(int argc, char **argv)
{
    static const char *const actions[] = {"list", "gc", "clear"};
    static const struct option longs[] = {{"cache-dir", required_argument, NULL, 'd'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    sc_config cfg;
    if (cli_config(&cfg) != 0)
        return 2;
    int opt, action = -1;
    while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (opt == 'h')
            return cmd_cache_usage(stdout);
        if (opt != 'd')
            return cmd_cache_usage(stderr);
        snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s", optarg);
    }
    if (optind != argc - 1 || cli_choice("cache", argv[optind], actions, 3, &action) != 0)
        return cmd_cache_usage(stderr);
    char root[SC_PATH_MAX];
    if (sc_cache_root(&cfg, root, sizeof root) != SC_OK) {
        fprintf(stderr, "shardcache cache: the cache root's path is too long\n");
        return 2;
    }
    DIR *dir = opendir(root);
    if (!dir) {
        printf("no caches under %s (%s)\n", root, strerror(errno));
        return 0;
    }
    int failed = 0, n = 0;
    uint64_t freed = 0;
    struct dirent *e;
    cache_dir d;
    while ((e = readdir(dir)))
        if (cmd_cache_describe(root, e->d_name, &d))
            n++, failed |= cmd_cache_act(action, &d, &freed);
    closedir(dir);
    printf("%d cache directories under %s%s", n, root, action ? "" : "\n");
    if (action)
        printf(", %.1f MiB freed\n", (double)freed / (1 << 20));
    return failed;
}
