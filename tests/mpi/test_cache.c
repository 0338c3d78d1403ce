/*
 * The node-local cache under mpiexec -n 1, 2 and 4.
 *
 * Across 3 sticky epochs, the bytes a rank reads from the source are
 * exactly the bytes of the shards it is given and has never held; every
 * byte it serves equals the source's; a capacity bound holds; a re-open
 * starts warm; a second process on the same directory gets its own; a
 * damaged entry is repaired with the right bytes; and a loader's epoch
 * summary says where every byte it loaded came from; two threads wanting
 * one uncached shard at once read the source once; none waits on a
 * transfer from another node; and entries are written off the read path.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "entry.h"
#include "fault.h"
#include "sc_h5test.h"
#include "sc_test.h"
#include "source.h"

static int rank, size;
static char dir[1024], src[1200], cachedir[1200];

enum { NSHARDS = 48, SHARD = 25, W = 16 }; /* W int32 per sample */

static void make_source(void)
{
    snprintf(src, sizeof src, "%s/src.h5", dir);
    snprintf(cachedir, sizeof cachedir, "%s/cache", dir);
    if (rank == 0) {
        uint64_t n = (uint64_t)NSHARDS * SHARD - 7; /* a short last shard */
        int32_t *x = malloc(sizeof *x * n * W);
        int64_t *y = malloc(sizeof *y * n);
        for (uint64_t i = 0; i < n * W; i++)
            x[i] = (int32_t)(i * 2654435761u);
        for (uint64_t i = 0; i < n; i++)
            y[i] = (int64_t)i;
        uint64_t dx[2] = {n, W}, dy[1] = {n};
        assert_int_equal(sc_t_write(src, "/x", H5T_NATIVE_INT32, 2, dx, x, 1), 0);
        assert_int_equal(sc_t_write(src, "/y", H5T_NATIVE_INT64, 1, dy, y, 0), 0);
        free(x);
        free(y);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static sc_config config(uint64_t cap)
{
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", src);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s", cachedir);
    c.shard_size = SHARD;
    c.batch_size = 5;
    c.mode = SC_SHUFFLE_STICKY;
    c.exchange = 0.25;
    c.seed = 77;
    c.cache_bytes = cap;
    c.log_level = 0;
    return c;
}

static void open_both(const sc_config *cfg, sc_dataset **ds, sc_cache **c)
{
    sc_error err;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, cfg, ds, &err), &err);
    SC_ASSERT_OK(sc_cache_open(*ds, MPI_COMM_WORLD, cfg, c, &err), &err);
}

typedef struct bufs {
    int32_t x[SHARD * W], x2[SHARD * W];
    int64_t y[SHARD], y2[SHARD];
} bufs;

/* Reads shard k through the cache and checks it against the source. */
static void read_checked(sc_cache *c, sc_dataset *ds, uint64_t k, bufs *b)
{
    void *via[2] = {b->x, b->y}, *direct[2] = {b->x2, b->y2};
    sc_error err;
    const uint64_t *sizes;
    sc_dataset_shard_sizes(ds, &sizes);
    memset(b->x, 0, sizeof b->x);
    SC_ASSERT_OK(sc_cache_read(c, k, via, &err), &err);
    SC_ASSERT_OK(sc_dataset_read_shard(ds, k, direct, &err), &err);
    assert_memory_equal(b->x, b->x2, sizes[k] * W * sizeof(int32_t));
    assert_memory_equal(b->y, b->y2, sizes[k] * sizeof(int64_t));
}

/* The dataset and a cache of its own under dir/sub, as a job would open them. */
static void open_in(const char *sub, sc_config *cfg, sc_dataset **ds, sc_cache **c)
{
    *cfg = config(0);
    snprintf(cfg->cache_dir, sizeof cfg->cache_dir, "%s/%s", dir, sub);
    open_both(cfg, ds, c);
}

/* The payload bytes of shard k: what a check of its entry covers. */
static uint64_t shard_bytes(sc_dataset *ds, uint64_t k)
{
    const uint64_t *sizes;
    sc_dataset_info di;
    sc_dataset_shard_sizes(ds, &sizes);
    sc_dataset_get_info(ds, &di);
    return sizes[k] * di.sample_bytes;
}

/*
 * Names planted in a cache directory are never followed: a symlinked
 * temporary name (O_EXCL) and a symlinked entry (O_NOFOLLOW) pointing at a
 * file outside it leave that file untouched, and the bytes served are the
 * source's.  First in the program: this process's writers count from 0.
 */
