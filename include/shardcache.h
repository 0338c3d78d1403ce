/*
 * shardcache.h - the public C API of shardcache, and nothing else.
 *
 * shardcache shards a training dataset across MPI ranks each epoch, caches
 * each rank's shards node-locally and streams batches to the training loop.
 * This header is the whole contract: every type a caller can touch is here,
 * every handle is opaque, and every function returns an int status (SC_OK or
 * a negative SC_E* code, see SC_STATUS_LIST) instead of aborting.  Where a
 * call has no handle to keep its message in, it takes an optional
 * `sc_error *` that receives the status and a sentence naming the epoch,
 * rank, shard or file involved.
 *
 * Structs that callers fill have an *_INIT initializer; new fields are only
 * ever appended, so code written against an older header keeps compiling.
 */
#ifndef SHARDCACHE_H
#define SHARDCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "shardcache_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SC_API __attribute__((visibility("default")))
#else
#define SC_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/*
 * One list makes the enum and sc_strerror(), so that a code and its text
 * can never drift apart.  Codes are stable across releases: append only.
 */
#define SC_STATUS_LIST(X)                                                    \
    X(OK, 0, "success")                                                      \
    X(END_OF_EPOCH, 1, "end of epoch: no more batches")                      \
    X(EINVAL, -1, "invalid argument")                                        \
    X(ENOMEM, -2, "out of memory")                                           \
    X(EOVERFLOW, -3, "value too large for its type")                         \
    X(EPLAN, -4, "epoch plan invalid or not the same on every rank")         \
    X(EFORMAT, -5, "malformed, truncated or corrupted data")                 \
    X(EVERSION, -6, "unsupported format version")                            \
    X(EMPI, -7, "MPI call failed")                                           \
    X(EHDF5, -8, "HDF5 call failed")                                         \
    X(ECUDA, -9, "CUDA call failed")                                         \
    X(ENCCL, -10, "NCCL call failed")                                        \
    X(EIO, -11, "I/O error")                                                 \
    X(ECHECKSUM, -12, "checksum mismatch")                                   \
    X(EOWNERSHIP, -13, "shard owned by another rank")                        \
    X(ENOTSUP, -14, "not supported by this build")

typedef enum sc_status {
#define SC__STATUS_ENUM(name, value, text) SC_##name = (value),
    SC_STATUS_LIST(SC__STATUS_ENUM)
#undef SC__STATUS_ENUM
} sc_status;

/* The text of a status code; never NULL, also for unknown codes. */
SC_API const char *sc_strerror(int code);

/* The symbolic name of a status code ("SC_EPLAN"); never NULL. */
SC_API const char *sc_status_name(int code);

/*
 * What went wrong, for calls that have no handle to keep it in.  Every such
 * call accepts NULL when the caller only wants the status.
 */
#define SC_ERROR_MSG_MAX 512
typedef struct sc_error {
    int code;                   /* the status the call returned */
    char msg[SC_ERROR_MSG_MAX]; /* one or more sentences, never empty on error */
} sc_error;

#define SC_ERROR_INIT {0, {0}}

/* ------------------------------------------------------------------------ */
/* Build features                                                           */
/* ------------------------------------------------------------------------ */

typedef struct sc_features {
    int cuda;          /* 1 when built with the CUDA runtime */
    int nccl;          /* 1 when built with NCCL */
    int cuda_devices;  /* devices visible now; 0 with no GPU or no CUDA */
    int nccl_version;  /* ncclGetVersion(), 0 without NCCL */
    int testing;       /* 1 when fault-injection hooks are compiled in */
} sc_features;

/*
 * What this build of the library can do.  Finding no GPU is not an error:
 * cuda_devices is 0 and the call returns SC_OK.
 */
SC_API int sc_features_get(sc_features *out);

/* ------------------------------------------------------------------------ */
/* Epoch plans                                                              */
/* ------------------------------------------------------------------------ */

/*
 * An epoch plan maps every shard to exactly one rank, gives each rank its
 * shard order, and gives every rank the same number of batches, so that no
 * collective in a training loop can hang on one rank's extra batch.  The
 * same inputs give a byte-identical plan on any machine.
 */

typedef enum sc_shuffle_mode {
    SC_SHUFFLE_GLOBAL = 0, /* a fresh uniform random assignment every epoch */
    SC_SHUFFLE_STICKY = 1  /* keep owners; move a fraction `exchange` of shards */
} sc_shuffle_mode;

typedef enum sc_remainder {
    SC_REMAINDER_DROP = 0, /* every rank stops at the smallest rank's batch count */
    SC_REMAINDER_PAD = 1   /* short ranks repeat samples up to the largest count */
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
} sc_plan_params;

#define SC_PLAN_PARAMS_INIT                                                  \
    {NULL, 0, 1, 0, 0, 1, SC_REMAINDER_DROP, SC_SHUFFLE_GLOBAL, 0.0, 0}

/*
 * Computes the plan for params->epoch.  In sticky mode `prev` is the plan of
 * the epoch before (NULL for the first epoch planned); global mode ignores
 * it.  `prev` must have the same shards and world size.
 */
SC_API int sc_plan_create(const sc_plan_params *params, const sc_plan *prev,
                          sc_plan **out, sc_error *err);

SC_API void sc_plan_free(sc_plan *plan);

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
} sc_plan_info;

SC_API int sc_plan_get_info(const sc_plan *plan, sc_plan_info *out);

/*
 * A rank's ordered shard list.  `*shards` points into the plan and lives as
 * long as it does.  `*samples` is the number of samples those shards hold.
 */
SC_API int sc_plan_rank(const sc_plan *plan, uint32_t rank,
                        const uint32_t **shards, uint64_t *nshards,
                        uint64_t *samples);

/* The owner of one shard (an O(1) lookup). */
SC_API int sc_plan_owner(const sc_plan *plan, uint64_t shard, uint32_t *rank);

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
 * Checks every property a plan promises against the inputs it was made
 * from: each shard has exactly one owner, equal batch counts, per-rank sample
 * counts within the largest shard, dropped/padded counts consistent, and
 * that it is byte-identical to a fresh sc_plan_create() of the same inputs.
 * Returns SC_EPLAN naming the first property that fails.
 */
SC_API int sc_plan_check(const sc_plan *plan, const sc_plan_params *params,
                         const sc_plan *prev, sc_error *err);

/*
 * Rank 0 computes the plan and broadcasts it; every rank decodes it and
 * checks its hash, world size, fingerprint, epoch, seed and mode against
 * its own `params`.  Any mismatch fails on that rank with SC_EPLAN naming
 * the rank and the epoch.  Collective over `comm`.  Non-root ranks need
 * params->shard_sizes only for what they compare, so they may pass the
 * same params as rank 0; `prev` matters on rank 0 only.
 */
SC_API int sc_plan_share(MPI_Comm comm, const sc_plan_params *params,
                         const sc_plan *prev, sc_plan **out, sc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_H */
