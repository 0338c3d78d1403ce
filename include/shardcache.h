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
    X(ENOTSUP, -14, "not supported by this build")                          \
    X(ETRANSFORM, -15, "a transform or augmentation callback failed")

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

/*
 * The shard holding sample `id`, given each shard's first sample id
 * (first[nshards + 1], as sc_dataset_shard_offsets gives it): a binary
 * search.  SC_EINVAL when id lies outside the samples.
 */
SC_API int sc_shard_of(const uint64_t *first, uint64_t nshards, uint64_t id, uint64_t *shard);

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

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

typedef enum sc_cache_policy {
    SC_CACHE_BELADY = 0, /* evict the shard needed furthest ahead (or never) */
    SC_CACHE_LRU = 1     /* evict the least recently used (for comparison) */
} sc_cache_policy;

typedef enum sc_cache_check {
    SC_CACHE_CHECK_FIRST = 0, /* verify an entry's checksum on its first read */
    SC_CACHE_CHECK_ALWAYS = 1 /* verify on every read */
} sc_cache_check;

typedef enum sc_device_mode {
    SC_DEVICE_AUTO = 0, /* the GPU when the build has CUDA and one is visible */
    SC_DEVICE_HOST = 1, /* batches stay in (pinned) host memory */
    SC_DEVICE_CUDA = 2  /* the GPU, or an SC_ECUDA error at open */
} sc_device_mode;

typedef enum sc_verify_mode {
    SC_VERIFY_SKETCH = 0, /* one 9-word reduction per epoch */
    SC_VERIFY_FULL = 1    /* a per-sample count vector: names every offender */
} sc_verify_mode;

#define SC_PATH_MAX 4096

typedef struct sc_transform sc_transform; /* below, with the datasets */

/*
 * Everything a job can set, each with an SC_* environment variable.  One
 * table in runtime/config.c makes the defaults, the environment parsing and
 * the printout (`SC_DUMP_CONFIG=1` prints it to stderr at init).
 */
typedef struct sc_config {
    char source[SC_PATH_MAX];     /* SC_SOURCE: HDF5 file, directory or list */
    uint64_t shard_size;          /* SC_SHARD_SIZE: samples per shard (one file) */
    char fields[1024];            /* SC_FIELDS: comma list; empty = every field */
    uint64_t seed;                /* SC_SEED */
    uint64_t batch_size;          /* SC_BATCH_SIZE */
    sc_shuffle_mode mode;         /* SC_SHUFFLE: global | sticky */
    double exchange;              /* SC_EXCHANGE: sticky fraction moved */
    sc_remainder remainder;       /* SC_REMAINDER: drop | pad */
    char cache_dir[SC_PATH_MAX];  /* SC_CACHE_DIR; empty: SLURM_TMPDIR, TMPDIR, /tmp */
    uint64_t cache_bytes;         /* SC_CACHE_BYTES: capacity; 0 = unbounded */
    sc_cache_policy cache_policy; /* SC_CACHE_POLICY: belady | lru */
    sc_cache_check cache_check;   /* SC_CACHE_CHECK: first | always */
    int log_level;                /* SC_LOG: 0 errors only, 1 warnings, 2 info */
    /* appended for the loader (sc_loader_*) */
    int producers;                /* SC_PRODUCERS: producer threads; 0 = auto */
    uint64_t prefetch_batches;    /* SC_PREFETCH_BATCHES: depth of the batch ring */
    uint64_t shuffle_window;      /* SC_SHUFFLE_WINDOW: samples shuffled together; 0, 1: none */
    uint64_t stream_bytes;        /* SC_STREAM_BYTES: shard bytes held in memory */
    sc_device_mode device;        /* SC_DEVICE: auto | host | cuda */
    sc_verify_mode verify;        /* SC_VERIFY: sketch | full */
    char audit_dir[SC_PATH_MAX];  /* SC_AUDIT_DIR: per-rank consumed ids; empty = off */
    /* appended for tracing */
    char trace[SC_PATH_MAX];      /* SC_TRACE: path prefix of PREFIX.rankR.json; empty = off */
    uint64_t trace_events;        /* SC_TRACE_EVENTS: ring size per thread */
    /* appended for transforms (no environment variable: code, not a setting) */
    const sc_transform *transform; /* NULL: the source's fields as they are */
} sc_config;

/*
 * Defaults, then the SC_* environment.  A variable that does not parse is
 * an SC_EINVAL naming it and its value, never silently ignored.
 */
SC_API int sc_config_init(sc_config *cfg, sc_error *err);

