/*
 * shardcache/plan.h - epoch plans: which rank owns which shard, as a pure
 * function of the inputs (no MPI, no I/O), their binary form, validating
 * their inputs (sc_plan_params_check) and verifying a plan once made
 * (sc_plan_check).  Tools and tests that plan without a job include this
 * alone; sharing a plan over MPI is <shardcache/plan_share.h>.
 */
#ifndef SHARDCACHE_PLAN_H
#define SHARDCACHE_PLAN_H

#include "shardcache/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Epoch plans                                                              */
/* ------------------------------------------------------------------------ */

/*
 * An epoch plan maps every shard to exactly one home rank, gives each rank
 * its shard order, and gives every rank the same number of batches, so
 * that no collective in a training loop can hang on one rank's extra
 * batch.  To make the batch counts equal without dropping or repeating
 * whole shards, a plan may hand a sample range of a shard (a cut) to
 * another rank: at most 2 (U - 1) cuts an epoch, U the units (ranks, or
 * partitions), so that drop leaves out and pad repeats fewer than R x B
 * samples an epoch.  The same inputs give a byte-identical plan on any
 * machine.
 */

typedef enum sc_shuffle_mode {
    SC_SHUFFLE_GLOBAL = 0, /* a fresh random assignment every epoch, shares spread */
    SC_SHUFFLE_STICKY = 1  /* keep owners; move a fraction `exchange` of shards */
} sc_shuffle_mode;

typedef enum sc_remainder {
    SC_REMAINDER_DROP = 0, /* floor(N / (R B)) batches a rank: fewer than R x B left out */
    SC_REMAINDER_PAD = 1   /* ceil(N / (R B)): fewer than R x B repeats, at ranks' ends */
} sc_remainder;

typedef struct sc_plan sc_plan;

typedef struct sc_plan_params {
    const uint64_t *shard_sizes; /* samples in each shard, [nshards] */
    uint64_t nshards;
    uint32_t world_size;         /* ranks R, >= 1 */
    uint64_t seed;
    uint64_t epoch;
    uint64_t batch_size;         /* samples per batch, >= 1 */
    sc_remainder remainder;
    sc_shuffle_mode mode;
    double exchange;             /* sticky: fraction of shards moved, [0,1] */
    uint64_t fingerprint;        /* the dataset's fingerprint, carried along */
    /*
     * 0: the plan's units are the ranks.  P > 0: P canonical partitions,
     * planned as if they were ranks with batches of R x B / P samples;
     * rank r serves partitions [r P/R, (r+1) P/R) and its batch is their
     * next samples, partition after partition.  The job's global batches
     * (every rank's k-th, in rank order) then depend on P and R x B, never
     * on R alone.  R must divide P, P must divide R x B.
     */
    uint64_t partitions;
    uint64_t reserved[7];     /* room for later fields: the size stays */
} sc_plan_params;

/* Every field not named is 0 (NULL). */
#define SC_PLAN_PARAMS_INIT                                                  \
    {.world_size = 1, .batch_size = 1, .remainder = SC_REMAINDER_DROP,      \
     .mode = SC_SHUFFLE_GLOBAL}

/*
 * Computes the plan for params->epoch.  In sticky mode `prev` is the plan of
 * the epoch before (NULL for the first epoch planned); global mode ignores
 * it.  `prev` must have the same shards and world size.
 */
SC_API int sc_plan_create(const sc_plan_params *params, const sc_plan *prev,
                          sc_plan **out, sc_error *err);

SC_API void sc_plan_free(sc_plan *plan);

/*
 * Validates the parameters (no plan is made or read: verifying a plan is
 * sc_plan_check): whether a job with these parameters can plan every
 * epoch (params->epoch and prev aside): the counts (shards, at least one a rank, batch size),
 * the policy, the shard sizes, the partitions (R divides P, P divides
 * R x B, P <= shards), and with SC_REMAINDER_DROP (or partitions) one
 * global batch: total >= R x B, whatever the shards, since the remainder
 * is cut at sample granularity.  sc_loader_open refuses what this
 * refuses, on every rank, before any epoch; the words name the sizes and
 * what would fit.  sc_plan_create validates the same at each epoch.
 */
SC_API int sc_plan_params_check(const sc_plan_params *params, sc_error *err);

/* Everything a plan says, as plain numbers. */
typedef struct sc_plan_info {
    uint64_t epoch;
    uint64_t seed;
    uint64_t fingerprint;
    uint32_t world_size;
    sc_shuffle_mode mode;
    sc_remainder remainder;
    double exchange;
    uint64_t nshards;
    uint64_t batch_size;
    uint64_t total_samples;    /* samples in the dataset */
    uint64_t batches_per_rank; /* the same on every rank */
    uint64_t dropped;          /* samples not delivered this epoch (drop) */
    uint64_t padded;           /* repeated samples delivered (pad) */
    uint64_t moved;            /* shards whose owner changed from `prev` */
    uint64_t min_rank_samples; /* balance: fewest samples on one rank */
    uint64_t max_rank_samples; /* balance: most samples on one rank */
    uint64_t hash;             /* 64-bit hash of the encoded plan */
    uint64_t bytes;            /* size of the encoded plan */
    uint64_t partitions;       /* as the params' (0: the units are the ranks) */
    uint64_t cuts;             /* sample ranges served away from their shard's home */
    uint64_t reserved[6];     /* room for later fields: the size stays */
} sc_plan_info;