static void test_planted_names_are_not_followed(void **state)
{
    (void)state;
    sc_config cfg = config(0);
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/planted", dir);
    sc_dataset *ds;
    sc_error err;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err), &err);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    char cdir[SC_PATH_MAX + 64], outside[SC_PATH_MAX], link[2 * SC_PATH_MAX];
    snprintf(cdir, sizeof cdir, "%s/shardcache-%016llx-l%d", cfg.cache_dir,
             (unsigned long long)di.fingerprint, rank); /* one node: local rank = rank */
    snprintf(outside, sizeof outside, "%s/outside-%d", dir, rank);
    FILE *f = fopen(outside, "w");
    fputs("precious", f);
    fclose(f);
    mkdir(cfg.cache_dir, 0700);
    assert_int_equal(mkdir(cdir, 0700), 0);
    uint64_t temp = (uint64_t)rank, entry = (uint64_t)(rank + size); /* this rank's shards */
    snprintf(link, sizeof link, "%s/s%llu.h5", cdir, (unsigned long long)entry);
    assert_int_equal(symlink(outside, link), 0);
    sc_cache *c;
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    /* After the open, whose scan clears leftover temporaries. */
    for (int n = 0; n < 64; n++) {
        char tmp[2 * SC_PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/s%llu.h5.tmp.%ld.%d", cdir, (unsigned long long)temp,
                 (long)getpid(), n);
        assert_int_equal(symlink(outside, tmp), 0);
    }
    bufs *b = malloc(sizeof *b);
    read_checked(c, ds, temp, b);  /* its temporary name is taken: served, not cached */
    read_checked(c, ds, entry, b); /* its entry is a symlink: repaired, served */
    read_checked(c, ds, entry, b);
    char got[16] = "";
    f = fopen(outside, "r");
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, "precious");
    /* The planted entry is gone (the failed write paused admissions: not rewritten). */
    struct stat st;
    assert_true(lstat(link, &st) != 0 || (S_ISREG(st.st_mode) && !(st.st_mode & 077)));
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

/*
 * The cache directory removed mid-job (a node's scratch wiped): shards
 * cached before and shards never cached are served from the source with
 * the right bytes, and the cache goes on.
 */
