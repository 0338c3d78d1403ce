/*
 * codec.h - the HDF5 filters shardcache decodes itself, outside the HDF5
 * lock, so that producer threads decompress chunks in parallel: deflate
 * (zlib streams, through libdeflate), shuffle, and h5py's LZF (Debian's
 * LZF plugin does not load: it lacks liblzf's symbols), and LZF's
 * compressor, for make-dataset.  Pure byte work: no HDF5, no locks.
 */
#ifndef SC_CODEC_H
#define SC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define SC__FILTER_DEFLATE 1
#define SC__FILTER_SHUFFLE 2
#define SC__FILTER_LZF 32000 /* h5py's registered id */
#define SC__MAX_PIPELINE 4

/* A chunk's filters in pipeline (write) order; elem: the shuffle's unit. */
typedef struct sc__pipeline {
    int n;
    unsigned id[SC__MAX_PIPELINE];
    unsigned elem;
} sc__pipeline;

/* A filter's name in words ("Blosc", "deflate (gzip)"), from its registered id. */
const char *sc__filter_name(unsigned id);

/* Whether every filter of p is one decoded here. */
int sc__pipeline_decodable(const sc__pipeline *p);

/*
 * Undoes p on one stored chunk: in[n] to out[want] (the chunk's bytes
 * exactly), skipping the filters whose bit is set in mask (HDF5's filter
 * mask: not applied on write).  tmp holds `want` bytes of scratch.  An
 * SC_EFORMAT naming `what` (file, field, chunk) when the bytes do not
 * decode to `want`.
 */
int sc__chunk_decode(const sc__pipeline *p, unsigned mask, const unsigned char *in, size_t n,
                     unsigned char *out, size_t want, unsigned char *tmp, const char *what,
                     sc_error *err);

/*
 * Applies p to one chunk: in[n] to out (*got bytes; cap at least
 * sc__chunk_bound(n)), tmp[n] scratch.  An LZF step that would not shrink
 * the data is skipped, its bit set in *mask, as HDF5 does for an optional
 * filter.  Deflate is zlib's format at `level`, as HDF5's filter writes.
 */
size_t sc__chunk_bound(size_t n);
int sc__chunk_encode(const sc__pipeline *p, int level, const unsigned char *in, size_t n,
                     unsigned char *out, size_t *got, unsigned *mask, unsigned char *tmp);

/* LZF: 0 when out[cap] cannot hold the result (stored raw then). */
size_t sc__lzf_compress(const unsigned char *in, size_t n, unsigned char *out, size_t cap);
/* -1 when the stream is malformed or does not fit in out[cap]. */
int sc__lzf_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap,
                       size_t *got);
/* HDF5's shuffle: byte k of every elem-sized element together, and back. */
void sc__shuffle(const unsigned char *in, unsigned char *out, size_t n, unsigned elem);
void sc__unshuffle(const unsigned char *in, unsigned char *out, size_t n, unsigned elem);

#endif /* SC_CODEC_H */
