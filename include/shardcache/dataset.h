/*
 * shardcache/dataset.h - source datasets: opening an HDF5 source, its
 * fields and shards, reading a shard straight from it, and writing the
 * synthetic datasets of `shardcache make-dataset`.  For tools; a training
 * loop reads through the loader.
 */
#ifndef SHARDCACHE_DATASET_H
#define SHARDCACHE_DATASET_H

#include <mpi.h>

#include "shardcache/config.h"
#include "shardcache/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Source datasets                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Layout A: one HDF5 file whose root group holds fixed-shape numeric
 * datasets ("fields") sharing their first dimension N; shard k is samples
 * [k*shard_size, (k+1)*shard_size).  Layout B: a directory of .h5 files, or
 * a text file listing HDF5 paths, each with the same fields; a shard is a
 * run of consecutive files of at most shard_size samples together, or one
 * file of more (never cut).  Field names, types and shapes come from the
 * files.
 */
typedef struct sc_dataset sc_dataset;

typedef struct sc_field_info {
    char name[256];            /* the dataset's path, e.g. "/images" */
    char dtype[16];            /* "uint8", "int64", "float32", ... */
    int ndims;                 /* dimensions of one sample */
    uint64_t dims[SC_MAX_DIMS];
    uint64_t sample_bytes;     /* variable-length: the largest sample's */
    /* appended (room taken from reserved[]) */
    uint64_t vlen;             /* 1: variable-length sequences of dtype (ndims 0); a batch
                                  carries their values and offsets (sc_batch.offsets) */
    uint64_t reserved[3];      /* room for later fields: the size stays */
} sc_field_info;

typedef struct sc_dataset_info {
    char layout;               /* 'A' or 'B' */
    uint64_t nsamples;
    uint64_t nshards;
    uint64_t shard_size;       /* SC_SHARD_SIZE: A's samples per shard; B groups runs of
                                  files of at most this many samples into a shard */
    uint64_t sample_bytes;     /* all fields (a variable-length one's mean and offset) */
    int nfields;
    uint64_t fingerprint;      /* paths, sizes, mtimes, inodes, change times, fields,
                                  shard size */
    /* appended (room taken from reserved[]) */
    uint64_t from_manifest;    /* layout B: 1 when the open took the files' fields and
                                  sample counts from the directory's saved manifest
                                  (sc_dataset_save_manifest) instead of opening each */
    uint64_t nfiles;           /* the source's files (layout A: 1) */
    uint64_t reserved[6];      /* room for later fields: the size stays */
} sc_dataset_info;


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
 * Bytes of field i of one shard: shard_sizes[shard] * sample_bytes, or
 * for a variable-length field its offsets (shard_sizes[shard] + 1
 * uint64, bytes from the values' start) and then its values.
 */
SC_API int sc_dataset_shard_bytes(const sc_dataset *ds, uint64_t shard, int i,
                                  uint64_t *bytes);
/*
 * Reads one whole shard straight from the source: bufs[i] receives field
 * i, sc_dataset_shard_bytes of it.
 */
SC_API int sc_dataset_read_shard(sc_dataset *ds, uint64_t shard,
                                 void *const *bufs, sc_error *err);
/* Plan parameters for this dataset and config (shard sizes, fingerprint...). */
SC_API int sc_dataset_plan_params(const sc_dataset *ds, const sc_config *cfg,
                                  uint32_t world_size, uint64_t epoch,
                                  sc_plan_params *out);
/* Collective over the communicator it was opened on. */
SC_API int sc_dataset_close(sc_dataset *ds);

/*
 * Layout B from a directory: saves what the open learned from its files
 * (their fields and sample counts) as DIR/.shardcache-manifest, which
 * the next opens use instead of opening every file, as long as no file
 * was added, removed, moved, resized or modified since the open that
 * saves it, and they ask for the same fields (SC_FIELDS: the same words,
 * or the names of the fields it found).  Rank 0 calls it (the rank that
 * scanned the files; any other gets SC_EINVAL); `shardcache stage` and
 * `make-dataset --layout B` do.  SC_EINVAL for any other source.
 */
SC_API int sc_dataset_save_manifest(const sc_dataset *ds, sc_error *err);

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
    /* appended (room taken from reserved[]; 0 is the default) */
    uint64_t noise;            /* noise half-width in 0..255 pixel levels; 0: 64 */
    uint64_t sorted;           /* 1: samples stored by class (class-sorted); 0: random */
    uint64_t heldout;          /* 1: new samples of the same classes (same seed's
                                  prototypes, other noise): a held-out set */
    uint64_t compress;         /* SC_SYNTH_RAW (0), SC_SYNTH_GZIP or SC_SYNTH_LZF */
    uint64_t chunk;            /* rows per HDF5 chunk; 0: contiguous, or 1024 when
                                  compressed (at most the file's rows) */
    uint64_t smooth;           /* 1: smooth prototypes in 8 flat bands (posterized), which
                                  with a little noise compress as photos' pixels do;
                                  0: random pixels, which do not compress */
    uint64_t jpeg;             /* 0: /images as pixels; 1..100: each image JPEG-encoded at
                                  this quality, a variable-length uint8 sample (h5py's
                                  vlen_dtype(uint8)); needs uint8 images of 1 or 3 x H x W */
    uint64_t reserved[1];      /* room for later fields: the size stays */
} sc_synth_params;

/* make-dataset --compress: gzip is deflate level 4 after the shuffle filter
 * (what h5py users pick); lzf is h5py's own filter (32000, hdf5-plugin-lzf). */
#define SC_SYNTH_RAW 0
#define SC_SYNTH_GZIP 1
#define SC_SYNTH_LZF 2

#define SC_SYNTH_PARAMS_INIT                                                 \
    {NULL, 'A', 0, 3, {3, 64, 64, 0, 0, 0, 0, 0}, "uint8", 10, 1024, 0, 0, 0, 0, 0, 0, 0, 0, {0}}

SC_API int sc_dataset_make(const sc_synth_params *p, sc_progress_fn progress,
                           void *arg, sc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_DATASET_H */
