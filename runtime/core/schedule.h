/*
 * schedule.h - which sample fills each of a rank's batch slots in an epoch.
 *
 * A rank's schedule is its shards in plan order, shuffled within windows,
 * padded or cut to the plan's batch count: a pure function of the plan and
 * the job's settings (no MPI, no I/O, no threads), so that the stream
 * builds batches from it and a resumed job recomputes any old rank's.
 */
#ifndef SC_SCHEDULE_H
#define SC_SCHEDULE_H

#include <stdint.h>

#include "error.h"
#include "shardcache/plan.h"

/* Test-only misbehaviour of one epoch (SC_FAULT), done on purpose. */
enum {
    SC__SCHED_DUP_SHARD = 1u << 0,  /* read the first shard twice */
    SC__SCHED_SKIP_SHARD = 1u << 1, /* never read the last shard */
};

/*
 * What a rank delivers in one epoch, slot by slot: ids[nslots] (nslots =
 * batches * batch size), of which the first nreal are real deliveries and
 * the rest padding repeats; dropped[ndropped] are the samples the remainder
 * policy leaves out.
 */
typedef struct sc__sched {
    uint64_t *ids, nslots, nreal;
    uint64_t *dropped, ndropped;
    /* Filled by sc__sched_order: the shards read, and each slot's index in them. */
    uint32_t *shards, *slot_shard;
    uint64_t nshards;
} sc__sched;

/*
 * Which of a share's len (> 0) samples fills slot q: its own for q < len;
 * past the end, padding repeats the share's last samples backwards (still
 * in memory when the batch is built).
 */
static inline uint64_t sc__pad_slot(uint64_t q, uint64_t len)
{
    return q < len ? q : len - 1 - (q - len) % len;
}

/*
 * The window a unit shuffles within: the job's, or with P partitions its
 * P-th, so that one rank serving all P holds one window.
 */
static inline uint64_t sc__unit_window(uint64_t window, uint64_t partitions)
{
    return partitions ? window / partitions : window;
}

/*
 * The schedule of `rank` in an epoch of `plan`: its shards in plan order,
 * cut into windows of `window` positions, each shuffled by its own
 * counter-based stream of (seed, epoch, rank, window): a pure function, so
 * any rank can compute any rank's (a resume needs the old ranks').
 * shard_first[k] is shard k's first sample id, [nshards + 1] entries.
 */
int sc__schedule(const uint64_t *shard_first, const sc_plan *plan, uint32_t rank,
                 uint64_t batch, uint64_t window, uint64_t seed, unsigned faults,
                 sc__sched *out, sc_error *err);
void sc__sched_free(sc__sched *sc);

/*
 * The shards schedule `sc` reads, in order of first use: the order the
 * stream loads them in, and so the future the cache's Belady is told (a
 * plan's own order would list the shards a remainder drops, and no
 * window's shuffle).  Fills sc->shards (each once, sc->nshards of them)
 * and sc->slot_shard (slot q's index in sc->shards), freed with the
 * schedule.  `bound` (the distinct shards it can read, at most) sizes the
 * lookup, not the dataset's count.  SC_OK, SC_ENOMEM, or SC_EPLAN where it
 * reads more than `bound` shards (nothing is filled then).
 */
int sc__sched_order(sc__sched *sc, const uint64_t *shard_first, uint64_t nshards,
                    uint64_t bound);

/*
 * The distinct shards a schedule of `nslots` slots can read: with the plan
 * it was computed from, the rank's shards and the cuts (a fault's repeat
 * too); without (a resumed epoch's), its slots or the dataset's shards.
 */
uint64_t sc__sched_bound(const sc_plan *plan, uint32_t rank, uint64_t nslots, uint64_t nshards);

#endif /* SC_SCHEDULE_H */