/* Sets one setting by its variable name ("SC_SEED") from text. */
SC_API int sc_config_set(sc_config *cfg, const char *name, const char *value,
                         sc_error *err);

/* Writes every setting, one "NAME=value  # meaning" line each, to a stream. */
SC_API int sc_config_print(const sc_config *cfg, void *file /* FILE * */);

/* ------------------------------------------------------------------------ */
/* Source datasets                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Layout A: one HDF5 file whose root group holds fixed-shape numeric
 * datasets ("fields") sharing their first dimension N; shard k is samples
 * [k*shard_size, (k+1)*shard_size).  Layout B: a directory of .h5 files, or
 * a text file listing HDF5 paths, one shard per file, each with the same
 * fields.  Field names, types and shapes come from the files.
 */
typedef struct sc_dataset sc_dataset;

#define SC_MAX_FIELDS 16
#define SC_MAX_DIMS 8

typedef struct sc_field_info {
    char name[256];            /* the dataset's path, e.g. "/images" */
    char dtype[16];            /* "uint8", "int64", "float32", ... */
    int ndims;                 /* dimensions of one sample */
    uint64_t dims[SC_MAX_DIMS];
    uint64_t sample_bytes;
} sc_field_info;

typedef struct sc_dataset_info {
    char layout;               /* 'A' or 'B' */
    uint64_t nsamples;
    uint64_t nshards;
    uint64_t shard_size;       /* layout A; 0 for B */
    uint64_t sample_bytes;     /* all fields */
    int nfields;
    uint64_t fingerprint;      /* paths, sizes, mtimes, fields, shard size */
} sc_dataset_info;

/*
 * Transform once, augment every time.
 *
 * `shard` runs on a producer thread when a shard is first read from the
 * source and maps the source's fields (in[i]: nsamples * their sample
 * bytes, in sc_dataset_field order of the source) to the declared output
 * fields (out[i]: nsamples * the declared sample bytes).  The cache keeps
 * the output, so later epochs (and jobs) skip the transform; `name` and
 * `version` are part of the cache key, so changing either invalidates the
 * entries.  NULL keeps the source's fields (and `out` is ignored).
 *
 * `augment` runs on a producer thread on every delivery of every sample,
 * in the batch's buffers (fields[i] points at this sample's bytes of field
 * i), with `seed` a function of (SC_SEED, epoch, sample) only: runs are
 * reproducible whatever the thread count.  NULL: none.
 *
 * Either returns 0, or non-zero with a reason in msg: the loader stops with
 * SC_ETRANSFORM naming the shard (transform) or the sample (augment), and
 * nothing half-transformed is cached.  Both may run concurrently on several
 * threads, for different shards and samples.
 */
typedef int (*sc_shard_fn)(void *arg, uint64_t shard, uint64_t first_sample,
                           uint64_t nsamples, const void *const *in, void *const *out,
                           char *msg, size_t msglen);
typedef int (*sc_augment_fn)(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed,
                             void *const *fields, char *msg, size_t msglen);

struct sc_transform {
    const char *name;                  /* e.g. "normalize-crop56"; part of the cache key */
    const char *version;               /* e.g. "1"; part of the cache key */
    int nout;                          /* output fields, 1..SC_MAX_FIELDS */
    sc_field_info out[SC_MAX_FIELDS];  /* name, dtype, ndims, dims (sample_bytes is computed) */
    sc_shard_fn shard;                 /* NULL: no transform */
    sc_augment_fn augment;             /* NULL: no augmentation */
    void *arg;
};

/*
 * Collective over comm: layout A files are opened with the MPI-IO driver.
 * With cfg->transform, the dataset's fields (sc_dataset_field) are the
 * transform's outputs, sc_dataset_read_shard returns them, and the
 * fingerprint covers the transform's name, version and outputs.
 */
SC_API int sc_dataset_open(MPI_Comm comm, const sc_config *cfg,
                           sc_dataset **out, sc_error *err);
SC_API int sc_dataset_get_info(const sc_dataset *ds, sc_dataset_info *out);
SC_API int sc_dataset_field(const sc_dataset *ds, int i, sc_field_info *out);
/* Samples per shard, [nshards], owned by the dataset. */
SC_API int sc_dataset_shard_sizes(const sc_dataset *ds, const uint64_t **sizes);
/* First global sample id of each shard, [nshards + 1]. */
SC_API int sc_dataset_shard_offsets(const sc_dataset *ds, const uint64_t **first);
/*
 * Reads one whole shard straight from the source: bufs[i] receives field
 * i, shard_sizes[shard] * sample_bytes(i) bytes.
 */
