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
    uint64_t reserved[7];     /* room for later fields: the size stays */
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

/*
 * Where caches live for cfg: cfg->cache_dir, else the default root
 * (${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/shardcache-<uid>).  Each cache directory
 * under it holds a file `source`: the source's path, then its size and
 * modification time when the cache was opened (`shardcache cache gc`
 * reclaims directories whose source changed).  SC_EINVAL if it does not
 * fit in n bytes.
 */
SC_API int sc_cache_root(const sc_config *cfg, char *buf, size_t n);
SC_API const char *sc_cache_dir(const sc_cache *c);
SC_API int sc_cache_close(sc_cache *c);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_CACHE_H */
