/*
 * evict.h - which cached shards stay: the cache's bookkeeping, apart from
 * its storage so that it is tested as plain C against a brute-force oracle.
 *
 * It knows each entry's shard, bytes, last use and next use.  Belady: when
 * an admission does not fit, the entry whose next use in the rank's known
 * future (its shard lists for the coming epochs) is furthest ahead, or
 * never, goes first; ties go to the least recently used, then the lowest
 * shard id.  LRU is kept as the comparison mode.  It must never touch files.
 */
#ifndef SC_EVICT_H
#define SC_EVICT_H

#include "shardcache/config.h"

typedef struct sc__evict sc__evict;

int sc__evict_new(sc_cache_policy policy, uint64_t capacity, sc__evict **out);
void sc__evict_free(sc__evict *ev);
/*
 * A new capacity (0: unbounded).  Held entries over it stay until the next
 * admission, which evicts as a full cache does.
 */
void sc__evict_set_capacity(sc__evict *ev, uint64_t capacity);
/* The capacity; 0 when unbounded. */
uint64_t sc__evict_capacity(const sc__evict *ev);

/* The access order from now on; replaces the previous one. */
int sc__evict_future(sc__evict *ev, const uint32_t *seq, uint64_t n);

/*
 * Appends to the future: what is still ahead of the cursor, then `more`
 * (a plan that arrived after the future was given); the past is dropped.
 */
int sc__evict_extend(sc__evict *ev, const uint32_t *more, uint64_t n);

/* 1 if the shard is held. */
int sc__evict_has(const sc__evict *ev, uint32_t shard);

/* A read of a held shard: updates its last and next use. */
void sc__evict_touch(sc__evict *ev, uint32_t shard);

/*
 * Admits `shard` (not held) of `bytes`, choosing victims until it fits.
 * *victims lists them (valid until the next call); they are already
 * forgotten.  Returns SC_OK, SC_ENOMEM, or SC_EOVERFLOW when the shard alone
 * exceeds the capacity (nothing is evicted then, and it is not admitted).
 */
int sc__evict_admit(sc__evict *ev, uint32_t shard, uint64_t bytes,
                    const uint32_t **victims, uint64_t *nvictims);

/* Forgets a held shard (a repair). */
void sc__evict_remove(sc__evict *ev, uint32_t shard);

/* Per-entry flag the cache keeps with it (checksum verified this process). */
int sc__evict_flag(const sc__evict *ev, uint32_t shard);
void sc__evict_set_flag(sc__evict *ev, uint32_t shard, int flag);

/*
 * Bytes that can be admitted evicting nothing the known future reads: the
 * free capacity, and (Belady) the entries it never reads.  UINT64_MAX
 * when unbounded.
 */
uint64_t sc__evict_spare(const sc__evict *ev);

uint64_t sc__evict_count(const sc__evict *ev);
uint64_t sc__evict_bytes(const sc__evict *ev);

#endif /* SC_EVICT_H */
