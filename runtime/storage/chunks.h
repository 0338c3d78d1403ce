/*
 * chunks.h - reading a field's rows chunk by chunk: each stored (still
 * compressed) chunk under the HDF5 lock, decoded outside it by the calling
 * producer (codec.c), so that producers decompress in parallel where
 * H5Dread would decompress one at a time under the lock.
 */
#ifndef SC_CHUNKS_H
#define SC_CHUNKS_H

#include <hdf5.h>

#include "codec.h"
#include "error.h"
#include "field.h"

typedef struct sc__chunking {
    sc__pipeline pipe;
    uint64_t rows;      /* samples a chunk */
    unsigned filter;    /* the first filter not decoded here, or 0 */
    const char *why;    /* a filtered field left to H5Dread: why, in words; else NULL */
    unsigned missing;   /* sc__chunks_missing: a filter this HDF5 cannot load, or 0 */
} sc__chunking;

/*
 * Whether d's rows are read here: chunked, filtered, chunks of whole
 * samples stored as read, every filter one codec.c decodes.  Otherwise,
 * for a filtered field, c->why says what stops it and c->filter names the
 * first filter H5Dread must run, if that is what.  The HDF5 lock is held.
 */
int sc__chunks_direct(hid_t d, const sc__field *f, sc__chunking *c);

/*
 * The first of d's filters this HDF5 cannot load (it looks for a plugin:
 * slow, so at open and after a failed read only), into c->missing.  The
 * HDF5 lock is held.
 */
void sc__chunks_missing(hid_t d, sc__chunking *c);

/* sc__chunks_read: a chunk was never written (its rows are the fill value). */
#define SC__CHUNK_UNSTORED 1

/*
 * Rows [first, first + count) of d into buf, each chunk read once under
 * the lock and decoded outside it.  Called without the lock.  Returns
 * SC__CHUNK_UNSTORED when a chunk is not stored: HDF5 reads those.
 */
int sc__chunks_read(hid_t d, const sc__field *f, const sc__chunking *c, uint64_t first,
                    uint64_t count, void *buf, const char *path, uint64_t shard,
                    sc_error *err);

#endif /* SC_CHUNKS_H */
