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

#include "shardcache.h"

/*
 * sc_cache_read, telling whether it was a hit.  Safe from several threads
 * at once, for different shards.
 */
int sc__cache_read(sc_cache *c, uint64_t shard, void *const *bufs, int *hit,
                   sc_error *err);

#endif /* SC_CACHE_H */
