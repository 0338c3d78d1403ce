/*
 * cache.h - the node-local shard cache (public calls: sc_cache_* in
 * shardcache.h; the handle stays private to cache.c).
 *
 * This module owns the cache directory of one rank: entries per shard,
 * their checksums and complete marks, the capacity bound (with evict.c
 * choosing victims), crash-safe publication, reuse across jobs, and the
 * counters.  It reads the source only through source.c, and it must never
 * serve an entry it has not proven whole: a doubt is a repair, not data.
 */
#ifndef SC_CACHE_H
#define SC_CACHE_H

#include "entry.h"
#include "shardcache/cache.h"
#include "tring.h"

/*
 * Where a cache is opened: what the job's ranks agreed on (mpi/node.c
 * finds it; sc_cache_open is that collective half, then this).
 */
typedef struct sc__cache_site {
    int rank;       /* in the job: names the rank in messages */
    int local_rank; /* among the node's ranks: names this rank's directory */
    int local_size; /* the node's ranks: whose directories are neighbors */
    uint64_t job;   /* the job's token, never 0: entries this job wrote are trusted */
} sc__cache_site;

/*
 * Before the node's ranks open their caches (its first rank alone, while
 * the others wait; a bounded cache only): room for this dataset's caches
 * on the node, made by evicting old caches of other datasets, least
 * recently used first (cachedir.h).  Local; logs what it removed.
 */
int sc__cache_make_room(const sc_dataset *ds, const sc__cache_site *site, const sc_config *cfg);

/* Opens this rank's cache for `ds` (local: no messages). */
int sc__cache_open(sc_dataset *ds, const sc__cache_site *site, const sc_config *cfg,
                   sc_cache **out, sc_error *err);

/* Where a shard read came from (sc__cache_read's *hit, sc__mapping's origin). */
enum { SC__FROM_SOURCE = 0, SC__FROM_CACHE = 1, SC__FROM_PEER = 2 };

/*
 * sc_cache_read, telling where the bytes came from (*hit: SC__FROM_SOURCE,
 * SC__FROM_CACHE, or SC__FROM_PEER for the first read of an entry a peer
 * on another node filled ahead of it), and tracing its stages
 * (cache read, checksum, source read, cache write) into `tc` (may be
 * NULL).  Safe from several threads at once, for different shards.  With
 * `owed` (may be NULL), the caller writes the entries: on entry *owed says
 * whether it can take one now (0: a miss is not kept, and nothing is
 * evicted for it); on return it is 1 where a miss the cache keeps was not
 * written: the caller owes the entry, sc__cache_keep with the same bytes
 * later (or sc__cache_unreserve), so that the write need not delay the
 * read's use; a reader of the shard meanwhile waits for the entry.
 */
int sc__cache_read(sc_cache *c, uint64_t shard, void *const *bufs, int *hit, int *owed,
                   const sc__tctx *tc, sc_error *err);

/*
 * An owed entry (sc__cache_read's *owed): its checksum, its write and its
 * publication, or, where the write fails, the reservation withdrawn and
 * caching paused as after any failed write (logged).
 */
void sc__cache_keep(sc_cache *c, uint64_t shard, void *const *bufs, const sc__tctx *tc);

/*
 * A warm hit without a copy: maps the entry (checked as a read would be)
 * and counts the hit (m->origin: SC__FROM_CACHE or SC__FROM_PEER, as
 * sc__cache_read's *hit).  When the shard is not cached, or its entry had to
 * be repaired, m->base is NULL and the caller reads it with
 * sc__cache_read (which goes to the source).  Unmap with sc__cache_unmap.
 */
int sc__cache_map(sc_cache *c, uint64_t shard, sc__mapping *m, const sc__tctx *tc,
                  sc_error *err);
void sc__cache_unmap(sc__mapping *m);

/*
 * Appends to the known future (sc_cache_plan_ahead): the next epoch's
 * shards in the order its schedule reads them, known when its plan arrives.
 */
int sc__cache_plan_extend(sc_cache *c, const uint32_t *shards, uint64_t n);

/* Bytes it can take evicting nothing its known future reads (sc__evict_spare). */
uint64_t sc__cache_spare(sc_cache *c);

/*
 * Fills from a peer on another node (mpi/peer.c).  sc__cache_reserve
 * holds a place in the index for `shard` (marked being filled: a reader
 * wanting it meanwhile reads the source, uncached, rather than wait on
 * another node): 1 when reserved, 0 when this node has it already or it
 * is not to be kept.  Every reservation ends in sc__cache_fill (the bytes
 * checked against `sum`, written, published; on any failure withdrawn) or
 * sc__cache_unreserve (withdrawn).
 */
int sc__cache_reserve(sc_cache *c, uint64_t shard);
void sc__cache_unreserve(sc_cache *c, uint64_t shard);
int sc__cache_fill(sc_cache *c, uint64_t shard, void *const *bufs, uint64_t sum,
                   const sc__tctx *tc, sc_error *err);
/* The checksum an entry of `shard` with these fields carries. */
uint64_t sc__cache_checksum(const sc_cache *c, uint64_t shard, void *const *fields);
/*
 * An entry of `shard` on this node (this rank's, else a neighbor's), mapped
 * and checked, not counted as a read: 1 if mapped; -1 while this rank's is
 * still being written (an owed entry: ask again); else 0.
 */
int sc__cache_map_node(sc_cache *c, uint64_t shard, sc__mapping *m);

#endif /* SC_CACHE_H */
