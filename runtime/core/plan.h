/*
 * plan.h - the epoch plan: who owns which shard, in what order, and how
 * many batches every rank delivers.
 *
 * This module owns the seeded shuffle, the balanced assignment of shards to
 * ranks (global, or sticky with a bounded exchange fraction), the equal
 * batch count per rank, and the plan's canonical byte form and hash.  It is
 * pure C: it must never call MPI, HDF5 or CUDA, so that the hardest logic
 * of the product is tested as plain functions.  It must never depend on
 * anything but its inputs: the same inputs give the same bytes everywhere.
 */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include "error.h"
#include "shardcache/plan.h"

/* Upper bound on shards in one plan: shard ids travel as uint32_t. */
#define SC__PLAN_MAX_SHARDS (UINT64_C(0xFFFFFFFF))

/* Bytes of the fixed header in the wire format (see docs/plan-format.md). */
#define SC__PLAN_HEADER_BYTES 120
#define SC__PLAN_MAGIC "SCPL"
#define SC__PLAN_VERSION 2

struct sc_plan {
    sc_plan_info info;
    uint32_t *order;        /* [nshards]: rank 0's shards in order, then rank 1's... */
    uint64_t *rank_off;     /* [R+1]: rank r's shards are order[rank_off[r]..rank_off[r+1]) */
    uint64_t *rank_samples; /* [R] */
    uint32_t *owner;        /* [nshards]: derived from order, for O(1) lookups */
    unsigned char *wire;    /* the canonical encoding; info.hash hashes it */
    size_t wire_len;
};

/* The canonical bytes of a plan (owned by the plan; do not free). */
static inline const void *sc__plan_wire(const sc_plan *p, size_t *len)
{
    *len = p->wire_len;
    return p->wire;
}

/* Bytes the wire form of a plan of this size takes, or 0 on overflow. */
size_t sc__plan_wire_bytes(uint32_t world_size, uint64_t nshards);

/*
 * Checks that a plan was made for the inputs a rank holds: world size,
 * epoch, seed, fingerprint, mode, remainder, batch size, shard count.
 * `rank` only names the checking rank in the message.
 */
int sc__plan_matches(const sc_plan *plan, const sc_plan_params *params,
                     int rank, sc_error *err);

/* Allocates an empty plan's arrays; used by create and decode. */
int sc__plan_alloc(uint32_t world_size, uint64_t nshards, sc_plan **out,
                   sc_error *err);

/* owner[] is derived from the rank lists (order[], rank_off[]): it never travels. */
void sc__plan_fill_owner(sc_plan *plan);

/*
 * The plan of params->epoch, wherever a job starts: sticky mode chains from
 * `prev` (the plan of the epoch before) when given, else replays the chain
 * from epoch 0 with the same params; global mode needs neither.
 */
int sc__plan_at(const sc_plan_params *params, const sc_plan *prev, sc_plan **out,
                sc_error *err);

/* Encodes and hashes a plan whose arrays and info are complete. */
int sc__plan_seal(sc_plan *plan, sc_error *err);

#endif /* SC_PLAN_H */