SC_API int sc_dataset_read_shard(sc_dataset *ds, uint64_t shard,
                                 void *const *bufs, sc_error *err);
/* Plan parameters for this dataset and config (shard sizes, fingerprint...). */
SC_API int sc_dataset_plan_params(const sc_dataset *ds, const sc_config *cfg,
                                  uint32_t world_size, uint64_t epoch,
                                  sc_plan_params *out);
/* Collective over the communicator it was opened on. */
SC_API int sc_dataset_close(sc_dataset *ds);

/* Progress callbacks: `done` of `total` units (bytes or samples). */
typedef void (*sc_progress_fn)(void *arg, uint64_t done, uint64_t total);

/* What `shardcache make-dataset` writes: a dataset a classifier can learn. */
typedef struct sc_synth_params {
    const char *out;           /* file (layout A) or directory (layout B) */
    char layout;               /* 'A' or 'B' */
    uint64_t samples;
    int ndims;
    uint64_t dims[SC_MAX_DIMS];/* shape of one /images sample */
    const char *dtype;         /* element type of /images */
    uint64_t labels;           /* classes in /labels (int64) */
    uint64_t shard_size;       /* layout B: samples per file */
    uint64_t seed;
} sc_synth_params;

#define SC_SYNTH_PARAMS_INIT                                                 \
    {NULL, 'A', 0, 3, {3, 64, 64, 0, 0, 0, 0, 0}, "uint8", 10, 1024, 0}

SC_API int sc_dataset_make(const sc_synth_params *p, sc_progress_fn progress,
                           void *arg, sc_error *err);

/* ------------------------------------------------------------------------ */
/* The node-local shard cache                                               */
/* ------------------------------------------------------------------------ */

typedef struct sc_cache sc_cache;

typedef struct sc_cache_stats {
    uint64_t hits;              /* shard reads served from the cache */
    uint64_t misses;            /* shard reads that went to the source */
    uint64_t bytes_from_source;
    uint64_t bytes_from_cache;
    uint64_t evictions;
    uint64_t repairs;           /* entries dropped: crashed, truncated, corrupt */
    uint64_t entries;           /* entries held now */
    uint64_t bytes_cached;      /* their bytes */
    uint64_t neighbor_hits;     /* of hits: read from another local rank's cache */
    uint64_t bytes_checked;     /* read from the cache and checked against its checksum */
} sc_cache_stats;

/*
 * Opens this rank's cache for the dataset: one directory per (dataset
 * fingerprint, node-local rank) under cfg->cache_dir, else $SLURM_TMPDIR,
 * $TMPDIR, /tmp, so a re-run on the same nodes starts warm.  Collective
 * over comm (it finds node-local ranks).
 */
SC_API int sc_cache_open(sc_dataset *ds, MPI_Comm comm, const sc_config *cfg,
                         sc_cache **out, sc_error *err);

/*
 * The order in which this rank will read shards from now on (its lists for
 * the coming epochs): Belady eviction looks ahead in it.  Replaces any
 * earlier sequence.
 */
SC_API int sc_cache_plan_ahead(sc_cache *c, const uint32_t *shards, uint64_t n);

/* Reads a whole shard into per-field buffers, from the cache or the source. */
SC_API int sc_cache_read(sc_cache *c, uint64_t shard, void *const *bufs,
                         sc_error *err);

SC_API int sc_cache_get_stats(const sc_cache *c, sc_cache_stats *out);
SC_API const char *sc_cache_dir(const sc_cache *c);
SC_API int sc_cache_close(sc_cache *c);

/* ------------------------------------------------------------------------ */
/* Exactly-once verification                                                */
/* ------------------------------------------------------------------------ */

/*
 * The verdict on one epoch, across the whole job.  In the default mode it
 * comes from an order-independent sketch (count, sum of strong 64-bit hashes
 * of (epoch, sample) and of their squares), one small reduction per epoch;
 * with SC_VERIFY=full a per-sample count vector names every offender.
 */
typedef struct sc_exactly_once {
    uint64_t epoch;
    int verified;          /* 0 while the reduction is still in flight */
    int ok;                /* every sample delivered (or dropped by policy) once */
    int full;              /* 1: counted per sample (SC_VERIFY=full) */
    uint64_t samples;      /* samples in the dataset */
    uint64_t delivered;    /* deliveries, repeats for padding excluded */
    uint64_t dropped;      /* dropped by the remainder policy */
    uint64_t padded;       /* repeats delivered for padding (flagged) */
    uint64_t duplicated;   /* extra deliveries (sketch: a lower bound) */
    uint64_t skipped;      /* samples never delivered (sketch: a lower bound) */
    char detail[256];      /* what went wrong, with sample ids in full mode */
} sc_exactly_once;