static void test_vanished_directory(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    open_in("vanishing", &cfg, &ds, &c);
    bufs *b = malloc(sizeof *b);
    uint64_t before = (uint64_t)rank, after = (uint64_t)(rank + size);
    read_checked(c, ds, before, b); /* written */
    char cmd[SC_PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sc_cache_dir(c));
    assert_int_equal(system(cmd), 0);
    read_checked(c, ds, before, b); /* its entry is gone: repaired, from the source */
    read_checked(c, ds, after, b);  /* cannot be written: served anyway */
    read_checked(c, ds, after, b);
    sc_cache_stats st;
    sc_cache_get_stats(c, &st);
    assert_true(st.repairs >= 1);
    assert_true(st.misses >= 3);
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

static void test_sticky_epochs_read_only_moved_shards(void **state)
{
    (void)state;
    sc_config cfg = config(0);
    sc_dataset *ds;
    sc_cache *c;
    sc_error err;
    bufs *b = malloc(sizeof *b);
    open_both(&cfg, &ds, &c);
    const uint64_t *sizes;
    sc_dataset_shard_sizes(ds, &sizes);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);

    unsigned char held[NSHARDS] = {0}, node_held[NSHARDS] = {0};
    sc_plan *prev = NULL;
    uint64_t moved_total = 0;
    for (uint64_t e = 0; e < 3; e++) {
        sc_plan_params p;
        sc_plan *plan;
        sc__dataset_plan_params(ds, &cfg, (uint32_t)size, e, &p);
        SC_ASSERT_OK(sc_plan_share(MPI_COMM_WORLD, &p, prev, &plan, &err), &err);
        const uint32_t *mine;
        uint64_t n;
        sc_plan_rank(plan, (uint32_t)rank, &mine, &n, NULL);
        SC_ASSERT_OK(sc_cache_plan_ahead(c, mine, n), NULL);

        /*
         * A shard this rank does not hold comes from another local rank's
         * cache when one of them holds it (every rank here shares the node;
         * it is served from there, not copied), else from the source.
         */
        uint64_t want_bytes = 0, want_new = 0, want_neighbor = 0;
        for (uint64_t i = 0; i < n; i++)
            if (!held[mine[i]] && !node_held[mine[i]]) {
                want_bytes += sizes[mine[i]] * di.sample_bytes;
                want_new++;
            } else if (!held[mine[i]]) {
                want_neighbor++;
            }
        sc_cache_stats before, after;
        sc_cache_get_stats(c, &before);
        for (uint64_t i = 0; i < n; i++) {
            read_checked(c, ds, mine[i], b);
            /* Read from the source, so cached here; a neighbor's stays there. */
            held[mine[i]] |= !node_held[mine[i]];
        }
        sc_cache_get_stats(c, &after);
        /* Exactly the shards nobody on the node held came from the source. */
        assert_int_equal(after.bytes_from_source - before.bytes_from_source, want_bytes);
        assert_int_equal(after.misses - before.misses, want_new);
        assert_int_equal(after.neighbor_hits - before.neighbor_hits, want_neighbor);
        assert_int_equal(after.hits - before.hits, n - want_new);
        /* Every rank's reads of this epoch are cached before the next begins. */
        MPI_Barrier(MPI_COMM_WORLD);
        for (uint32_t r = 0; r < (uint32_t)size; r++) {
            const uint32_t *theirs;
            uint64_t k;
            sc_plan_rank(plan, r, &theirs, &k, NULL);
            for (uint64_t i = 0; i < k; i++)
                node_held[theirs[i]] = 1;
        }
        if (e > 0) {
            sc_plan_info in;
            sc_plan_get_info(plan, &in);
            moved_total += in.moved;
        }
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    /* Across the job, epochs 2-3 read no more than the shards that moved. */
    sc_cache_stats st;
    sc_cache_get_stats(c, &st);
    uint64_t misses = st.misses, all = 0;
    MPI_Allreduce(&misses, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    assert_true(all <= NSHARDS + moved_total);
    if (size == 1)
        assert_int_equal(all, NSHARDS);

    /* A re-open (a second job on the same nodes) is warm from the start. */
    sc_cache_close(c);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    sc_cache_get_stats(c, &st);
    uint64_t count = 0;
    for (int k = 0; k < NSHARDS; k++)
        count += held[k];
    assert_int_equal(st.entries, count);
    for (int k = 0; k < NSHARDS; k++)
        if (held[k])
            read_checked(c, ds, (uint64_t)k, b);
    sc_cache_get_stats(c, &st);
    assert_int_equal(st.misses, 0);
    assert_int_equal(st.hits, count);
    assert_int_equal(st.repairs, 0);
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

static void test_capacity_bound(void **state)
{
    (void)state;
    sc_config cfg = config(0);
    sc_dataset *ds;
    sc_cache *c;
    sc_error err;
    bufs *b = malloc(sizeof *b);
    /* A directory per rank: no neighbor's cache serves this rank's reads. */
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/capped-r%d", dir, rank);
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err), &err);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    cfg.cache_bytes = 3 * SHARD * di.sample_bytes; /* three shards */
    for (int pol = 0; pol < 2; pol++) {
        cfg.cache_policy = (sc_cache_policy)pol;
        SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
        uint32_t seq[40];
        for (int i = 0; i < 40; i++)
            seq[i] = (uint32_t)((i * 7 + rank) % 10);
        sc_cache_plan_ahead(c, seq, 40);
        for (int i = 0; i < 40; i++) {
            read_checked(c, ds, seq[i], b);
            sc_cache_stats st;
            sc_cache_get_stats(c, &st);
            assert_true(st.bytes_cached <= cfg.cache_bytes);
            assert_true(st.entries <= 3);
        }
        sc_cache_stats st;
        sc_cache_get_stats(c, &st);
        /* LRU writes every miss and evicts; Belady writes none it would evict unread. */
        if (pol == SC_CACHE_LRU)
            assert_true(st.evictions > 0);
        else
            assert_true(st.misses_not_kept > 0 && st.evicted_unread == 0);
        assert_int_equal(st.bytes_written, (st.misses - st.misses_not_kept) * SHARD *
                                               di.sample_bytes);
        assert_int_equal(st.hits + st.misses, 40);
        /* On disk, too: no more than three entries. */
        char cmd[1500];
        snprintf(cmd, sizeof cmd, "test $(ls '%s' | grep -c '^s[0-9]*\\.h5$') -le 3",
                 sc_cache_dir(c));
        assert_int_equal(system(cmd), 0);
        sc_cache_close(c);
    }
    sc_dataset_close(ds);
    free(b);
}

/* Two live handles on one directory: the second takes a private one. */
static void test_second_process_gets_its_own_dir(void **state)
{
    (void)state;
    sc_config cfg = config(0);
    sc_dataset *ds;
    sc_cache *a, *c2;
    sc_error err;
    bufs *b = malloc(sizeof *b);
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err), &err);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &a, &err), &err);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c2, &err), &err);
    assert_string_not_equal(sc_cache_dir(a), sc_cache_dir(c2));
    assert_non_null(strstr(sc_cache_dir(c2), "-p"));
    read_checked(a, ds, 1, b);
    read_checked(c2, ds, 1, b);
    char mine[SC_PATH_MAX];
    snprintf(mine, sizeof mine, "%s", sc_cache_dir(c2));
    sc_cache_close(c2);
    struct stat st;
    assert_int_not_equal(stat(mine, &st), 0); /* a private dir is removed at close */
    sc_cache_close(a);

    /* A dead process's private dir goes at the next open; a live one's stays. */
    char dead[SC_PATH_MAX + 32], live[SC_PATH_MAX + 32], entry[SC_PATH_MAX + 64];
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &a, &err), &err);
    snprintf(dead, sizeof dead, "%s-p%d", sc_cache_dir(a), 999999999);
    snprintf(live, sizeof live, "%s-p%ld", sc_cache_dir(a), (long)getppid());
    sc_cache_close(a);
    assert_int_equal(mkdir(dead, 0700), 0);
    assert_int_equal(mkdir(live, 0700), 0);
    snprintf(entry, sizeof entry, "%s/s0.h5", dead);
    fclose(fopen(entry, "w"));
    snprintf(entry, sizeof entry, "%s/lock", dead); /* its process is gone: lock free */
    fclose(fopen(entry, "w"));
    snprintf(entry, sizeof entry, "%s/lock", live); /* alive: it holds its lock */
    int held = open(entry, O_RDWR | O_CREAT, 0600);
    assert_int_equal(flock(held, LOCK_EX | LOCK_NB), 0);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &a, &err), &err);
    assert_int_not_equal(stat(dead, &st), 0);
    assert_int_equal(stat(live, &st), 0);
    sc_cache_close(a);
    close(held);
    unlink(entry);
    rmdir(live);
    sc_dataset_close(ds);
    free(b);
}

