/*
 * shardcache/cache.h - the node-local shard cache as a tool sees it:
 * open it for a dataset, read shards through it, count what it did.
 * (`shardcache stage` fills caches ahead of a job with it.)
 */
#ifndef SHARDCACHE_CACHE_H
#define SHARDCACHE_CACHE_H

#include <mpi.h>

#include "shardcache/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The node-local shard cache                                               */
/* ------------------------------------------------------------------------ */

typedef struct sc_cache sc_cache;

typedef struct sc_cache_stats {
    uint64_t hits;              /* shard reads served from the cache */
    uint64_t misses;            /* shard reads that went to the source */
    uint64_t bytes_from_source;
    uint64_t bytes_from_cache;
    uint64_t evictions;
    uint64_t repairs;           /* entries dropped: crashed, truncated, corrupt */
    uint64_t entries;           /* entries held now */
    uint64_t bytes_cached;      /* their bytes */
    uint64_t neighbor_hits;     /* of hits: read from another local rank's cache */
    uint64_t bytes_checked;     /* read from the cache and checked against its checksum */
    uint64_t bytes_from_peers;  /* cached from another node's rank over MPI, not the source */
    uint64_t capacity;          /* this rank's bound (payload bytes); 0: unbounded */
    /* appended for admission (room taken from reserved[]) */
    uint64_t bytes_written;     /* written into entries: misses kept, peers' fills */
    uint64_t misses_not_kept;   /* misses served without a write: Belady would evict
                                   them before their next read (or none is known) */
    uint64_t evicted_unread;    /* entries written here and evicted before any read */
    uint64_t reserved[3];       /* room for later fields: the size stays */
} sc_cache_stats;

/*
 * Opens this rank's cache for the dataset: one directory per (dataset
 * fingerprint, node-local rank) under cfg->cache_dir, else under
 * $SLURM_TMPDIR, $TMPDIR or /tmp (the first set), in shardcache-<uid>, so a
 * re-run on the same nodes starts warm.  Directories are made 0700.  Collective
 * over comm (it finds node-local ranks).
 */
SC_API int sc_cache_open(sc_dataset *ds, MPI_Comm comm, const sc_config *cfg,
                         sc_cache **out, sc_error *err);

/*
 * The order in which this rank will read shards from now on (its lists for
 * the coming epochs): Belady eviction looks ahead in it.  Replaces any
 * earlier sequence.
 */
SC_API int sc_cache_plan_ahead(sc_cache *c, const uint32_t *shards, uint64_t n);

/* Reads a whole shard into per-field buffers, from the cache or the source. */
SC_API int sc_cache_read(sc_cache *c, uint64_t shard, void *const *bufs,
                         sc_error *err);

SC_API int sc_cache_get_stats(const sc_cache *c, sc_cache_stats *out);

/* This rank's cache directory (under cfg->cache_dir, else the default root). */
SC_API const char *sc_cache_dir(const sc_cache *c);
SC_API int sc_cache_close(sc_cache *c);

/*
 * One cache directory under a root, as `shardcache cache list` shows it:
 * `shardcache-<fingerprint>-l<local rank>`, or `...-p<pid>`, the private
 * directory of a process that found the shared one in use.
 */
typedef struct sc_cache_dir_info {
    char path[SC_PATH_MAX + 64]; /* root/name */
    char source[SC_PATH_MAX];    /* its `source` note's path; "" if none */
    uint64_t fingerprint;
    int local_rank;
    int64_t pid;                 /* a private directory's process, else 0 */
    uint64_t entries, bytes;     /* its entries and their files' bytes */
    int64_t last_use;            /* its files' latest mtime (an open rewrites `source`) */
    int in_use;                  /* a live process holds its lock */
    int mine;                    /* this user's (another's is never removed) */
    int source_changed;          /* its source's stamp moved, or the source is gone */
    int owner_gone;              /* a private directory whose process is gone */
    uint64_t dev, ino;           /* the directory listed: a removal refuses any other */
    uint64_t reserved[6];
} sc_cache_dir_info;

/*
 * Calls each(d, arg) for every cache directory under root (in directory
 * order) until it returns non-zero.  SC_EIO, naming root, if it cannot be
 * read (a root never made holds no caches).
 */
SC_API int sc_cache_list(const char *root, int (*each)(const sc_cache_dir_info *d, void *arg),
                         void *arg, sc_error *err);

/*
 * Removes the cache directory at `path` (one sc_cache_list named: this
 * user's, named as a cache directory is) while holding its lock, so no job
 * is using it: *removed is 1, or 0 when a live process holds it.
 */
SC_API int sc_cache_remove(const char *path, int *removed, sc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_CACHE_H */
