/*
 * cache.c - the node-local shard cache.
 *
 * One directory per (dataset fingerprint, node-local rank: cachedir.c
 * owns its format, cacheplace.c where it lives), one HDF5 file per shard
 * entry, one raw uint8 dataset per field (entry_io.c writes and reads
 * them; this file is the index, admission and what may be served).  An entry is written
 * under a temporary name; after HDF5 has closed it, a header naming the
 * shard, the dataset, the XXH64 checksum of the bytes and where each
 * field's bytes lie goes into the HDF5 user block (the file's first 512
 * bytes, reserved by HDF5): that header is the "complete" mark, and then
 * the file is renamed into place.  A writer that dies mid-entry leaves only
 * a temporary file, which the next open removes.  An entry that does not
 * open, lacks a valid header, was made for another dataset or shard, is
 * shorter than its header says, or fails its checksum is never served: it
 * is deleted, counted as a repair, logged, and the shard is read from the
 * source again.  A warm read is open() and pread()s, with no HDF5 call
 * and no HDF5 lock, so producer threads read entries in parallel.
 *
 * Why a file per entry rather than one HDF5 file per rank: HDF5 1.10 has
 * no journal, so a process killed while writing into a shared file can
 * leave the whole file unreadable; with one file per entry a crash costs at
 * most the entry being written, and rename() makes publication atomic.  A
 * lock file (flock) keeps two live processes out of one directory; the
 * second uses a private directory and says so.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cachedir.h"
#include "cacheplace.h"
#include "clock.h"
#include "config.h"
#include "error.h"
#include "entry.h"
#include "entry_io.h"
#include "evict.h"
#include "fault.h"
#include "formats.h"
#include "hash.h"
#include "log.h"
#include "source.h"

#define CACHE_PAUSE_S 30 /* no admissions after a failed write, seconds */


struct sc_cache {
    sc_dataset *ds;
    /*
     * Its directory, held open: every entry, temporary and the lock is
     * reached relative to pl.dfd (pl.dir names it in messages only).
     */
    sc__cache_place pl;
    int rank, local_size, log_level;
    /*
     * After an entry could not be written (a full disk, a quota, a directory
     * gone or read-only), nothing is admitted until this time (CLOCK_MONOTONIC
     * seconds): shards are served from the source meanwhile, and it is said
     * once per pause, not once per shard.
     */
    double pause_until;
    uint64_t job; /* this open's token, the same on every rank of comm: see header.job */
    sc_cache_check check;
    sc__evict *ev;
    sc_cache_stats st;
    /*
     * Guards ev, st and the directory's entries; never held across a warm
     * read's I/O or a source read, so producer threads read in parallel.
     */
    pthread_mutex_t mu;
    pthread_cond_t written; /* an entry being written (ENTRY_WRITING) is done */
    struct seen *seen;      /* [nseen] neighbors' entries checked here (under mu) */
    uint64_t nseen;
};

/*
 * A neighbor's entry this process has checked in full, by file identity.
 * Entries never change in place (a rewrite is a new inode renamed over),
 * so the same device, inode and change time are the same checked bytes:
 * like this rank's own entries, a neighbor's is verified once per process,
 * not on every read (in global mode most reads are a neighbor's).  The
 * table is direct-mapped by shard, so its memory is bounded; a collision
 * only costs one more checksum.  ino 0 marks an empty slot.
 */
struct seen {
    uint64_t shard, dev, ino, ctime_ns;
};

enum { SEEN_MAX = 1 << 16 };

