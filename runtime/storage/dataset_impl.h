/*
 * dataset_impl.h - what an open source is (struct sc_dataset): its layout,
 * fields, files and shards, as the opening steps (source.c, fields.c,
 * scan.c) fill it in and the readers above it (read.c, the cache, the
 * stream, peers) read it.  The description alone, with the byte counts
 * everyone sizes buffers by: no function of the files that fill it in, so
 * that each of them includes it without including another.
 */
#ifndef SC_DATASET_IMPL_H
#define SC_DATASET_IMPL_H

#include <mpi.h>

#include "field.h"
#include "fingerprint.h"
#include "skiplist.h"
#include "shardcache.h"

struct sc_dataset {
    char layout; /* 'A' or 'B' */
    char path[SC_PATH_MAX];
    char **files; /* layout B: in order; a shard is a run of them */
    uint64_t nfiles;
    uint64_t *file_sizes; /* layout B: [nfiles] samples in each */
    uint64_t *file_stamp; /* layout B: [nfiles * SC__STAMP_WORDS] each file's at this open */
    uint64_t *file_off;   /* layout B: [nfiles * nfields] each field's bytes in its file
                             as delivered, read without HDF5; UINT64_MAX: through HDF5 */
    uint64_t *file_first; /* layout B: [nshards] each shard's first file */
    uint64_t *file_row;   /* layout B: [nshards] the row of its first file where it
                             starts (not 0 only in a file cut into several shards); a
                             shard's samples run on from there over the files in order */
    sc__field fields[SC_MAX_FIELDS];
    int nfields;
    uint64_t nsamples, nshards, shard_size, sample_bytes;
    int mpio; /* layout A's file opened through MPI-IO: no descriptor, and asking HDF5 for
                 its driver (H5Fget_access_plist) duplicates the communicator, collectively */
    uint64_t chunk_unit; /* SC_SHARD_SIZE=auto: the chunk rows shard_size is a multiple of, or 0 */
    int files_alone;     /* layout B, SC_SHARD_SIZE=auto, samples of 1 MiB or more: a shard
                            never spans files (source_shard_size) */
    uint64_t *shard_sizes; /* [nshards] */
    uint64_t *shard_first; /* [nshards + 1] */
    uint64_t fingerprint;
    /*
     * A variable-length source field i's offsets: [nsamples + 1], sample
     * k's bytes at [k, k + 1) of the dataset's values (learned at open:
     * vlen.h); NULL for every other field.  Indexed as the source's fields.
     */
    uint64_t *vlen_off[SC_MAX_FIELDS];
    size_t vlen_room[SC_MAX_FIELDS]; /* while learning them, file by file: their room */
    /*
     * With a shard transform, fields[] are its outputs (what is cached and
     * delivered) and src[] the source's own fields, read and then handed
     * to it.  Without, src[] is unused.
     */
    const sc_transform *tf;
    sc__field src[SC_MAX_FIELDS];
    int nsrc;
    /* SC_DECODE (decode.h): its settings and decode-once's transform; NULL: unset. */
    struct sc__decode *decode;
    /*
     * What a sample id means, apart from the settings that do not move one
     * (shard size, fields, decoding): the layout, the files in order with
     * their stamps, the sample count.  SC_SKIP_LIST's lists are keyed by it.
     */
    uint64_t samples_fp;
    sc__skiplist skip; /* SC_SKIP_LIST's samples, read at the open (n = 0: none) */
    /* SC_AUGMENT (augment.h): the stages delivered field aug_field goes through; NULL: none. */
    struct sc__aug *aug;
    int aug_field;
    int64_t file; /* layout A's hid_t (HDF5 stays inside storage/) */
    int64_t dset[SC_MAX_FIELDS];
    uint64_t a_off[SC_MAX_FIELDS]; /* layout A: each field's bytes in the file as delivered,
                                      learned at the open; UINT64_MAX: through HDF5 */
    MPI_Comm comm; /* layout A's file is opened with MPI-IO over it */
    int rank, world, is_dir;
    int log_level; /* SC_LOG: read.c says when the filesystem refuses O_DIRECT */
    int from_manifest; /* layout B: the scan was the directory's saved one (manifest.c) */
    uint64_t manifest_key; /* the scanning rank's: its files when scanned */
    char asked[1024];      /* ...and the SC_FIELDS it scanned them for */
    double slow_bps; /* testing builds: SC_TEST_SOURCE_MBPS in bytes/s (0: as fast as it is) */
};

/*
 * Bytes of field i of one shard, f being fields[i] or src[i]: its samples,
 * or a variable-length field's blob (n + 1 offsets, then the values).
 */
static inline uint64_t sc__part_bytes(const sc_dataset *ds, const sc__field *f, int i,
                                      uint64_t shard)
{
    uint64_t n = ds->shard_sizes[shard];
    if (!f->vlen)
        return n * f->sample_bytes;
    const uint64_t *off = ds->vlen_off[i] + ds->shard_first[shard];
    return 8 * (n + 1) + off[n] - off[0];
}

/* Bytes of delivered field i of one shard. */
static inline uint64_t sc__field_bytes(const sc_dataset *ds, int i, uint64_t shard)
{
    return sc__part_bytes(ds, &ds->fields[i], i, shard);
}

/* Bytes of one shard, all fields. */
static inline uint64_t sc__shard_bytes(const sc_dataset *ds, uint64_t shard)
{
    uint64_t bytes = 0;
    for (int i = 0; i < ds->nfields; i++)
        bytes += sc__field_bytes(ds, i, shard);
    return bytes;
}

#endif /* SC_DATASET_IMPL_H */
