/*
 * peer.h - shards that move between nodes, sent over MPI from the old
 * owner's cache instead of read again from the shared source
 * (docs/cache.md, "Between nodes").
 *
 * All calls run on the loader's calling thread: the only thread that calls
 * MPI (MPI_THREAD_FUNNELED is enough).  A transfer only fills a cache; the
 * plan, the ownership ledger and the verdicts do not depend on it.
 */
#ifndef SC_PEER_H
#define SC_PEER_H

#include <mpi.h>

#include "cache.h"
#include "error.h"
#include "shardcache/plan.h"

typedef struct sc__peer sc__peer;

typedef struct sc__peer_opts {
    uint64_t max_bytes; /* replies being received at once, in bytes (at least one) */
    double timeout_s;   /* at close, the exchange ends within this, or is abandoned */
    int log_level;
    sc__tring *ring;    /* the calling thread's trace ring (NULL: not traced) */
} sc__peer_opts;

/* Collective over comm (it duplicates it and learns every rank's node). */
int sc__peer_open(MPI_Comm comm, sc_dataset *ds, sc_cache *cache, const sc__peer_opts *o,
                  sc__peer **out, sc_error *err);

/*
 * The next epoch has arrived while `prev` runs: of the shards this rank's
 * schedule reads in it (mine[n], in order of first use: a shard the
 * remainder drops is not among them), those no rank of its node holds,
 * and that prev's owner holds on another node, are reserved in the cache
 * and asked of that owner.  Call it before the producers may start on it.
 */
int sc__peer_want(sc__peer *p, const sc_plan *prev, const uint32_t *mine, uint64_t n,
                  sc_error *err);

/* This rank has ended `epoch`: what it was asked for from then on, it has or never will. */
void sc__peer_ended(sc__peer *p, uint64_t epoch);

/*
 * Answers the asks that came in, sends what can be sent, takes in what
 * arrived, gives up on what timed out, and asks for more within the memory
 * bound.  Never waits.  A failed transfer is a note, not an error: the
 * shard is read from the source.
 */
int sc__peer_pump(sc__peer *p, sc_error *err);

/* Bytes received for `epoch`'s shards (during the epoch before it), of the last few epochs. */
uint64_t sc__peer_received(const sc__peer *p, uint64_t epoch);

/* Asks for `epoch`'s shards not yet done with (the loader queues it in the stream at 0). */
int sc__peer_pending(const sc__peer *p, uint64_t epoch);

/* Withdraws what is still asked for `epoch` (UINT64_MAX: all): the source serves those. */
int sc__peer_give_up(sc__peer *p, uint64_t epoch, sc_error *err);

/* Sends out what was asked (or "none"), withdraws its own asks, frees. */
void sc__peer_close(sc__peer *p);

#endif /* SC_PEER_H */