/* Flips one byte of an entry's data, in place or in a copy renamed over it. */
static void flip_byte(const char *path, int by_rename)
{
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s.flip", path);
    if (by_rename) {
        FILE *in = fopen(path, "rb"), *out = fopen(tmp, "wb");
        assert_true(in && out);
        int ch;
        while ((ch = fgetc(in)) != EOF)
            fputc(ch, out);
        fclose(in);
        fclose(out);
    }
    FILE *f = fopen(by_rename ? tmp : path, "r+b");
    assert_non_null(f);
    fseek(f, -200, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -200, SEEK_END);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    if (by_rename)
        assert_int_equal(rename(tmp, path), 0);
}

/* A flipped byte or a cut file is repaired on first read, with good bytes. */
static void test_damaged_entries_are_repaired(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    sc_error err;
    bufs *b = malloc(sizeof *b);
    open_in("damage", &cfg, &ds, &c);
    uint64_t k1 = (uint64_t)(2 * rank), k2 = k1 + 1;
    read_checked(c, ds, k1, b);
    read_checked(c, ds, k2, b);
    char e1[1400], e2[1400];
    snprintf(e1, sizeof e1, "%s/s%llu.h5", sc_cache_dir(c), (unsigned long long)k1);
    snprintf(e2, sizeof e2, "%s/s%llu.h5", sc_cache_dir(c), (unsigned long long)k2);
    sc_cache_close(c);

    /* Flip a byte in the data; cut the other file short. */
    flip_byte(e1, 0);
    struct stat st;
    stat(e2, &st);
    assert_int_equal(truncate(e2, st.st_size / 3), 0);

    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    read_checked(c, ds, k1, b);
    read_checked(c, ds, k2, b);
    sc_cache_stats s;
    sc_cache_get_stats(c, &s);
    assert_int_equal(s.repairs, 2);
    assert_int_equal(s.misses, 2);
    /* Repaired for good: read again, now from the cache. */
    read_checked(c, ds, k1, b);
    read_checked(c, ds, k2, b);
    sc_cache_get_stats(c, &s);
    assert_int_equal(s.hits, 2);
    assert_int_equal(s.repairs, 2);
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

/*
 * An entry is checked in full on its first read in a process, not on
 * every read: this rank's own and (with more than one rank) a neighbor's.
 * A neighbor's entry replaced by another file, or changed in place, is
 * checked again, so its flipped byte is caught and never served.
 */
static void test_entries_are_checked_once(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    sc_error err;
    sc_cache_stats s0, s1;
    bufs *b = malloc(sizeof *b);
    open_in("once", &cfg, &ds, &c);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    /* Rank r caches shards r and r + size; it reads rank r + 1's. */
    int next = (rank + 1) % size;
    uint64_t mine[2] = {(uint64_t)rank, (uint64_t)(rank + size)};
    uint64_t theirs[2] = {(uint64_t)next, (uint64_t)(next + size)};
    uint64_t bytes[2] = {shard_bytes(ds, theirs[0]), shard_bytes(ds, theirs[1])};

    for (int k = 0; k < 2; k++)
        read_checked(c, ds, mine[k], b); /* misses: written, so known whole */
    sc_cache_close(c);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    sc_cache_get_stats(c, &s0);
    for (int i = 0; i < 3; i++)
        read_checked(c, ds, mine[0], b);
    sc_cache_get_stats(c, &s1);
    assert_int_equal(s1.hits - s0.hits, 3);
    assert_int_equal(s1.bytes_checked - s0.bytes_checked, shard_bytes(ds, mine[0]));
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's entries are in place */

    if (size > 1) {
        s0 = s1;
        for (int i = 0; i < 6; i++)
            read_checked(c, ds, theirs[i % 2], b);
        sc_cache_get_stats(c, &s1);
        assert_int_equal(s1.neighbor_hits - s0.neighbor_hits, 6);
        assert_int_equal(s1.bytes_checked - s0.bytes_checked, bytes[0] + bytes[1]);

        /* The first replaced by a damaged copy, the second damaged in place. */
        for (int k = 0; k < 2; k++) {
            char path[sizeof cfg.cache_dir + 64];
            snprintf(path, sizeof path, "%s/shardcache-%016llx-l%d/s%llu.h5", cfg.cache_dir,
                     (unsigned long long)di.fingerprint, next, (unsigned long long)theirs[k]);
            usleep(20000); /* a change time past the file system's clock tick */
            flip_byte(path, k == 0);
            s0 = s1;
            read_checked(c, ds, theirs[k], b); /* the right bytes: from the source */
            sc_cache_get_stats(c, &s1);
            assert_int_equal(s1.bytes_checked - s0.bytes_checked, bytes[k]);
            assert_int_equal(s1.neighbor_hits - s0.neighbor_hits, 0);
            assert_int_equal(s1.misses - s0.misses, 1);
        }
    }
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

/*
 * Entries written in this job (this cache open, on every rank) are served
 * without a check, a neighbor's too: a live rank of the job checksummed
 * them from the source's bytes.  The next job checks them once.
 */
static void test_this_jobs_entries_are_trusted(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    sc_error err;
    sc_cache_stats s0, s1;
    bufs *b = malloc(sizeof *b);
    open_in("trusted", &cfg, &ds, &c);
    uint64_t mine = (uint64_t)rank, theirs = (uint64_t)((rank + 1) % size);
    read_checked(c, ds, mine, b); /* a miss: written with this job's token */
    MPI_Barrier(MPI_COMM_WORLD);
    sc_cache_get_stats(c, &s0);
    read_checked(c, ds, theirs, b);
    sc_cache_get_stats(c, &s1);
    assert_int_equal(s1.hits - s0.hits, 1);
    assert_int_equal(s1.bytes_checked - s0.bytes_checked, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    sc_cache_close(c);

    /* The next job: each entry is checked on its first read, then trusted. */
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    for (int i = 0; i < 2; i++)
        read_checked(c, ds, theirs, b);
    sc_cache_get_stats(c, &s1);
    assert_int_equal(s1.hits, 2);
    assert_int_equal(s1.bytes_checked, shard_bytes(ds, theirs));
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(b);
}

/* An old cache of another dataset under root: one entry of `bytes`, its files last used at `when`. */
static void make_old_cache(const char *root, int k, long bytes, time_t when, char *path, size_t n)
{
    snprintf(path, n, "%s/shardcache-%016llx-l0", root, 0xdead0000ull + (unsigned long long)k);
    assert_int_equal(mkdir(path, 0700), 0);
    static const char *const files[] = {"s0.h5", "source", "lock"};
    for (int i = 0; i < 3; i++) {
        char f[SC_PATH_MAX + 128];
        int w = snprintf(f, sizeof f, "%s/%s", path, files[i]);
        assert_true(w > 0 && (size_t)w < sizeof f);
        FILE *fp = fopen(f, "w");
        assert_non_null(fp);
        if (i == 0)
            assert_int_equal(ftruncate(fileno(fp), bytes), 0);
        else if (i == 1)
            fprintf(fp, "%s/gone-%d.h5\n1 1 1 1\n", root, k);
        fclose(fp);
        struct timespec t[2] = {{when, 0}, {when, 0}};
        assert_int_equal(utimensat(AT_FDCWD, f, t, 0), 0);
    }
}

/*
 * SC_CACHE_BYTES=auto on a (pretended) full filesystem: the node's first
 * rank removes whole old caches of other datasets, least recently used
 * first, until this dataset fits above the 10% reserve, skipping one a
 * live job holds (its lock taken here as a job takes it); every rank's
 * capacity is then its share of the room.  Unbounded (0) removes none,
 * and neither does a job whose dataset the node's caches hold already.
 */
static void test_default_bound_evicts_old_caches(void **state)
{
    (void)state;
    enum { B = 65536, S = 1000000 }; /* each old cache's bytes; the filesystem's */
    char root[1200], old[4][SC_PATH_MAX + 64];
    snprintf(root, sizeof root, "%s/evict", dir);
    int held = -1;
    if (rank == 0) {
        assert_int_equal(mkdir(root, 0700), 0);
        for (int k = 0; k < 4; k++) /* oldest first; 1 is held by a live job */
            make_old_cache(root, k, B, 1000000000 + 100000 * k, old[k], sizeof old[k]);
        char lock[SC_PATH_MAX + 80];
        snprintf(lock, sizeof lock, "%s/lock", old[1]);
        held = open(lock, O_RDONLY);
        assert_true(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0);
    }
    /* Nothing free above the reserve: S - used - the old caches' 4B is S/10. */
    char fs[64];
    snprintf(fs, sizeof fs, "%d,%d", S, S - 4 * B - S / 10);
    setenv("SC_TEST_CACHE_FS", fs, 1);
    sc_config cfg = config(0);
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s", root);
    sc_dataset *ds;
    sc_cache *c;
    sc_cache_stats st;
    open_both(&cfg, &ds, &c); /* unbounded: as before the rule */
    sc_cache_get_stats(c, &st);
    assert_int_equal(st.capacity, 0);
    sc_cache_close(c);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; rank == 0 && k < 4; k++)
        assert_int_equal(access(old[k], F_OK), 0);

    /* The dataset's 85,896 bytes want two old caches' room: the oldest, then the third. */
    cfg.cache_bytes = SC_CACHE_AUTO;
    sc_error err;
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        assert_int_equal(access(old[0], F_OK), -1); /* least recently used */
        assert_int_equal(access(old[1], F_OK), 0);  /* held by a live job */
        assert_int_equal(access(old[2], F_OK), -1); /* next */
        assert_int_equal(access(old[3], F_OK), 0);  /* not needed */
        close(held);
    }
    sc_cache_get_stats(c, &st);
    /* The room made, shared by the node's ranks, in shard bytes: an entry takes more on disk. */
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    uint64_t mean = di.sample_bytes * (di.nsamples / di.nshards);
    double fit = (double)mean / (double)SC__ENTRY_DISK(mean, di.nfields);
    assert_int_equal(st.capacity, (uint64_t)((double)(2 * B / size) * fit));
    assert_true(fit < 0.25); /* 1,728-byte shards in 8 KiB entries */
    bufs b;
    for (uint64_t k = (uint64_t)rank; k < NSHARDS; k += (uint64_t)size)
        read_checked(c, ds, k, &b);
    sc_cache_get_stats(c, &st);
    assert_true(st.bytes_cached <= st.capacity);
    sc_cache_close(c);

    /*
     * The next job of this dataset: its caches hold all of it already, so
     * no room is wanted and the old caches left (no longer held) stay.
     */
    MPI_Barrier(MPI_COMM_WORLD);
    SC_ASSERT_OK(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err), &err);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        assert_int_equal(access(old[1], F_OK), 0);
        assert_int_equal(access(old[3], F_OK), 0);
    }
    sc_cache_close(c);
    sc_dataset_close(ds);
    unsetenv("SC_TEST_CACHE_FS");
    MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * A loader whose cache holds a third of its rank's share, each rank its own
 * pretend node (so global epochs move shards between nodes): every epoch,
 * the summary's bytes from the cache, from other nodes and from the source
 * add up to the bytes of the shards this rank loaded (those its batches
 * drew from).  Before, a shard another node sent was counted as a cache
 * hit and as from other nodes both.  Returns the bytes from other nodes,
 * summed over the job.
 */
