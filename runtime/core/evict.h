/*
 * evict.h - which cached shards stay: the cache's bookkeeping, apart from
 * its storage so that it is tested as plain C against a brute-force oracle.
 *
 * It knows each entry's shard, bytes, last use and next use.  Belady, with
 * a bounded capacity and a known future (the rank's shard lists for the
 * coming epochs), decides admission as well as eviction: each time the
 * future is given, every span from a read to the next read of the same
 * shard (and from now to the next read of each held entry) is kept or not
 * by the offline optimum for that capacity (spans taken by earliest end,
 * each kept when the bytes kept at every moment of it still fit: for
 * shards of one size this is Belady's bound, the most hits any cache of
 * that capacity can have; among plans with as many, the spans that need no
 * write go first, so that epochs of every shard once rewrite nothing).  A
 * miss is written only when its span is kept, so an entry is never written
 * to be evicted before it is read again; victims are the entries whose
 * spans are not kept, furthest next use (or never) first, then least
 * recently used, then the lowest shard id.  Reads may come in any order
 * (producers read ahead in parallel): each consumes the first unread
 * position of its shard.  LRU is kept as the comparison mode (it admits
 * every miss).  It must never touch files.
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

/*
 * The bytes of a shard not held, for planning what to keep (default: 1
 * for every shard, which suits capacities counted in shards).
 */
void sc__evict_set_sizer(sc__evict *ev, uint64_t (*size)(void *arg, uint32_t shard),
                         void *arg);

/* The access order from now on; replaces the previous one. */
int sc__evict_future(sc__evict *ev, const uint32_t *seq, uint64_t n);

/*
 * Appends to the future: what is still ahead of the cursor, then `more`
 * (a plan that arrived after the future was given); the past is dropped.
 */
int sc__evict_extend(sc__evict *ev, const uint32_t *more, uint64_t n);

/* 1 if the shard is held. */
int sc__evict_has(const sc__evict *ev, uint32_t shard);

/*
 * A read of a held shard: updates its last and next use.  Returns 1 when
 * it is the first read of an entry filled ahead (sc__evict_fill), else 0.
 */
int sc__evict_touch(sc__evict *ev, uint32_t shard);

/*
 * Admits `shard` (not held) of `bytes` whatever its future, choosing
 * victims until it fits (an entry found on disk; the bench's model).
 * *victims lists them (valid until the next call); they are already
 * forgotten.  Returns SC_OK, SC_ENOMEM, or SC_EOVERFLOW when the shard alone
 * exceeds the capacity (nothing is evicted then, and it is not admitted).
 */
int sc__evict_admit(sc__evict *ev, uint32_t shard, uint64_t bytes,
                    const uint32_t **victims, uint64_t *nvictims);

/*
 * A read of `shard` (not held) that went to the source: admitted as
 * sc__evict_admit does when it is to be kept (LRU, an unbounded cache, no
 * known future, or Belady keeps its span and room is made without evicting
 * an entry whose span is kept; one whose span is not kept only into room
 * no kept span needs until the end of the known future, and one the known
 * future does not read again only into room no entry holds, since evicting
 * another such entry for it gains no hit and costs a write).  SC_EOVERFLOW
 * when it is not kept: the caller serves it without writing it.  So, with
 * Belady and a known future, an entry it writes is never evicted before
 * its next read.
 */
int sc__evict_miss(sc__evict *ev, uint32_t shard, uint64_t bytes,
                   const uint32_t **victims, uint64_t *nvictims);

/*
 * An entry written ahead of its read (a peer's transfer): admitted only
 * when, with Belady, the bytes kept from now to its first read leave room
 * for it (else SC_EOVERFLOW); its first read is sc__evict_touch's 1.
 */
int sc__evict_fill(sc__evict *ev, uint32_t shard, uint64_t bytes,
                   const uint32_t **victims, uint64_t *nvictims);

/*
 * Entries written (sc__evict_miss, sc__evict_fill) and evicted before any
 * read: how many, and their bytes.  Belady's admission keeps both at 0
 * while reads follow the known future.
 */
void sc__evict_unread_evictions(const sc__evict *ev, uint64_t *n, uint64_t *bytes);

/* Forgets a held shard (a repair). */
void sc__evict_remove(sc__evict *ev, uint32_t shard);

/* Per-entry flag the cache keeps with it (checksum verified this process). */
int sc__evict_flag(const sc__evict *ev, uint32_t shard);
void sc__evict_set_flag(sc__evict *ev, uint32_t shard, int flag);

/*
 * Bytes that can be admitted evicting nothing the known future reads: the
 * free capacity, and (Belady) the entries it never reads or whose span is
 * not kept.  UINT64_MAX when unbounded.
 */
uint64_t sc__evict_spare(const sc__evict *ev);

uint64_t sc__evict_count(const sc__evict *ev);
uint64_t sc__evict_bytes(const sc__evict *ev);

#endif /* SC_EVICT_H */