/*
 * The audit trail (SC_AUDIT_DIR): per rank, audit-r<rank>.bin holds a
 * header of three native uint64 (SC_AUDIT_MAGIC, rank, world size), then
 * one (epoch, sample id | flags) pair per sample delivered, or dropped by
 * the remainder policy.  `shardcache verify` reads it.
 */
#define SC_AUDIT_MAGIC UINT64_C(0x3154494455414353) /* "SCAUDIT1" */
#define SC_AUDIT_PADDED (UINT64_C(1) << 63)         /* a padding repeat */
#define SC_AUDIT_DROPPED (UINT64_C(1) << 62)        /* left out by the remainder policy */
#define SC_AUDIT_FLAGS (SC_AUDIT_PADDED | SC_AUDIT_DROPPED)

/*
 * The stages a trace records (SC_TRACE, docs/tracing.md), in the order
 * `shardcache trace summary` prints them: X(id, name), the name being the
 * event's name in the trace file.  Append only.
 */
#define SC_TRACE_STAGE_LIST(X)                                                \
    X(PLAN_WAIT, "plan wait")                                                 \
    X(PLAN_COMPUTE, "plan compute")                                           \
    X(SOURCE_READ, "source read")                                             \
    X(CACHE_READ, "cache read")                                               \
    X(CACHE_WRITE, "cache write")                                             \
    X(CHECKSUM, "checksum")                                                   \
    X(ASSEMBLY, "shuffle/assembly")                                           \
    X(RING_WAIT, "pinned-buffer wait")                                        \
    X(H2D, "host-to-device copy")                                             \
    X(CONSUMER_WAIT, "consumer wait")                                         \
    X(COMPUTE, "consumer compute")                                            \
    X(VERIFY, "epoch verification")

/* ------------------------------------------------------------------------ */
/* The loader: what a training loop calls                                   */
/* ------------------------------------------------------------------------ */

/*
 * One loader per training process.  Collective calls (open, close) must be
 * made by every rank of the communicator; the rest are local and never wait
 * for another rank, except that a rank cannot begin epoch e before rank 0
 * has broadcast its plan (rank 0 sends epoch e+1's plan when it begins
 * epoch e) and cannot run more than SC__LEDGER_SLOTS epochs ahead of the
 * slowest rank's verification.  Every MPI call the loader makes is made
 * from the thread that calls it; its producer threads never call MPI, so
 * MPI_THREAD_FUNNELED is enough.
 *
 *   sc_config cfg;  sc_loader *ld;  sc_batch b;
 *   sc_config_init(&cfg, NULL);                  // SC_* environment
 *   sc_loader_open(MPI_COMM_WORLD, &cfg, &ld);
 *   for (uint64_t e = 0; e < epochs; e++) {
 *       sc_epoch_begin(ld, e, NULL);
 *       while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
 *           train_step(b.data[0], b.data[1], b.size);   // on b.device
 *           sc_batch_release(ld, &b);
 *       }
 *       if (rc != SC_END_OF_EPOCH) fail(sc_last_error(ld));
 *   }
 *   sc_loader_close(ld);
 */
typedef struct sc_loader sc_loader;

typedef struct sc_epoch_info {
    uint64_t epoch;
    uint64_t batches;          /* batches this epoch: the same on every rank */
    uint64_t batch_size;
    uint64_t shards;           /* shards this rank owns this epoch */
    uint64_t samples;          /* samples in them */
    uint64_t plan_hash;        /* equal on every rank */
    double plan_wait_s;        /* time this call waited for the plan to arrive */
} sc_epoch_info;

typedef struct sc_batch {
    uint64_t epoch;
    uint64_t index;            /* 0 .. batches-1 within the epoch */
    uint64_t size;             /* samples in the batch (the batch size) */
    uint64_t padded;           /* the last `padded` samples repeat (SC_REMAINDER=pad) */
    const uint64_t *ids;       /* global sample ids, [size] */
    int nfields;
    void *data[SC_MAX_FIELDS]; /* per field, contiguous: size * sample_bytes */
    uint64_t bytes[SC_MAX_FIELDS];
    int device;                /* -1: host memory; else the CUDA device of data[] */
    void *ready;               /* cudaEvent_t to wait on before reading data[], or NULL */
    uint64_t seq;              /* the loader's own sequence number: do not change */
} sc_batch;