static uint64_t origin_run(int attempt)
{
    enum { EPOCHS = 4 };
    uint64_t nsamples = (uint64_t)NSHARDS * SHARD - 7, sample = W * 4 + 8;
    sc_config cfg = config(nsamples * sample / (uint64_t)size / 3);
    cfg.mode = SC_SHUFFLE_GLOBAL;
    size_t n = strlen(cfg.cache_dir);
    snprintf(cfg.cache_dir + n, sizeof cfg.cache_dir - n, "/origin%d-node%d", attempt, rank);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, &err), &err);
    uint64_t loaded[EPOCHS] = {0}, peers = 0, all_peers = 0;
    for (int e = 0; e < EPOCHS; e++) {
        unsigned char seen[NSHARDS] = {0};
        assert_int_equal(sc_epoch_begin(ld, (uint64_t)e, NULL), SC_OK);
        sc_batch b;
        int rc;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            for (uint64_t i = 0; i < b.size; i++)
                seen[b.ids[i] / SHARD] = 1;
            sc_batch_release(ld, &b);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
        for (uint64_t k = 0; k < NSHARDS; k++)
            loaded[e] += seen[k] ? ((k + 1) * SHARD > nsamples ? nsamples - k * SHARD : SHARD) *
                                       sample
                                 : 0;
    }
    for (int e = 0; e < EPOCHS; e++) {
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, (uint64_t)e, &rep), SC_OK);
        assert_true(rep.exactly_once.ok);
        uint64_t sum = rep.bytes_from_cache + rep.bytes_from_peers + rep.bytes_from_source;
        if (sum != loaded[e])
            fail_msg("rank %d, epoch %d: %llu from the cache + %llu from other nodes + %llu "
                     "from the source, of %llu loaded", rank, e,
                     (unsigned long long)rep.bytes_from_cache,
                     (unsigned long long)rep.bytes_from_peers,
                     (unsigned long long)rep.bytes_from_source, (unsigned long long)loaded[e]);
        peers += rep.bytes_from_peers;
    }
    assert_int_equal(sc_loader_close(ld), SC_OK);
    MPI_Allreduce(&peers, &all_peers, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return all_peers;
}