static struct seen cache_identity(uint64_t shard, const struct stat *st)
{
    struct seen s = {shard, (uint64_t)st->st_dev, (uint64_t)st->st_ino,
                     (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec};
    return s;
}

/*
 * The evict flag of an entry: 1 verified in this process, ENTRY_WRITING
 * being written from the source (other readers wait for it), ENTRY_FILLING
 * reserved for a transfer from another node (readers never wait for one:
 * its owner may answer only after its epoch; they read the source).
 */
enum { ENTRY_WRITING = 2, ENTRY_FILLING = 3 };

/* Deletes an entry that cannot be served, and says so. */
static void cache_repair(sc_cache *c, uint64_t shard, const char *why)
{
    char name[32];
    sc__entry_name(shard, name, sizeof name);
    unlinkat(c->pl.dfd, name, 0);
    sc__evict_remove(c->ev, (uint32_t)shard);
    c->st.repairs++;
    sc__log(c->log_level, SC__LOG_WARN, c->rank,
            "cache entry '%s/%s' (shard %llu) dropped, %s; reading the shard from the "
            "source again",
            c->pl.dir, name, (unsigned long long)shard, why);
}

/* How an entry comes to be held (cache_admit). */
typedef enum { HOLD_FOUND, HOLD_MISS, HOLD_FILL } cache_hold;

/*
 * Admits a shard to the index, as found on disk (always), read from the
 * source (when Belady keeps it) or filled by a peer ahead of its read, and
 * deletes the files of the entries it evicts.  SC_EOVERFLOW: not kept.
 */
static int cache_admit(sc_cache *c, uint64_t shard, uint64_t bytes, cache_hold how)
{
    const uint32_t *victims;
    uint64_t nv;
    uint32_t s32 = (uint32_t)shard;
    int rc = how == HOLD_MISS   ? sc__evict_miss(c->ev, s32, bytes, &victims, &nv)
             : how == HOLD_FILL ? sc__evict_fill(c->ev, s32, bytes, &victims, &nv)
                                : sc__evict_admit(c->ev, s32, bytes, &victims, &nv);
    for (uint64_t i = 0; i < nv; i++) {
        char name[32];
        sc__entry_name(victims[i], name, sizeof name);
        unlinkat(c->pl.dfd, name, 0);
        c->st.evictions++;
    }
    return rc;
}

/* The bytes of a shard not held, for Belady's plan of what to keep. */
static uint64_t cache_shard_size(void *arg, uint32_t shard)
{
    const sc_dataset *ds = arg;
    return shard < ds->nshards ? sc__shard_bytes(ds, shard) : 1;
}

/* Learns what an earlier run left: entries, and temporaries of crashed writers. */
static int cache_scan(sc_cache *c, sc_error *err)
{
    int fd = dup(c->pl.dfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *e;
    if (!d) {
        int why = errno;
        if (fd >= 0)
            close(fd);
        return sc__seterr(err, SC_EIO, "cache directory '%s': %s", c->pl.dir, strerror(why));
    }
    while ((e = readdir(d))) {
        uint64_t shard;
        int n = sc__entry_name_parse(e->d_name, &shard);
        if (n == 0)
            continue;
        if (n == 2 || shard >= c->ds->nshards) {
            unlinkat(c->pl.dfd, e->d_name, 0);
            c->st.repairs++;
            sc__log(c->log_level, SC__LOG_WARN, c->rank,
                    "removed '%s/%s': %s", c->pl.dir, e->d_name,
                    n == 2 ? "an incomplete entry left by a writer that died"
                           : "an entry for a shard this dataset does not have");
            continue;
        }
        if (cache_admit(c, shard, sc__shard_bytes(c->ds, shard), HOLD_FOUND) == SC_ENOMEM) {
            closedir(d);
            return sc__seterr(err, SC_ENOMEM, "cache '%s': no memory", c->pl.dir);
        }
    }
    closedir(d);
    return SC_OK;
}

/*
 * SC_CACHE_BYTES=auto: what the directory holds, plus this rank's share
 * of the filesystem's free space above the reserve (less its share of
 * what the reserve lacks, when the disk filled up), so that the node's
 * caches together leave SC_CACHE_RESERVE_PCT of it free.  Unknown space:
 * unbounded, as before the rule.
 */
static void cache_bound(sc_cache *c)
{
    uint64_t size, avail;
    if (sc__cachedir_space(c->pl.root, &size, &avail) != 0)
        return;
    uint64_t reserve = size / 100 * SC_CACHE_RESERVE_PCT, n = (uint64_t)c->local_size;
    uint64_t held = sc__evict_bytes(c->ev);
    /* The bound counts shard bytes; the disk takes each entry's in whole blocks, and more. */
    const sc_dataset *ds = c->ds;
    uint64_t mean = ds->nshards ? ds->sample_bytes * (ds->nsamples / ds->nshards) : 0;
    double fit = mean ? (double)mean / (double)SC__ENTRY_DISK(mean, ds->nfields) : 1.0;
    uint64_t more = avail > reserve ? (uint64_t)((double)((avail - reserve) / n) * fit) : 0;
    uint64_t less = avail < reserve ? (uint64_t)((double)((reserve - avail) / n) * fit) : 0;
    uint64_t cap = held + more > less ? held + more - less : 1; /* 1: nothing kept */
    sc__evict_set_capacity(c->ev, cap);
    sc__log(c->log_level, SC__LOG_INFO, c->rank,
            "cache '%s': capacity %.1f MiB (SC_CACHE_BYTES=auto: %.1f MiB held, and a share "
            "of %llu of the free space above %d%% of the filesystem)", c->pl.dir,
            (double)cap / (1 << 20), (double)held / (1 << 20), (unsigned long long)n,
            SC_CACHE_RESERVE_PCT);
}

int sc__cache_make_room(const sc_dataset *ds, const sc__cache_site *site, const sc_config *cfg)
{
    char root[SC_PATH_MAX];
    if (!cfg->cache_bytes || sc__cache_root(cfg, root, sizeof root) != SC_OK)
        return SC_OK;
    /*
     * What the node's caches of this dataset may come to hold: the dataset,
     * or their caps (the room made is this less what they hold already).
     */
    uint64_t want, caps;
    if (__builtin_mul_overflow(ds->sample_bytes, ds->nsamples, &want))
        want = UINT64_MAX;
    if (cfg->cache_bytes != SC_CACHE_AUTO &&
        !__builtin_mul_overflow(cfg->cache_bytes, (uint64_t)site->local_size, &caps) &&
        caps < want)
        want = caps;
    sc__cachedir_make_room(root, ds->fingerprint, want, site->rank, cfg->log_level);
    return SC_OK;
}

/* The index: what the directory holds, bounded by the capacity. */
static int cache_load_index(sc_cache *c, const sc_config *cfg, sc_error *err)
{
    const sc_dataset *ds = c->ds;
    c->nseen = ds->nshards < SEEN_MAX ? ds->nshards + !ds->nshards : SEEN_MAX;
    if (!(c->seen = calloc(c->nseen, sizeof *c->seen)))
        return sc__seterr(err, SC_ENOMEM, "no memory for the cache index");
    int autob = cfg->cache_bytes == SC_CACHE_AUTO;
    int rc = sc__evict_new(cfg->cache_policy, autob ? 0 : cfg->cache_bytes, &c->ev);
    if (rc != SC_OK)
        return sc__seterr(err, rc, "no memory for the cache index");
    sc__evict_set_sizer(c->ev, cache_shard_size, (void *)ds);
    rc = cache_scan(c, err);
    if (rc == SC_OK && autob)
        cache_bound(c); /* from what it holds */
    return rc;
}

int sc__cache_open(sc_dataset *ds, const sc__cache_site *site, const sc_config *cfg,
                   sc_cache **out, sc_error *err)
{
    *out = NULL;
    sc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return sc__seterr(err, SC_ENOMEM, "no memory for a cache");
    c->ds = ds;
    sc__cache_place_init(&c->pl);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->written, NULL);
    c->check = cfg->cache_check;
    c->pl.group = cfg->cache_share == SC_CACHE_GROUP;
    c->pl.rank = site->rank;
    c->pl.local_rank = site->local_rank;
    c->pl.log_level = cfg->log_level;
    c->log_level = cfg->log_level;
    c->rank = site->rank;
    c->local_size = site->local_size;
    c->job = site->job;
    int rc = sc__cache_place_open(&c->pl, cfg->cache_dir, ds->fingerprint, err);
    if (rc == SC_OK)
        rc = cache_load_index(c, cfg, err);
    if (rc == SC_OK)
        sc__cachedir_note_source(c->pl.dfd, ds->path, c->pl.group ? 0640 : 0600);
    if (rc != SC_OK) {
        sc_cache_close(c);
        return rc;
    }
    *out = c;
    return sc__errok(err);
}

int sc_cache_close(sc_cache *c)
{
    if (!c)
        return SC_OK;
    sc__cache_place_close(&c->pl); /* a private directory removed, the flock released */
    sc__evict_free(c->ev);
    free(c->seen);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->written);
    free(c);
    return SC_OK;
}

