/*
 * shardcache/config.h - every setting of a job (sc_config), its SC_*
 * environment variable, default and meaning.  No MPI: the settings table
 * is part of the library's lowest layer.  <shardcache.h> includes this.
 */
#ifndef SHARDCACHE_CONFIG_H
#define SHARDCACHE_CONFIG_H

#include <stdio.h>

#include "shardcache/base.h"
#include "shardcache/plan.h" /* sc_shuffle_mode, sc_remainder */

#ifdef __cplusplus
extern "C" {
#endif

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

typedef enum sc_cache_share {
    SC_CACHE_PRIVATE = 0, /* the cache is the user's alone: 0700, owned by them */
    SC_CACHE_GROUP = 1    /* a group's node-local scratch: group members may own it */
} sc_cache_share;

typedef enum sc_cache_writes {
    SC_CACHE_WRITES_BEHIND = 0, /* written beside the reads; when the writer is behind, skipped */
    SC_CACHE_WRITES_ALL = 1     /* every entry the cache admits, the reads waiting if need be */
} sc_cache_writes;

typedef enum sc_peers_mode {
    SC_PEERS_ON = 0, /* a shard moving to another node comes from its old owner's cache */
    SC_PEERS_OFF = 1 /* every shard a node does not hold is read from the source */
} sc_peers_mode;

typedef enum sc_sample_axis {
    SC_SAMPLE_AXIS_FIRST = 0, /* a dataset's first dimension counts its samples */
    SC_SAMPLE_AXIS_NONE = 1   /* layout B: a file is one sample, its datasets that sample's */
} sc_sample_axis;

typedef enum sc_device_mode {
    SC_DEVICE_AUTO = 0, /* the GPU when the build has CUDA and every rank sees one:
                         * the loop must read batch.device (-1: host) to know which */
    SC_DEVICE_HOST = 1, /* the default: batches in host memory, which a CPU
                         * training loop reads; no CUDA call is made */
    SC_DEVICE_CUDA = 2, /* the GPU, or an SC_ECUDA error at open */
    SC_DEVICE_SIM = 3   /* testing builds only: a simulated GPU (docs/testing.md) */
} sc_device_mode;

typedef enum sc_launcher_check_mode {
    SC_LAUNCHER_CHECK_ON = 0, /* refuse a launcher that started more processes than MPI sees */
    SC_LAUNCHER_CHECK_OFF = 1 /* skip that check (sc_launcher_check says when it is wrong) */
} sc_launcher_check_mode;

typedef enum sc_verify_mode {
    SC_VERIFY_SKETCH = 0, /* one 10-word reduction per epoch */
    SC_VERIFY_FULL = 1    /* a per-sample count vector: names every offender */
} sc_verify_mode;

typedef struct sc_transform sc_transform; /* in shardcache.h */

/*
 * Everything a job can set, each with an SC_* environment variable.  One
 * table in runtime/base/config.c makes the defaults, the environment parsing and
 * the printout (`SC_DUMP_CONFIG=1` prints it to stderr at init).
 */
/*
 * SC_SHUFFLE_WINDOW=auto: as many samples as half of SC_STREAM_BYTES holds
 * in whole shards, and at least a batch.  (SC_WINDOW_AUTO_MIN, the fixed
 * 4096 before auto, was its floor until samples of megabytes showed that
 * floor holding many times SC_STREAM_BYTES; it is no longer used.)
 */
#define SC_WINDOW_AUTO UINT64_MAX
/*
 * SC_CACHE_BYTES=auto, the default: each rank's cache may hold what it
 * holds plus its share of the cache filesystem's free space above a
 * reserve of SC_CACHE_RESERVE_PCT of its size, and old caches of other
 * datasets are evicted, least recently used first, to make room.
 */
#define SC_CACHE_AUTO UINT64_MAX
#define SC_CACHE_RESERVE_PCT 10
#define SC_WINDOW_AUTO_MIN 4096
/*
 * SC_PREFETCH_BATCHES=auto, the default: 8 ring slots, fewer where 8 would
 * take more than SC_PREFETCH_AUTO_BYTES, 3 at least: the batch in the step,
 * the next one built meanwhile, and the one a Python loop variable still
 * holds while it takes the next (with 2 the Python package copies every
 * batch, docs/python.md).  Never fewer than cfg.prefetch_least, nor than the
 * producers where they decode (each builds one batch at a time into a free
 * slot).  A fixed 8 held 8 GB a rank for 3D volumes' 1 GB batches.
 * sc_loader_config says what it chose.
 */
#define SC_PREFETCH_AUTO UINT64_MAX
#define SC_PREFETCH_AUTO_MIN 3
#define SC_PREFETCH_AUTO_MAX 8
#define SC_PREFETCH_AUTO_BYTES (UINT64_C(1) << 30)

/*
 * SC_SHARD_SIZE=auto (the default): the shard size from the dataset alone,
 * sc_shard_size_auto() of its sample count and a sample's bytes, rounded
 * to whole chunks of a file's compressed fields (docs/api.md), resolved
 * when the dataset opens (sc_dataset_info.shard_size says what it chose).
 */
#define SC_SHARD_AUTO UINT64_MAX
#define SC_SHARD_AUTO_SHARDS 256                   /* at least this many shards */
#define SC_SHARD_AUTO_SAMPLES 1024                 /* the size within the byte bounds */
#define SC_SHARD_AUTO_MIN_BYTES (UINT64_C(1) << 20) /* 1 MiB */
#define SC_SHARD_AUTO_MAX_BYTES (UINT64_C(64) << 20) /* 64 MiB */

/*
 * A sample that does not decode (SC_BAD_SAMPLE): stop the loader naming it
 * (error), or leave it out of its batch and deliver another sample of its
 * shard in its place (skip), counted in the verdict as skipped with the reason.
 */
typedef enum sc_bad_sample_policy {
    SC_BAD_SAMPLE_ERROR = 0,
    SC_BAD_SAMPLE_SKIP = 1
} sc_bad_sample_policy;

typedef struct sc_config {
    char source[SC_PATH_MAX];     /* SC_SOURCE: HDF5 file, directory or list */
    uint64_t shard_size;          /* SC_SHARD_SIZE: samples per shard (layout B: files
                                     grouped up to this many); SC_SHARD_AUTO: the rule's */
    char fields[1024];            /* SC_FIELDS: comma list; empty = every field */
    uint64_t seed;                /* SC_SEED */
    uint64_t batch_size;          /* SC_BATCH_SIZE */
    sc_shuffle_mode mode;         /* SC_SHUFFLE: global | sticky */
    double exchange;              /* SC_EXCHANGE: sticky fraction moved */
    sc_remainder remainder;       /* SC_REMAINDER: drop | pad */
    char cache_dir[SC_PATH_MAX];  /* SC_CACHE_DIR; empty: the default root (config.c) */
    uint64_t cache_bytes;         /* SC_CACHE_BYTES: capacity per rank; 0 = unbounded;
                                     SC_CACHE_AUTO: the free space's rule (docs/cache.md) */
    sc_cache_policy cache_policy; /* SC_CACHE_POLICY: belady | lru */
    sc_cache_check cache_check;   /* SC_CACHE_CHECK: first | always */
    int log_level;                /* SC_LOG: 0 errors only, 1 warnings, 2 info */
    /* appended for the loader (sc_loader_*) */
    int producers;                /* SC_PRODUCERS: producer threads; 0 = auto */
    uint64_t prefetch_batches;    /* SC_PREFETCH_BATCHES: depth of the batch ring;
                                     SC_PREFETCH_AUTO: by the batch's bytes */
    uint64_t shuffle_window;      /* SC_SHUFFLE_WINDOW: samples shuffled together; 0, 1: none;
                                     SC_WINDOW_AUTO: half of stream_bytes' worth */
    uint64_t stream_bytes;        /* SC_STREAM_BYTES: shard bytes held in memory */
    sc_device_mode device;        /* SC_DEVICE: host (default) | cuda | auto */
    sc_verify_mode verify;        /* SC_VERIFY: sketch | full */
    char audit_dir[SC_PATH_MAX];  /* SC_AUDIT_DIR: per-rank consumed ids; empty = off */
    /* appended for tracing */
    char trace[SC_PATH_MAX];      /* SC_TRACE: path prefix of PREFIX.rankR.json; empty = off */
    uint64_t trace_events;        /* SC_TRACE_EVENTS: ring size per thread */
    /* appended for transforms (no environment variable: code, not a setting) */
    const sc_transform *transform; /* NULL: the source's fields as they are */
    /* appended for shared caches (room taken from reserved[]) */
    sc_cache_share cache_share;   /* SC_CACHE_SHARE: private | group */
    /* appended for transfers between nodes (room taken from reserved[]) */
    sc_peers_mode peers;          /* SC_PEERS: on | off, the same on every rank */
    uint64_t peer_bytes;          /* SC_PEER_BYTES: transfers received at once (at least one) */
    /* appended for one-sample files (room taken from reserved[]) */
    sc_sample_axis sample_axis;   /* SC_SAMPLE_AXIS: first | none */
    /* appended for encoded samples (room taken from reserved[]) */
    char decode[256];             /* SC_DECODE: [FIELD=]jpeg|jpeg-once, comma-separated */
    uint64_t decode_size;         /* SC_DECODE_SIZE: the decoded images' side, in pixels */
    /* appended for launchers (room taken from reserved[]) */
    sc_launcher_check_mode launcher_check; /* SC_LAUNCHER_CHECK: on | off */
    /* appended for built-in augmentations (room taken from reserved[]) */
    char augment[160];            /* SC_AUGMENT: [FIELD=]STAGE;STAGE;... (docs/api.md) */
    int augment_layout;           /* SC_AUGMENT_LAYOUT: 0 chw | 1 hwc, the stored images' */
    /* appended for world-size-free plans (room taken from reserved[]) */
    uint64_t partitions;          /* SC_PARTITIONS: 0, or P canonical partitions */
    /* appended for bad samples (room taken from reserved[]) */
    sc_bad_sample_policy bad_sample; /* SC_BAD_SAMPLE: error | skip (docs/reliability.md) */
    const char *skip_list;        /* SC_SKIP_LIST: a skip list's path, or NULL; the text
                                     is the library's, kept for the process's life */
    /* appended for decoded images (room taken from reserved[]) */
    int decode_channels;          /* SC_DECODE_CHANNELS: 3 (RGB) or 1 (PIL's "L") planes */
    int decode_exif;              /* SC_DECODE_EXIF: 1 turns images upright by EXIF first */
    /* appended for cache writes off the read path (room taken from reserved[]) */
    sc_cache_writes cache_writes; /* SC_CACHE_WRITES: behind | all (docs/cache.md) */
    int epochs;                   /* SC_EPOCHS (in reserved_int's room): the job's epochs, 0
                                     not said; nothing is read ahead for epoch SC_EPOCHS
                                     while the one before it runs (docs/api.md) */
    /* appended for the ring's auto depth (room taken from reserved[]; code, not a setting) */
    uint64_t prefetch_least;      /* SC_PREFETCH_BATCHES=auto gives at least this many slots:
                                     what the caller holds beside its loop's batches (the
                                     Python package's batch_transform_ahead + 4); 0: none */
    /* room for later settings: sizeof(sc_config) stays within a major version */
    uint64_t reserved[1];
} sc_config;

/*
 * Defaults, then the SC_* environment.  A variable that does not parse is
 * an SC_EINVAL naming it and its value, never silently ignored; so is an
 * SC_ name one edit from a setting's (SC_BATCHSIZE: "did you mean
 * SC_BATCH_SIZE?").
 */
SC_API int sc_config_init(sc_config *cfg, sc_error *err);

/* Sets one setting by its variable name ("SC_SEED") from text. */
SC_API int sc_config_set(sc_config *cfg, const char *name, const char *value,
                         sc_error *err);

/* Writes every setting, one "NAME=value  # meaning" line each, to a stream. */
SC_API int sc_config_print(const sc_config *cfg, FILE *file);

/*
 * The samples a shard holds under SC_SHARD_SIZE=auto, for a dataset of
 * nsamples samples of sample_bytes each (a variable-length field's mean):
 * SC_SHARD_AUTO_SAMPLES, raised to what SC_SHARD_AUTO_MIN_BYTES holds and
 * lowered to what SC_SHARD_AUTO_MAX_BYTES holds (a sample larger than that
 * is a shard alone), then at most nsamples / SC_SHARD_AUTO_SHARDS: a dataset
 * of n samples has at least min(n, 256) shards.  At least 1.  A pure
 * function of the dataset, never of the world size: every rank, and every
 * later job on another number of ranks, cuts the same shards, so caches,
 * fingerprints and checkpoints carry across.  A dataset's open then rounds
 * it to whole chunks of a file's compressed fields (docs/api.md), which
 * this function, knowing no file, does not.
 */
SC_API uint64_t sc_shard_size_auto(uint64_t nsamples, uint64_t sample_bytes);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_CONFIG_H */