static void test_bytes_by_origin_add_up(void **state)
{
    (void)state;
    char v[16];
    snprintf(v, sizeof v, "%d", size);
    setenv("SC_TEST_NODES", v, 1); /* testing builds: one rank a node */
    /*
     * One node has nothing to send; several do (what made the old sum too
     * large).  An asker gives a transfer up after half a second without a
     * reply (loader_state.h), which a loaded machine under a sanitizer can
     * make of every one in a run: the sum holds either way, and a run with
     * transfers in it is asked for up to three times.
     */
    uint64_t all_peers = 0;
    for (int attempt = 0; attempt < 3 && (attempt == 0 || (size > 1 && !all_peers)); attempt++)
        all_peers = origin_run(attempt);
    unsetenv("SC_TEST_NODES");
    assert_true((size > 1) == (all_peers > 0));
}

/*
 * The most hits a cache of `cap` shards can have on seq[n] (shards of one
 * size): Belady's MIN with bypass, which on a miss keeps whichever of the
 * held shards and the one read is read again soonest.  Per epoch: hits[e]
 * for the reads in [at[e], at[e + 1]).
 */
static void oracle_hits(const uint32_t *seq, uint64_t n, const uint64_t *at, int epochs,
                        uint64_t cap, uint64_t *hits)
{
    uint64_t *next = malloc(sizeof *next * n), *held = malloc(sizeof *held * (cap + 1));
    uint64_t nheld = 0; /* the positions of the held shards' last reads */
    for (uint64_t i = n; i-- > 0;) {
        next[i] = UINT64_MAX;
        for (uint64_t j = i + 1; j < n; j++)
            if (seq[j] == seq[i]) {
                next[i] = j;
                break;
            }
    }
    for (int e = 0; e < epochs; e++) {
        hits[e] = 0;
        for (uint64_t i = at[e]; i < at[e + 1]; i++) {
            uint64_t k = 0;
            while (k < nheld && seq[held[k]] != seq[i])
                k++;
            if (k < nheld) {
                hits[e]++;
                held[k] = i;
                continue;
            }
            held[nheld++] = i;
            if (nheld <= cap)
                continue;
            uint64_t far = 0;
            for (k = 1; k < nheld; k++)
                far = next[held[k]] > next[held[far]] ? k : far;
            held[far] = held[--nheld];
        }
    }
    free(next);
    free(held);
}

