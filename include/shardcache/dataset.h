/*
 * shardcache/dataset.h - source datasets: opening an HDF5 source, its
 * fields and shards, and reading a shard straight from it.  For tools; a training
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
 * run of consecutive files of at most shard_size samples together, or a
 * piece of shard_size samples of a file of more.  Field names, types and shapes come from the
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
                                  files of at most this many samples into a shard and
                                  cuts a file of more into pieces of this many; where
                                  auto never groups files (docs/api.md), the largest
                                  shard's samples */
    uint64_t sample_bytes;     /* all fields (a variable-length one's mean and offset) */
    int nfields;
    uint64_t fingerprint;      /* paths, sizes, mtimes, inodes, change times, fields,
                                  shard size */
    /* appended (room taken from reserved[]) */
    uint64_t from_manifest;    /* layout B: 1 when the open took the files' fields and
                                  sample counts from the directory's saved manifest
                                  (`shardcache stage` saves it) instead of opening each */
    uint64_t nfiles;           /* the source's files (layout A: 1) */
    uint64_t samples_fingerprint; /* what a sample id means: the files, their stamps and
                                     sample counts, whatever SC_SHARD_SIZE, SC_FIELDS or
                                     SC_DECODE say (a skip list's `# fingerprint`) */
    uint64_t reserved[5];      /* room for later fields: the size stays */
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
/* Collective over the communicator it was opened on. */
SC_API int sc_dataset_close(sc_dataset *ds);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_DATASET_H */