static uint64_t cache_checksum(const sc_dataset *ds, uint64_t shard, void *const *bufs)
{
    sc__xxh64_state s;
    sc__xxh64_init(&s, SC__ENTRY_SEED);
    for (int i = 0; i < ds->nfields; i++)
        sc__xxh64_update(&s, bufs[i], sc__field_bytes(ds, i, shard));
    return sc__xxh64_final(&s);
}

/* One traced stage of a shard's read, for the caller's thread. */
static void cache_span(const sc__tctx *tc, sc__stage st, uint64_t t0, uint64_t shard,
                       uint64_t bytes)
{
    if (tc)
        sc__tring_span(tc->ring, st, t0, sc__tring_now(tc->ring), tc->epoch,
                       (int64_t)shard, -1, bytes);
}

static sc__tring *cache_ring_of(const sc__tctx *tc)
{
    return tc ? tc->ring : NULL;
}

/*
 * Reads an entry and proves it whole, without touching the index (no lock
 * held).  With `m` the entry is mapped read-only and m->field[i] point into
 * it: the page cache is the buffer, and the only copy left is the batch
 * assembly's (the stream maps only where it has no pooled buffer to read
 * into: docs/cache.md, "Warm reads").  Entries are never changed in place (a rewrite is a new file
 * renamed over, an eviction an unlink), so a mapping stays valid until
 * sc__cache_unmap.  Without `m`, the fields are pread into bufs.  With
 * `seen`, a neighbor's entry: it counts as verified if it is the file
 * *seen names, and *seen becomes the file's identity once it is served.
 * Any entry written in this job counts as verified (see header).
 *
 * An entry another user wrote (a member's, with SC_CACHE_SHARE=group) is
 * theirs to change at any time: it is read into memory, never mapped (a
 * truncation under a mapping is a SIGBUS), and checked on every read,
 * whatever its header says of its job.  The entry is opened relative to
 * `dirfd` (this rank's directory, or a neighbor's), never following a
 * link.  Returns NULL on success, or why the entry cannot be served.
 */