/*
 * Shards of one sample, a batch that leaves a remainder, a window of 8
 * (half of the 16 samples the stream may hold): each epoch drops a few
 * shards at random and reads the rest in an order the plan does not
 * give.  The cache's Belady must be told the order the stream reads in: told the plan's, it kept
 * dropped shards for reads that never came and rewrote itself each epoch
 * (unet3d's 146 MB samples: 11 hits an epoch of a 13-shard cache, 7-12
 * shards written).  Every epoch has as many hits as Belady's MIN on the
 * reads as delivered, and the bytes served are the source's.  Each rank
 * runs a job of its own (MPI_COMM_SELF), with its own seed and capacity,
 * and the stream holds 16 samples ahead: the cache learns each epoch's
 * successor when it begins, so only the few reads ahead of that decide
 * blind (into free room), and there is no free room then.
 */
static void test_cache_follows_the_read_order(void **state)
{
    (void)state;
    enum { N = 170, EPOCHS = 6, B = 7 }; /* 2 of 170 left over */
    char path[1300];
    snprintf(path, sizeof path, "%s/ones.h5", dir);
    if (rank == 0) {
        int32_t x[N * W];
        int64_t y[N];
        for (int i = 0; i < N * W; i++)
            x[i] = i * 40503;
        for (int i = 0; i < N; i++)
            y[i] = i;
        uint64_t dx[2] = {N, W}, dy[1] = {N};
        assert_int_equal(sc_t_write(path, "/x", H5T_NATIVE_INT32, 2, dx, x, 1), 0);
        assert_int_equal(sc_t_write(path, "/y", H5T_NATIVE_INT64, 1, dy, y, 0), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t sample = W * 4 + 8, cap = N / 3 - 7 * (uint64_t)(rank % 4);
    sc_config cfg = config(cap * sample);
    snprintf(cfg.source, sizeof cfg.source, "%s", path);
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/ones-r%d", dir, rank);
    cfg.shard_size = 1;
    cfg.batch_size = B;
    cfg.seed = 1000 + (uint64_t)rank;
    cfg.producers = 1;
    cfg.prefetch_batches = 1;
    cfg.stream_bytes = 16 * sample;
    cfg.cache_writes = SC_CACHE_WRITES_ALL; /* every entry admitted is written, however slowly */
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_SELF, &cfg, &ld, &err), &err);
    uint32_t seq[EPOCHS * N];
    uint64_t at[EPOCHS + 1] = {0}, best[EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(sc_epoch_begin(ld, (uint64_t)e, NULL), SC_OK);
        sc_batch b;
        int rc;
        at[e + 1] = at[e];
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            for (uint64_t i = 0; i < b.size; i++)
                seq[at[e + 1]++] = (uint32_t)b.ids[i];
            const int32_t *x = b.data[0];
            for (uint64_t i = 0; i < b.size; i++)
                for (int j = 0; j < W; j++)
                    assert_int_equal(x[i * W + j], (int32_t)((b.ids[i] * W + j) * 40503));
            sc_batch_release(ld, &b);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
    }
    oracle_hits(seq, at[EPOCHS], at, EPOCHS, cap, best);
    for (int e = 0; e < EPOCHS; e++) {
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, (uint64_t)e, &rep), SC_OK);
        assert_true(rep.exactly_once.ok);
        if (rep.cache_hits != best[e])
            fail_msg("rank %d, epoch %d: %llu cache hits of %llu shards read; a cache of "
                     "%llu shards can have %llu", rank, e, (unsigned long long)rep.cache_hits,
                     (unsigned long long)(rep.cache_hits + rep.cache_misses),
                     (unsigned long long)cap, (unsigned long long)best[e]);
    }
    assert_int_equal(sc_loader_close(ld), SC_OK);
}

typedef struct racer {
    sc_cache *c;
    sc_dataset *ds;
    uint64_t shard;
    _Atomic int done;
} racer;

static void *race_read(void *arg)
{
    racer *r = arg;
    bufs *b = malloc(sizeof *b);
    read_checked(r->c, r->ds, r->shard, b);
    free(b);
    atomic_store(&r->done, 1);
    return NULL;
}

/*
 * Two threads wanting one uncached shard at once (a prefetch of the next
 * epoch beside this epoch's load) read the source once: the one that
 * found it missing after the other had reserved it waits for its entry.
 * The hook widens the window between finding a shard missing and
 * reserving it, where the second reader used to read the source too.
 */
static void test_concurrent_readers_read_the_source_once(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    open_in("race", &cfg, &ds, &c);
    sc__fault_set("cache-slow-miss");
    racer r = {c, ds, (uint64_t)(NSHARDS - 1 - rank), 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race_read, &r), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    sc__fault_set(NULL);
    sc_cache_stats s;
    sc_cache_get_stats(c, &s);
    if (s.misses != 1 || s.hits != 1)
        fail_msg("rank %d: %llu source reads and %llu hits of one shard read by 2 threads",
                 rank, (unsigned long long)s.misses, (unsigned long long)s.hits);
    sc_cache_close(c);
    sc_dataset_close(ds);
}

