/*
 * vlen.h - variable-length fields (h5py's vlen_dtype: encoded images,
 * token sequences), the way Arrow carries list arrays.
 *
 * A shard's variable-length field is one blob (sc__vlen_off, below).
 * The cache stores that blob as it stores any field's bytes, checksummed
 * with them; peers send it whole.  Every sample's length is learned at
 * open (sc__vlen_lengths), so that every shard's bytes are known before it is read, as they are for
 * fixed-shape fields: cache admission, the stream's memory bound and peer
 * transfers size their buffers from them.  HDF5 ids are int64_t (what
 * hid_t is), so that the stream includes this for the blob's accessors
 * without <hdf5.h>.
 */
#ifndef SC_VLEN_H
#define SC_VLEN_H

#include <stdint.h>
#include <string.h>

#include "error.h"
#include "field.h"

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

/* The whole blob of n samples: its offsets, then its values. */
static inline uint64_t sc__vlen_blob_bytes(const unsigned char *blob, uint64_t n)
{
    return 8 * (n + 1) + sc__vlen_off(blob, n);
}

/*
 * Each sample's bytes of variable-length field d (described in f: n
 * samples, or one without a sample axis) into len[n].  Contiguous storage is read without touching the values
 * (one pread of the stored sequence headers: a 4-byte count and a heap
 * address each); any other is read whole through HDF5, block by block.
 * The caller holds the HDF5 lock.
 */
int sc__vlen_lengths(int64_t d, const char *path, const sc__field *f, uint64_t n, uint64_t *len,
                     sc_error *err);

/*
 * Rows [first, first + count) of variable-length field d, into the blob of
 * a shard of n samples as its rows [row, row + count): `off` is the
 * dataset's offsets from the shard's first sample (off[0] is that
 * sample's, whose global id is id0), as learned at open; a sample whose
 * length differs from them is an error naming it (the file changed).
 * Called without the HDF5 lock.
 */
int sc__vlen_read(int64_t d, const sc__field *f, uint64_t first, uint64_t count,
                  const uint64_t *off, uint64_t n, uint64_t row, void *blob, const char *path,
                  uint64_t shard, uint64_t id0, sc_error *err);

#endif /* SC_VLEN_H */
