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

#include <mpi.h>
#include <string.h>

#include "dtype.h"
#include "shardcache.h"

/* Saved in layout B's manifest as it lies in memory: a change to it, or to
 * sc__dtype's values, bumps SOURCE_MANIFEST_VERSION (source.c). */
typedef struct sc__field {
    char name[256];
    sc__dtype dtype;
    int ndims; /* of one sample */
    uint64_t dims[SC_MAX_DIMS];
    uint64_t sample_bytes;
    int no_axis; /* stored without a sample axis: a file is one sample (SC_SAMPLE_AXIS=none) */
    int vlen;    /* a variable-length sequence of dtype a sample (ndims 0; sample_bytes:
                    the largest sample's bytes); a shard's is a blob (vlen.h) */
} sc__field;

/*
 * A file's stamp: size, modification time (ns), inode and change time
 * (ns), from one stat.  The last two are what a rewrite cannot keep:
 * `cp -p` and `touch -r` set the size and mtime but move the change time,
 * `rsync -a` renames a new inode over the old.  chmod, chown and a new
 * hard link move the change time too: a stamp that changed without the
 * bytes costs a cold cache and a rescan, never wrong data.  No device
 * number: a network filesystem's differs between nodes, and every rank
 * must agree on the stamp (inode numbers and change times are the
 * server's on NFS, Lustre and GPFS).
 */
#define SC__STAMP_WORDS 4

struct sc_dataset {
    char layout; /* 'A' or 'B' */
    char path[SC_PATH_MAX];
    char **files; /* layout B: in order; a shard is a run of them */
    uint64_t nfiles;
    uint64_t *file_sizes; /* layout B: [nfiles] samples in each */
    uint64_t *file_stamp; /* layout B: [nfiles * SC__STAMP_WORDS] each file's at this open */
    uint64_t *file_off;   /* layout B: [nfiles * nfields] each field's bytes in its file
                             as delivered, read without HDF5; UINT64_MAX: through HDF5 */
    uint64_t *file_first; /* layout B: [nshards + 1] each shard's first file */
    sc__field fields[SC_MAX_FIELDS];
    int nfields;
    uint64_t nsamples, nshards, shard_size, sample_bytes;
    uint64_t chunk_unit; /* SC_SHARD_SIZE=auto: the chunk rows shard_size is a multiple of, or 0 */
    uint64_t *shard_sizes; /* [nshards] */
    uint64_t *shard_first; /* [nshards + 1] */
    uint64_t fingerprint;
    /*
     * A variable-length source field i's offsets: [nsamples + 1], sample
     * k's bytes at [k, k + 1) of the dataset's values (learned at open:
     * vlen.h); NULL for every other field.  Indexed as the source's fields.
     */
    uint64_t *vlen_off[SC_MAX_FIELDS];
    /*
     * With a shard transform, fields[] are its outputs (what is cached and
     * delivered) and src[] the source's own fields, read and then handed
     * to it.  Without, src[] is unused.
     */
    const sc_transform *tf;
    sc__field src[SC_MAX_FIELDS];
    int nsrc;
    /* SC_DECODE (decode.h): per source field, SC__DECODE_*; the output's side;
       and for decode-once fields the transform that decodes them, with its version. */
    unsigned char decode[SC_MAX_FIELDS];
    uint32_t decode_size;
    sc_transform decode_tf;
    char decode_version[64];
    /* SC_AUGMENT (augment.h): the stages delivered field aug_field goes through; NULL: none. */
    struct sc__aug *aug;
    int aug_field;
    int64_t file; /* layout A's hid_t (HDF5 stays inside storage/) */
    int64_t dset[SC_MAX_FIELDS];
    MPI_Comm comm; /* layout A's file is opened with MPI-IO over it */
    int rank, world, is_dir;
    int from_manifest; /* layout B: the scan was the directory's saved one (manifest.c) */
    uint64_t manifest_key; /* the scanning rank's: its files when scanned */
    char asked[1024];      /* ...and the SC_FIELDS it scanned them for */
    double slow_bps; /* testing builds: SC_TEST_SOURCE_MBPS in bytes/s (0: as fast as it is) */
};

/*
 * Opening, in the steps that mpi/node.c's sc_dataset_open runs on every
 * rank: new (checks the settings, finds the source), scan (the layout,
 * fields and shards: every rank for layout A; for layout B on several
 * ranks, rank 0 alone), the manifest that rank 0 then sends the others,
 * and finish (shard offsets, the transform's fields).  No step sends a
 * message of its own (layout A's file may be opened collectively through
 * MPI-IO); sc_dataset_close frees what any step made.
 */
int sc__dataset_new(MPI_Comm comm, const sc_config *cfg, sc_dataset **out, sc_error *err);
int sc__dataset_scan(sc_dataset *ds, const sc_config *cfg, sc_error *err);
/* After the scan: layout B on several ranks, whose rank 0 sends a manifest. */
int sc__dataset_shared(const sc_dataset *ds);
/* Rank 0's status `rc` (with its message) and, when SC_OK, what it scanned. */
int sc__dataset_manifest(const sc_dataset *ds, int rc, const char *msg, void **buf,
                         size_t *len);
/* The manifest on another rank: rank 0's error, or its scan. */
int sc__dataset_take_manifest(sc_dataset *ds, const void *buf, size_t len, sc_error *err);
int sc__dataset_finish(sc_dataset *ds, const sc_config *cfg, sc_error *err);

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

/* A field as the public API describes it. */
void sc__field_info(const sc__field *f, sc_field_info *out);

/*
 * A shard's variable-length field is one blob: n + 1 offsets (uint64, in
 * this machine's byte order, bytes from the start of the values), then the
 * n samples' values one after another, as Arrow's list arrays.  Offset k:
 */
static inline uint64_t sc__vlen_off(const unsigned char *blob, uint64_t k)
{
    uint64_t v;
    memcpy(&v, blob + 8 * k, sizeof v); /* a blob after another field may be unaligned */
    return v;
}

static inline const unsigned char *sc__vlen_values(const unsigned char *blob, uint64_t n)
{
    return blob + 8 * (n + 1);
}

/*
 * The first delivered field of a shard's bytes (bufs[i], as read back from
 * a cache entry or a peer) whose variable-length offsets are not the ones
 * learned at open, or -1: an entry made before the source was rewritten
 * (while a job ran: its fingerprint is its open's) must not steer copies
 * by its own offsets.
 */
int sc__vlen_disagrees(const sc_dataset *ds, uint64_t shard, const void *const *bufs);

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

#endif /* SC_SOURCE_H */
