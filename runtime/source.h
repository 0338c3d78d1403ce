/*
 * source.h - reading the source dataset.
 *
 * This module owns the dataset's description (layout, fields, shards, the
 * fingerprint that keys plans and caches) and the reads of whole shards
 * from shared storage: one hyperslab per field for layout A (through the
 * MPI-IO driver when more than one rank shares the file), one file per
 * shard for layout B.  It must never cache, retry or guess: a file that is
 * missing, foreign, truncated or inconsistent is an error naming the file
 * and the field, and the caller decides what to do.
 */
#ifndef SC_SOURCE_H
#define SC_SOURCE_H

#include <hdf5.h>

#include "h5.h"
#include "shardcache.h"

typedef struct sc__field {
    char name[256];
    sc__dtype dtype;
    int ndims; /* of one sample */
    uint64_t dims[SC_MAX_DIMS];
    uint64_t sample_bytes;
} sc__field;

struct sc_dataset {
    char layout; /* 'A' or 'B' */
    char path[SC_PATH_MAX];
    char **files; /* layout B: one per shard */
    uint64_t nfiles;
    sc__field fields[SC_MAX_FIELDS];
    int nfields;
    uint64_t nsamples, nshards, shard_size, sample_bytes;
    uint64_t *shard_sizes; /* [nshards] */
    uint64_t *shard_first; /* [nshards + 1] */
    uint64_t fingerprint;
    /*
     * With a shard transform, fields[] are its outputs (what is cached and
     * delivered) and src[] the source's own fields, read and then handed
     * to it.  Without, src[] is unused.
     */
    const sc_transform *tf;
    sc__field src[SC_MAX_FIELDS];
    int nsrc;
    hid_t file; /* layout A */
    hid_t dset[SC_MAX_FIELDS];
    MPI_Comm comm;
    int rank;
};

/* Bytes of one shard, all fields. */
static inline uint64_t sc__shard_bytes(const sc_dataset *ds, uint64_t shard)
{
    return ds->shard_sizes[shard] * ds->sample_bytes;
}

#endif /* SC_SOURCE_H */
