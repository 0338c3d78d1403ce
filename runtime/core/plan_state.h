/*
 * plan_state.h - the epoch plan's object and what the core files that make,
 * encode, cut and check it share: who owns which shard, in what order, and
 * how many batches every rank delivers.  (Named apart from any one .c:
 * plan.c, plan_obj.c, plan_cut.c, plan_params.c, plan_check.c and
 * plan_codec.c all build on it, none owns it.)
 *
 * This module owns the seeded shuffle, the balanced assignment of shards to
 * ranks (global, or sticky with a bounded exchange fraction), the equal
 * batch count per rank, and the plan's canonical byte form and hash.  It is
 * pure C: it must never call MPI, HDF5 or CUDA, so that the hardest logic
 * of the product is tested as plain functions.  It must never depend on
 * anything but its inputs: the same inputs give the same bytes everywhere.
 */
#ifndef SC_PLAN_STATE_H
#define SC_PLAN_STATE_H

#include "error.h"
#include "shardcache/plan.h"

/*
 * The shard holding sample `id`, given each shard's first sample id
 * (first[nshards + 1], as sc_dataset_shard_offsets gives it): a binary
 * search.  SC_EINVAL when id lies outside the samples.
 */
int sc__shard_of(const uint64_t *first, uint64_t nshards, uint64_t id, uint64_t *shard);

/* Upper bound on shards in one plan: shard ids travel as uint32_t. */
#define SC__PLAN_MAX_SHARDS (UINT64_C(0xFFFFFFFF))

/* Bytes of the fixed header in the wire format (see docs/plan-format.md). */
#define SC__PLAN_HEADER_BYTES 128

/* The most cuts a plan of U units makes: a transfer makes at most two. */
#define SC__PLAN_MAX_CUTS(U) (2 * ((uint64_t)(U) - 1))

/* Samples [lo, hi) of a shard, served by unit `to` instead of its home `from`. */
typedef struct sc__cut {
    uint32_t shard, from, to;
    uint64_t lo, hi;
} sc__cut;

/*
 * A plan is computed over U units: the ranks (U = R), or P partitions,
 * rank r serving units [r U/R, (r+1) U/R).  Each unit has a list of home
 * shards and serves their samples less the cuts made from them, plus the
 * cuts made to it.
 */
struct sc_plan {
    sc_plan_info info;
    uint32_t units;          /* U */
    uint64_t unit_batch;     /* samples a unit adds to its rank's batch: R x B / U */
    uint32_t *order;         /* [nshards]: unit 0's home shards in order, then unit 1's... */
    uint64_t *unit_off;      /* [U+1]: unit u's shards are order[unit_off[u]..unit_off[u+1]) */
    uint64_t *unit_samples;  /* [U]: samples each unit serves */
    uint32_t *owner;         /* [nshards]: each shard's home unit, derived from order */
    sc__cut *cuts;           /* [info.cuts], in the order made */
    sc__cut *by_shard;       /* the same sorted by (shard, lo), for lookups */
    sc__cut *by_to;          /* the same sorted by (to, shard, lo): what each unit receives */
    unsigned char *wire;     /* the canonical encoding; info.hash hashes it */
    size_t wire_len;
};

/* The canonical bytes of a plan (owned by the plan; do not free). */
static inline const void *sc__plan_wire(const sc_plan *p, size_t *len)
{
    *len = p->wire_len;
    return p->wire;
}

/* The rank serving unit u. */
static inline uint32_t sc__plan_unit_rank(const sc_plan *p, uint32_t u)
{
    return u / (p->units / p->info.world_size);
}

/* Units [*u0, *u1) of `rank`. */
static inline void sc__plan_rank_units(const sc_plan *p, uint32_t rank, uint32_t *u0,
                                       uint32_t *u1)
{
    uint32_t k = p->units / p->info.world_size;
    *u0 = rank * k;
    *u1 = *u0 + k;
}

/*
 * Calls fn for each non-empty piece unit u serves, in its order: its home
 * shards less their cuts, then the cuts made to it.  first[] is each
 * shard's first sample id; lo/hi count from the shard's first sample.
 */