/*
 * A reader never waits on a transfer from another node: a shard reserved
 * for one (sc__cache_reserve) is read from the source meanwhile, uncached,
 * and the reservation stands.  The read runs in a thread with a deadline,
 * so that a reader that waits fails the test instead of hanging it.
 */
static void test_readers_do_not_wait_for_fills(void **state)
{
    (void)state;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *c;
    open_in("fill", &cfg, &ds, &c);
    racer r = {c, ds, (uint64_t)rank, 0};
    assert_int_equal(sc__cache_reserve(c, r.shard), 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, race_read, &r), 0);
    for (int ms = 0; ms < 20000 && !atomic_load(&r.done); ms += 10)
        usleep(10000);
    if (!atomic_load(&r.done))
        fail_msg("rank %d: a read of shard %llu waited 20 s on its transfer", rank,
                 (unsigned long long)r.shard);
    pthread_join(t, NULL);
    sc_cache_stats s;
    sc_cache_get_stats(c, &s);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.misses_not_kept, 1);
    sc__cache_unreserve(c, r.shard);
    sc_cache_close(c);
    sc_dataset_close(ds);
}

/* One epoch on ld, each sample's bytes checked against the source; its summary in *rep. */
static void epoch_checked(sc_loader *ld, uint64_t e, sc_epoch_summary *rep)
{
    assert_int_equal(sc_epoch_begin(ld, e, NULL), SC_OK);
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        const int32_t *x = b.data[0];
        const int64_t *y = b.data[1];
        for (uint64_t i = 0; i < b.size; i++) {
            assert_int_equal(y[i], (int64_t)b.ids[i]);
            for (int j = 0; j < W; j++)
                assert_int_equal(x[i * W + j], (int32_t)((b.ids[i] * W + (uint64_t)j) *
                                                         2654435761u));
        }
        sc_batch_release(ld, &b);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(sc_epoch_wait(ld, e, rep), SC_OK);
    assert_true(rep->exactly_once.ok);
}

/*
 * Cache entries are written off the read path.  With a writer slower than
 * the reads (the hook: 20 ms an entry) and room to owe it two shards, the
 * default (SC_CACHE_WRITES=behind) skips entries rather than hold the
 * reads up, and says how many; every entry it did not skip is a hit in the
 * next epoch (an unbounded cache), the one still being written waited
 * for.  With SC_CACHE_WRITES=all none is skipped and the next epoch is all
 * hits.  Each rank a job of its own; the bytes served are the source's.
 */
static void test_cache_writes_behind_the_reads(void **state)
{
    (void)state;
    uint64_t sample = W * 4 + 8;
    for (int all = 0; all < 2; all++) {
        sc_config cfg = config(0);
        cfg.mode = SC_SHUFFLE_GLOBAL;
        cfg.producers = 2;
        cfg.stream_bytes = 8 * SHARD * sample;
        cfg.cache_writes = all ? SC_CACHE_WRITES_ALL : SC_CACHE_WRITES_BEHIND;
        snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/behind%d-r%d", dir, all, rank);
        sc__fault_set("cache-writer-slow");
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_loader_open(MPI_COMM_SELF, &cfg, &ld, &err), &err);
        sc_epoch_summary first, next;
        epoch_checked(ld, 0, &first);
        epoch_checked(ld, 1, &next);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        sc__fault_set(NULL);
        assert_int_equal(first.cache_misses, NSHARDS);
        if (all ? first.cache_writes_skipped != 0 : first.cache_writes_skipped == 0)
            fail_msg("rank %d, SC_CACHE_WRITES=%s: %llu of %d entries skipped behind a slow "
                     "writer", rank, all ? "all" : "behind",
                     (unsigned long long)first.cache_writes_skipped, NSHARDS);
        if (next.cache_hits != NSHARDS - first.cache_writes_skipped)
            fail_msg("rank %d, SC_CACHE_WRITES=%s: %llu hits in the next epoch, of %llu "
                     "entries written", rank, all ? "all" : "behind",
                     (unsigned long long)next.cache_hits,
                     (unsigned long long)(NSHARDS - first.cache_writes_skipped));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sc_t_tmpdir(dir, sizeof dir, "cache");
    make_source();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_names_are_not_followed),
        cmocka_unit_test(test_sticky_epochs_read_only_moved_shards),
        cmocka_unit_test(test_vanished_directory),
        cmocka_unit_test(test_capacity_bound),
        cmocka_unit_test(test_bytes_by_origin_add_up),
        cmocka_unit_test(test_cache_follows_the_read_order),
        cmocka_unit_test(test_default_bound_evicts_old_caches),
        cmocka_unit_test(test_second_process_gets_its_own_dir),
        cmocka_unit_test(test_damaged_entries_are_repaired),
        cmocka_unit_test(test_entries_are_checked_once),
        cmocka_unit_test(test_this_jobs_entries_are_trusted),
        cmocka_unit_test(test_concurrent_readers_read_the_source_once),
        cmocka_unit_test(test_readers_do_not_wait_for_fills),
        cmocka_unit_test(test_cache_writes_behind_the_reads),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