SC_API int sc_plan_get_info(const sc_plan *plan, sc_plan_info *out);

/*
 * A rank's ordered list of home shards.  `*shards` points into the plan and
 * lives as long as it does.  `*samples` is the number of samples the rank
 * serves: its shards' less the ranges cut away, plus those cut to it.
 */
SC_API int sc_plan_rank(const sc_plan *plan, uint32_t rank,
                        const uint32_t **shards, uint64_t *nshards,
                        uint64_t *samples);

/* The home rank of one shard (an O(1) lookup); cuts may serve part of it elsewhere. */
SC_API int sc_plan_owner(const sc_plan *plan, uint64_t shard, uint32_t *rank);

/* A sample range [begin, end) of a shard, served by another rank than its home's. */
typedef struct sc_plan_cut {
    uint64_t shard, begin, end;   /* samples of the shard, counted from its first */
    uint32_t from, to;            /* ranks: the shard's home, the one serving the range */
    uint32_t from_unit, to_unit;  /* the same as partitions (as ranks without them) */
    uint64_t reserved[4];         /* room for later fields: the size stays */
} sc_plan_cut;

/* Cut i of the plan, i < sc_plan_info.cuts. */
SC_API int sc_plan_get_cut(const sc_plan *plan, uint64_t i, sc_plan_cut *out);

/*
 * The rank that serves sample `id`, given each shard's first sample id
 * (first[nshards + 1]): its shard's home unless a cut hands it elsewhere.
 */
SC_API int sc_plan_sample_owner(const sc_plan *plan, const uint64_t *first, uint64_t id,
                                uint32_t *rank);

/*
 * Serialization: a versioned, self-checking binary form, O(shards) bytes.
 * sc_plan_encode() allocates *buf (free it with free()).  sc_plan_decode()
 * rejects truncated, corrupted or wrong-version input with SC_EFORMAT or
 * SC_EVERSION and says what was wrong.
 */
SC_API int sc_plan_encode(const sc_plan *plan, void **buf, size_t *len,
                          sc_error *err);
SC_API int sc_plan_decode(const void *buf, size_t len, sc_plan **out,
                          sc_error *err);

/*
 * Verifies a plan (its inputs are assumed valid: validating them alone is
 * sc_plan_params_check): every property it promises, against the inputs
 * it was made from: each shard has exactly one home, its cuts valid and with what its
 * home keeps covering it once, every unit serving its target, equal batch
 * counts, fewer than R x B samples dropped or padded, and that it is
 * byte-identical to a fresh sc_plan_create() of the same inputs.
 * Returns SC_EPLAN naming the first property that fails.
 */
SC_API int sc_plan_check(const sc_plan *plan, const sc_plan_params *params,
                         const sc_plan *prev, sc_error *err);

/*
 * How well one epoch mixes the dataset, from the plan and the ranks'
 * schedules alone (no data read): every rank's full batches, each figure
 * beside the same for a uniform random permutation of the whole dataset
 * cut into batches of the same size (what a perfect shuffle gives).
 * docs/shuffle.md says what each number means.
 */
typedef struct sc_quality_params {
    const uint64_t *shard_sizes; /* as the plan's, [nshards] */
    uint64_t nshards;
    uint64_t batch_size;      /* the plan's */
    uint64_t window;          /* shuffle window in samples, resolved (not SC_WINDOW_AUTO) */
    uint64_t seed;            /* the job's seed */
    const uint32_t *labels;   /* a class per sample, or NULL */
    uint32_t nclasses;        /* labels are < nclasses */
    uint64_t reserved[4];
} sc_quality_params;

typedef struct sc_quality_figures {
    double shards;  /* distinct shards in a batch */
    double moved;   /* |delivered position - stored position| / samples: 1/3 for uniform */
    double bits;    /* label entropy of a batch, bits (labels only) */
    double classes; /* distinct labels in a batch (labels only) */
    double reserved[4]; /* room for later figures: the size stays */
} sc_quality_figures;

typedef struct sc_quality {
    uint64_t batches;           /* full batches measured, every rank's */
    sc_quality_figures plan;    /* this plan's, averaged */
    sc_quality_figures uniform; /* a uniform random permutation's */
    uint64_t reserved[4];
} sc_quality;

SC_API int sc_plan_quality(const sc_plan *plan, const sc_quality_params *params,
                           sc_quality *out, sc_error *err);
#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_PLAN_H */