typedef int (*sc__piece_fn)(void *ctx, uint32_t shard, uint64_t lo, uint64_t hi);
int sc__plan_visit(const sc_plan *p, uint32_t u, const uint64_t *first, sc__piece_fn fn,
                   void *ctx);

/* How many of shard s's `size` samples its home unit keeps (all, unless cut). */
uint64_t sc__plan_kept(const sc_plan *p, uint32_t s, uint64_t size);

/* The unit serving sample `off` (from the shard's first) of shard s. */
uint32_t sc__plan_unit_of(const sc_plan *p, uint32_t s, uint64_t off);

/*
 * The shards `rank` reads in an epoch, each once, into a fresh *out[*n]:
 * its units' home shards that keep samples, in order, then the shards cut
 * to them.  SC_ENOMEM.
 */
int sc__plan_reads(const sc_plan *p, uint32_t rank, uint32_t **out, uint64_t *n);

/* Whether `rank` reads any sample of shard s (s < nshards) in the plan's epoch. */
int sc__plan_reads_shard(const sc_plan *p, uint32_t rank, uint32_t s);

/* Sorts the cuts into by_shard and by_to; after the cuts change. */
void sc__plan_index_cuts(sc_plan *p);

/*
 * The remainder (plan_cut.c): from balanced units, the batch count and
 * the cuts and whole-shard moves that give every unit its target, so that
 * drop leaves out and pad repeats fewer than U x unit_batch samples.
 * sizes[] are the shard sizes, total their sum.
 */
int sc__plan_cut(sc_plan *p, const uint64_t *sizes, uint64_t total, sc_error *err);

/*
 * What unit u serves once the remainder is cut: T = b x unit_batch under
 * drop (at least), under pad T less its share of the repeats, from the
 * plan's info (batches_per_rank) and the total.
 */
uint64_t sc__plan_target(const sc_plan *p, uint32_t u, uint64_t total);

/* Shards whose home unit differs from prev's (0 without a comparable prev). */
uint64_t sc__plan_moved(const sc_plan *plan, const sc_plan *prev);

/*
 * What a received plan's cuts must hold, for the shard sizes the receiver
 * knows (O(shards + cuts)): each cut a range of its shard sent from its
 * home, a shard's cuts and its kept part covering it once, every unit
 * serving what the plan says and its target.  SC_EPLAN naming the first
 * that fails.  (The decoder sees no sizes; a hash collision or a buggy
 * encoder must still not hand the loader a sample served twice.)
 */
int sc__plan_check_pieces(const sc_plan *plan, const uint64_t *sizes, const uint64_t *first,
                          sc_error *err);

/* Per-rank min/max served samples into info. */
void sc__plan_rank_extremes(sc_plan *p);

/* Bytes the wire form of a plan of this size takes, or 0 on overflow. */
size_t sc__plan_wire_bytes(uint32_t units, uint64_t nshards, uint64_t ncuts);

/*
 * Validates the parameters of one epoch (plan_params.c): what
 * sc_plan_params_check validates, named with the epoch, and a sticky
 * `prev` of the same shape.  On SC_OK *total is the samples and *largest
 * the largest shard's.
 */
int sc__plan_params_validate(const sc_plan_params *p, const sc_plan *prev, uint64_t *total,
                             uint64_t *largest, sc_error *err);

/*
 * Checks that a plan was made for the inputs a rank holds: world size,
 * epoch, seed, fingerprint, mode, remainder, batch size, shard count.
 * `rank` only names the checking rank in the message.
 */
int sc__plan_matches(const sc_plan *plan, const sc_plan_params *params,
                     int rank, sc_error *err);

/* The units of a job: its partitions, or its ranks. */
static inline uint32_t sc__plan_units_of(const sc_plan_params *p)
{
    return p->partitions ? (uint32_t)p->partitions : p->world_size;
}

/* Allocates an empty plan's arrays (room for U's most cuts); used by create and decode. */
int sc__plan_alloc(uint32_t world_size, uint32_t units, uint64_t nshards, sc_plan **out,
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

#endif /* SC_PLAN_STATE_H */