typedef struct sc_epoch_summary {
    sc_exactly_once exactly_once; /* verified = 0 while the job's check is in flight */
    uint64_t epoch;
    uint64_t batches;          /* delivered to this rank's consumer */
    uint64_t samples;
    uint64_t cache_hits;       /* this epoch, this rank */
    uint64_t cache_misses;
    uint64_t bytes_from_source;
    uint64_t bytes_from_cache;
    double wait_s;             /* consumer time blocked inside sc_next_batch */
    double wall_s;             /* sc_epoch_begin to the end-of-epoch return */
} sc_epoch_summary;

/*
 * Opens the dataset (cfg->source), this rank's cache and the ownership
 * ledger, starts the producer threads and the broadcast of the first
 * epoch's plan.  Collective.  On failure *out is NULL and the message is in
 * `err` (and the same status on every rank when the cause is shared).
 */
SC_API int sc_loader_open_err(MPI_Comm comm, const sc_config *cfg, sc_loader **out,
                              sc_error *err);
/* The same; on failure the message goes to stderr, prefixed by the rank. */
SC_API int sc_loader_open(MPI_Comm comm, const sc_config *cfg, sc_loader **out);

/*
 * Starts `epoch` on this rank: epochs are begun in order, the first one
 * begun may be any.  Waits only for the plan's broadcast, which rank 0
 * posts one epoch ahead.  `info` may be NULL.
 */
SC_API int sc_epoch_begin(sc_loader *ld, uint64_t epoch, sc_epoch_info *info);

/*
 * The next batch of the current epoch, SC_END_OF_EPOCH after its last one,
 * or an error (a source read, a checksum, an ownership check) that stops
 * the loader: every later call returns it too.  At most SC_PREFETCH_BATCHES
 * batches may be held at once.
 */
SC_API int sc_next_batch(sc_loader *ld, sc_batch *batch);

/* Gives a batch's buffers back; with CUDA, once the kernels reading it are done. */
SC_API int sc_batch_release(sc_loader *ld, sc_batch *batch);

/*
 * What happened in `epoch` on this rank, and the job's exactly-once verdict
 * if its reduction has completed (exactly_once.verified); never waits.
 * sc_epoch_wait() waits for the verdict.
 */
SC_API int sc_epoch_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep);
SC_API int sc_epoch_wait(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep);

/*
 * Checkpoint and resume.
 *
 * sc_loader_checkpoint writes this rank's position into buf (at most
 * SC_CHECKPOINT_BYTES): a small, versioned, self-checking record of the
 * epoch, the batches taken in it, and every input the rank's schedule
 * depends on (seed, mode, exchange, remainder, batch size, shuffle window,
 * dataset fingerprint, world size).  Take it between batches, on every
 * rank, and save all of them with the model: every batch handed out so far
 * counts as consumed.  Local; never waits.
 *
 * sc_loader_resume, right after sc_loader_open and before any epoch, takes
 * the records of all ranks of the checkpointed job (rank 0's copies count;
 * other ranks may pass none) and sets the loader to continue the
 * interrupted epoch, returned in *epoch: begin it next.  On the same number
 * of ranks every rank continues at exactly its next batch; on another, the
 * samples not yet consumed are dealt out again across the new ranks, each
 * exactly once, with equal batch counts; later epochs are planned for the
 * new size (sticky mode starts a new chain).  The epoch's verdict covers
 * both runs.  Records of different epochs, jobs or datasets, or taken with
 * other settings, are refused naming the difference.  Collective.
 * (A checkpoint inside an epoch resumed on another number of ranks is
 * refused with SC_ENOTSUP; take it once that epoch has ended.)
 */
#define SC_CHECKPOINT_BYTES 128
SC_API int sc_loader_checkpoint(sc_loader *ld, void *buf, size_t cap, size_t *len);
SC_API int sc_loader_resume(sc_loader *ld, const void *const *blobs, const size_t *lens,
                            int nblobs, uint64_t *epoch);

/* The dataset the loader reads: its fields, with sc_dataset_field(). */
SC_API const sc_dataset *sc_loader_dataset(const sc_loader *ld);

/* The message of the last failed call on this loader ("" if none). */
SC_API const char *sc_last_error(const sc_loader *ld);

/*
 * Stops the producers, finishes every broadcast and reduction still in
 * flight (an unfinished epoch counts as failed), closes everything.
 * Collective; safe mid-epoch and after errors.  Returns the first error.
 */
SC_API int sc_loader_close(sc_loader *ld);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_H */