static const char *cache_read_entry(sc_cache *c, int dirfd, uint64_t shard,
                                    void *const *bufs, sc__mapping *m, int verified,
                                    struct seen *seen, const sc__tctx *tc)
{
    uint64_t t0 = sc__tring_now(cache_ring_of(tc));
    sc__tring_slow(cache_ring_of(tc), SC__ST_CACHE_READ);
    const sc_dataset *ds = c->ds;
    sc__entry h = {0};
    struct stat st;
    int foreign = 0;
    const char *why = sc__entry_io_read(dirfd, ds, shard, bufs, m, &h, &st, &foreign);
    if (!why && m)
        bufs = (void *const *)m->field;
    if (foreign)
        verified = 0, seen = NULL; /* its owner may change it at any time: checked each read */
    cache_span(tc, SC__ST_CACHE_READ, t0, shard, sc__shard_bytes(ds, shard));

    if (!why && sc__read_vlen_disagrees(ds, shard, (const void *const *)bufs) >= 0)
        why = "its variable-length samples are not the source's (rewritten in place?)";
    if (!why && h.job == c->job && !foreign)
        verified = 1; /* written in this job: see header */
    struct seen me = {0};
    if (!why && seen) {
        me = cache_identity(shard, &st);
        verified |= !memcmp(&me, seen, sizeof me);
    }
    if (!why && (c->check == SC_CACHE_CHECK_ALWAYS || !verified)) {
        t0 = sc__tring_now(cache_ring_of(tc));
        if (cache_checksum(ds, shard, bufs) != h.checksum)
            why = "its checksum does not match its bytes";
        cache_span(tc, SC__ST_CHECKSUM, t0, shard, sc__shard_bytes(ds, shard));
        pthread_mutex_lock(&c->mu);
        c->st.bytes_checked += sc__shard_bytes(ds, shard);
        pthread_mutex_unlock(&c->mu);
    }
    if (!why && seen)
        *seen = me;
    if (why && m)
        sc__cache_unmap(m);
    return why;
}

void sc__cache_unmap(sc__mapping *m)
{
    if (m && m->base && m->copied)
        free(m->base);
    else if (m && m->base)
        munmap(m->base, m->len);
    if (m)
        memset(m, 0, sizeof *m);
}

