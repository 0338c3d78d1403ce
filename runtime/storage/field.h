/*
 * field.h - one field of a source: its name, element type and sample
 * shape, as the dataset describes it and every reader sizes buffers by.
 * The type alone, with the few pure helpers every layer above uses, so
 * that the readers below the source (vlen, chunks, decode, augment) need
 * no dataset.
 */
#ifndef SC_FIELD_H
#define SC_FIELD_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "shardcache.h"

/* Saved in layout B's manifest as it lies in memory: a change to it, or to
 * sc__dtype's values, bumps SC__SCAN_VERSION (base/formats.h). */
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

/* A field as the public API describes it. */
void sc__field_info(const sc__field *f, sc_field_info *out);

/* Its type and sample shape in words: "uint8 samples of 3 x 64 x 64", "a float16 scalar". */
void sc__field_words(const sc__field *f, char *buf, size_t n);

/* Whether a and b hold the same samples (type, shape, axis): the name aside. */
int sc__field_same(const sc__field *a, const sc__field *b);

/* Whether a field's name is want[len] as a user writes it: "/x" and "x" alike. */
int sc__field_named(const char *name, const char *want, size_t len);

/* Whether a description that came from elsewhere (a manifest) holds together. */
int sc__field_sane(const sc__field *f);

#endif /* SC_FIELD_H */