/*
 * A shard this rank has not cached, from another local rank's cache on the
 * same node: the node's disk already holds it, so a global shuffle (or a
 * sticky move between ranks of one node) costs a read, not a source read
 * and a cache write.  Unless this job wrote it, its entry is checked in
 * full the first time this process reads that file (we cannot know whether
 * its owner verified it); it is served from where it is: entries are
 * immutable, and an unlink by their owner leaves our mapping whole.
 * Returns NULL when served (and counted as a hit).
 */
static const char *cache_neighbor_entry(sc_cache *c, uint64_t shard, void *const *bufs,
                                        sc__mapping *m, const sc__tctx *tc)
{
    for (int lr = 0; lr < c->local_size; lr++) {
        int dfd = lr == c->pl.local_rank ? -1 : sc__cache_place_neighbor(&c->pl, lr);
        if (dfd < 0)
            continue;
        struct seen *slot = &c->seen[shard % c->nseen];
        pthread_mutex_lock(&c->mu);
        struct seen known = *slot;
        pthread_mutex_unlock(&c->mu);
        const char *why = cache_read_entry(c, dfd, shard, bufs, m, 0, &known, tc);
        close(dfd);
        if (why)
            continue;
        pthread_mutex_lock(&c->mu);
        *slot = known;
        c->st.hits++;
        c->st.neighbor_hits++;
        c->st.bytes_from_cache += sc__shard_bytes(c->ds, shard);
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    return "it is not cached on this node";
}

/*
 * A warm hit: the entry read (or mapped), checked, and counted; or why it
 * could not be served, in which case it has been repaired (dropped).
 * *origin: SC__FROM_PEER for the first read of a peer's fill, else
 * SC__FROM_CACHE.
 */
static const char *cache_hit_entry(sc_cache *c, uint64_t shard, void *const *bufs,
                                   sc__mapping *m, const sc__tctx *tc, int *origin)
{
    *origin = SC__FROM_CACHE;
    uint32_t s32 = (uint32_t)shard;
    pthread_mutex_lock(&c->mu);
    int held, verified = 0;
    /* Another thread is writing it: wait for its entry rather than read the source too. */
    while ((held = sc__evict_has(c->ev, s32)) &&
           (verified = sc__evict_flag(c->ev, s32)) == ENTRY_WRITING)
        pthread_cond_wait(&c->written, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (!held)
        return cache_neighbor_entry(c, shard, bufs, m, tc);
    if (verified == ENTRY_FILLING)
        return "it is on its way from another node";
    const char *why = cache_read_entry(c, c->pl.dfd, shard, bufs, m, verified, NULL, tc);
    pthread_mutex_lock(&c->mu);
    /* An entry evicted while it was read was still whole: an open fd survives unlink. */
    if (!why) {
        if (sc__evict_has(c->ev, s32)) {
            if (sc__evict_touch(c->ev, s32))
                *origin = SC__FROM_PEER;
            sc__evict_set_flag(c->ev, s32, 1);
        }
        c->st.hits++;
        c->st.bytes_from_cache += sc__shard_bytes(c->ds, shard);
    } else if (sc__evict_has(c->ev, s32) && sc__evict_flag(c->ev, s32) < ENTRY_WRITING) {
        cache_repair(c, shard, why); /* not a writer's reservation made since it was read */
    }
    pthread_mutex_unlock(&c->mu);
    return why;
}

int sc__cache_map(sc_cache *c, uint64_t shard, sc__mapping *m, const sc__tctx *tc,
                  sc_error *err)
{
    memset(m, 0, sizeof *m);
    if (shard >= c->ds->nshards)
        return sc__seterr(err, SC_EINVAL, "cache '%s': shard %llu of %llu", c->pl.dir,
                          (unsigned long long)shard, (unsigned long long)c->ds->nshards);
    int origin;
    if (!cache_hit_entry(c, shard, NULL, m, tc, &origin))
        m->origin = origin;
    return sc__errok(err);
}

/*
 * Reserves `shard` in the index for an entry about to be written (mutex
 * held): SC_OK, or SC_EOVERFLOW when it is not to be kept (bigger than the
 * whole cache, held meanwhile, the cache paused after a failed write, or
 * Belady's plan: it would be evicted before it is read again), or the
 * index's own error.
 */
static int cache_reserve_locked(sc_cache *c, uint64_t shard, uint64_t bytes, cache_hold how)
{
    uint32_t s32 = (uint32_t)shard;
    int kept = sc__evict_has(c->ev, s32) || sc__clock_s() < c->pause_until
                   ? SC_EOVERFLOW
                   : cache_admit(c, shard, bytes, how);
    if (kept == SC_OK)
        sc__evict_set_flag(c->ev, s32, how == HOLD_FILL ? ENTRY_FILLING : ENTRY_WRITING);
    return kept;
}

/*
 * Ends a reservation (mutex not held): the entry is published (wrc OK),
 * or withdrawn; a failed write of good bytes (ok) pauses caching.  Wakes
 * the threads waiting for it.
 */
static void cache_settle(sc_cache *c, uint64_t shard, int ok, int wrc, const sc_error *werr)
{
    uint32_t s32 = (uint32_t)shard;
    pthread_mutex_lock(&c->mu);
    int held = sc__evict_has(c->ev, s32);
    c->st.bytes_written += wrc == SC_OK ? sc__shard_bytes(c->ds, shard) : 0;
    if (wrc != SC_OK) {
        if (held)
            sc__evict_remove(c->ev, s32);
        /* The bytes were right; only the copy failed: pause, say so once. */
        if (ok && werr && sc__clock_s() >= c->pause_until)
            sc__log(c->log_level, SC__LOG_WARN, c->rank,
                    "not caching for %d s, serving from the source: %s", CACHE_PAUSE_S,
                    werr->msg);
        if (ok && werr) /* a failed source read is no reason to stop caching */
            c->pause_until = sc__clock_s() + CACHE_PAUSE_S;
    } else if (!held) {
        char name[32]; /* evicted while it was written */
        sc__entry_name(shard, name, sizeof name);
        unlinkat(c->pl.dfd, name, 0);
    } else {
        sc__evict_set_flag(c->ev, s32, 1);
    }
    pthread_cond_broadcast(&c->written);
    pthread_mutex_unlock(&c->mu);
}

/*
 * A miss: the shard is reserved in the index (marked being written) before
 * the source is read, so that another thread wanting it waits for this
 * entry instead of reading the source (and running a transform) twice;
 * then the source read, the checksum, and the entry's write, all without
 * the cache's lock, or with `owed` the write left to the caller
 * (sc__cache_keep).  A reservation that fails is withdrawn, waking waiters.
 * Without `keep` nothing is reserved (nor evicted for it): not kept.
 * Where *raced is set on entry and another thread has reserved or
 * published the shard since this one found it missing (a prefetch of the
 * next epoch beside this epoch's load), nothing is read and *raced stays
 * set: the caller looks again rather than read the source a second time.
 * Otherwise *raced is cleared, and the source read (uncached if the shard
 * is held meanwhile).
 */
static int cache_miss(sc_cache *c, uint64_t shard, void *const *bufs, int *raced, int keep,
                      int *owed, const sc__tctx *tc, sc_error *err)
{
    uint64_t bytes = sc__shard_bytes(c->ds, shard);
    pthread_mutex_lock(&c->mu);
    uint32_t s32 = (uint32_t)shard;
    if (*raced && sc__evict_has(c->ev, s32) && sc__evict_flag(c->ev, s32) != ENTRY_FILLING) {
        pthread_mutex_unlock(&c->mu);
        return SC_OK;
    }
    *raced = 0;
    c->st.misses++;
    c->st.bytes_from_source += bytes;
    int kept = keep ? cache_reserve_locked(c, shard, bytes, HOLD_MISS) : SC_EOVERFLOW;
    c->st.misses_not_kept += kept == SC_EOVERFLOW;
    pthread_mutex_unlock(&c->mu);
    if (kept != SC_OK && kept != SC_EOVERFLOW)
        return sc__seterr(err, kept, "cache '%s': no memory for its index", c->pl.dir);

    uint64_t t0 = sc__tring_now(cache_ring_of(tc));
    sc__tring_slow(cache_ring_of(tc), SC__ST_SOURCE_READ);
    int rc = sc_dataset_read_shard(c->ds, shard, bufs, err);
    cache_span(tc, SC__ST_SOURCE_READ, t0, shard, bytes);
    if (kept != SC_OK)
        return rc;
    if (rc != SC_OK)
        cache_settle(c, shard, 0, rc, NULL);
    else if (owed)
        *owed = 1; /* the caller's to write: sc__cache_keep */
    else
        sc__cache_keep(c, shard, bufs, tc);
    return rc;
}

void sc__cache_keep(sc_cache *c, uint64_t shard, void *const *bufs, const sc__tctx *tc)
{
    uint64_t bytes = sc__shard_bytes(c->ds, shard), t0 = sc__tring_now(cache_ring_of(tc));
    uint64_t sum = cache_checksum(c->ds, shard, bufs);
    cache_span(tc, SC__ST_CHECKSUM, t0, shard, bytes);
    t0 = sc__tring_now(cache_ring_of(tc));
    sc_error werr = SC_ERROR_INIT;
    int wrc = sc__entry_io_write(&c->pl, c->ds, shard, bufs, sum, c->job, &werr);
    cache_span(tc, SC__ST_CACHE_WRITE, t0, shard, bytes);
    cache_settle(c, shard, 1, wrc, &werr);
}

/* ---- fills from peers (mpi/peer.c) ------------------------------------------ */

/* Whether a neighbor on this node has an entry for `shard` (not checked). */
static int cache_on_node(const sc_cache *c, uint64_t shard)
{
    char name[32];
    struct stat st;
    int on = 0;
    sc__entry_name(shard, name, sizeof name);
    for (int lr = 0; lr < c->local_size && !on; lr++) {
        int dfd = lr == c->pl.local_rank ? -1 : sc__cache_place_neighbor(&c->pl, lr);
        on = dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (dfd >= 0)
            close(dfd);
    }
    return on;
}

int sc__cache_reserve(sc_cache *c, uint64_t shard)
{
    if (shard >= c->ds->nshards || cache_on_node(c, shard))
        return 0;
    pthread_mutex_lock(&c->mu);
    int kept = cache_reserve_locked(c, shard, sc__shard_bytes(c->ds, shard), HOLD_FILL);
    pthread_mutex_unlock(&c->mu);
    return kept == SC_OK;
}

void sc__cache_unreserve(sc_cache *c, uint64_t shard)
{
    cache_settle(c, shard, 0, SC_EIO, NULL);
}

uint64_t sc__cache_checksum(const sc_cache *c, uint64_t shard, void *const *fields)
{
    return cache_checksum(c->ds, shard, fields);
}

int sc__cache_fill(sc_cache *c, uint64_t shard, void *const *bufs, uint64_t sum,
                   const sc__tctx *tc, sc_error *err)
{
    uint64_t bytes = sc__shard_bytes(c->ds, shard), t0 = sc__tring_now(cache_ring_of(tc));
    int rc = cache_checksum(c->ds, shard, bufs) == sum
                 ? SC_OK
                 : sc__seterr(err, SC_ECHECKSUM, "shard %llu: its checksum does not match "
                              "its bytes", (unsigned long long)shard);
    if (rc == SC_OK && sc__read_vlen_disagrees(c->ds, shard, (const void *const *)bufs) >= 0)
        rc = sc__seterr(err, SC_ECHECKSUM, "shard %llu: its variable-length samples are not "
                        "this dataset's", (unsigned long long)shard);
    cache_span(tc, SC__ST_CHECKSUM, t0, shard, bytes);
    sc_error werr = SC_ERROR_INIT;
    int wrc = rc;
    if (rc == SC_OK) {
        t0 = sc__tring_now(cache_ring_of(tc));
        wrc = sc__entry_io_write(&c->pl, c->ds, shard, bufs, sum, c->job, &werr);
        cache_span(tc, SC__ST_CACHE_WRITE, t0, shard, bytes);
    }
    if (wrc == SC_OK) {
        pthread_mutex_lock(&c->mu);
        c->st.bytes_from_peers += bytes;
        pthread_mutex_unlock(&c->mu);
    }
    cache_settle(c, shard, rc == SC_OK, wrc, &werr);
    if (rc == SC_OK && wrc != SC_OK && err)
        *err = werr;
    return wrc;
}

int sc__cache_map_node(sc_cache *c, uint64_t shard, sc__mapping *m)
{
    memset(m, 0, sizeof *m);
    uint32_t s32 = (uint32_t)shard;
    pthread_mutex_lock(&c->mu);
    int held = shard < c->ds->nshards && sc__evict_has(c->ev, s32);
    int verified = held ? sc__evict_flag(c->ev, s32) : 0;
    pthread_mutex_unlock(&c->mu);
    int writing = held && verified == ENTRY_WRITING;
    if (held && !writing && verified != ENTRY_FILLING &&
        !cache_read_entry(c, c->pl.dfd, shard, NULL, m, verified, NULL, NULL))
        return 1;
    /* A neighbor's, checked in full unless this job wrote it. */
    int found = 0;
    for (int lr = 0; lr < c->local_size && !found; lr++) {
        int dfd = lr == c->pl.local_rank ? -1 : sc__cache_place_neighbor(&c->pl, lr);
        found = dfd >= 0 && !cache_read_entry(c, dfd, shard, NULL, m, 0, NULL, NULL);
        if (dfd >= 0)
            close(dfd);
    }
    return found ? 1 : writing ? -1 : 0;
}

int sc__cache_read(sc_cache *c, uint64_t shard, void *const *bufs, int *hit, int *owed,
                   const sc__tctx *tc, sc_error *err)
{
    if (!c || !bufs)
        return sc__seterr(err, SC_EINVAL, "sc_cache_read: NULL argument");
    if (shard >= c->ds->nshards)
        return sc__seterr(err, SC_EINVAL, "cache '%s': shard %llu of %llu", c->pl.dir,
                          (unsigned long long)shard, (unsigned long long)c->ds->nshards);
    int origin, rc = SC_OK, raced = 1, keep = owed ? *owed : 1;
    if (hit)
        *hit = SC__FROM_SOURCE;
    if (owed)
        *owed = 0;
    /* A fourth race is not worth another look: the source, uncached. */
    for (int look = 0; raced; look++) {
        if (!cache_hit_entry(c, shard, bufs, NULL, tc, &origin)) {
            if (hit)
                *hit = origin;
            return sc__errok(err);
        }
        if (sc__fault("cache-slow-miss")) { /* test hook: another reader reserves meanwhile */
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        raced = look < 3;
        rc = cache_miss(c, shard, bufs, &raced, keep, owed, tc, err);
    }
    return rc == SC_OK ? sc__errok(err) : rc;
}

int sc_cache_read(sc_cache *c, uint64_t shard, void *const *bufs, sc_error *err)
{
    return sc__cache_read(c, shard, bufs, NULL, NULL, NULL, err);
}

int sc_cache_plan_ahead(sc_cache *c, const uint32_t *shards, uint64_t n)
{
    if (!c || (n && !shards))
        return SC_EINVAL;
    pthread_mutex_lock(&c->mu);
    int rc = sc__evict_future(c->ev, shards, n);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int sc__cache_plan_extend(sc_cache *c, const uint32_t *shards, uint64_t n)
{
    pthread_mutex_lock(&c->mu);
    int rc = sc__evict_extend(c->ev, shards, n);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

uint64_t sc__cache_spare(sc_cache *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t spare = sc__evict_spare(c->ev);
    pthread_mutex_unlock(&c->mu);
    return spare;
}

int sc_cache_get_stats(const sc_cache *c, sc_cache_stats *out)
{
    if (!c || !out)
        return SC_EINVAL;
    sc_cache *m = (sc_cache *)c; /* the lock is not part of the value */
    pthread_mutex_lock(&m->mu);
    *out = c->st;
    out->entries = sc__evict_count(c->ev);
    out->bytes_cached = sc__evict_bytes(c->ev);
    out->capacity = sc__evict_capacity(c->ev);
    uint64_t unread_bytes;
    sc__evict_unread_evictions(c->ev, &out->evicted_unread, &unread_bytes);
    pthread_mutex_unlock(&m->mu);
    return SC_OK;
}

const char *sc_cache_dir(const sc_cache *c)
{
    return c ? c->pl.dir : "";
}
