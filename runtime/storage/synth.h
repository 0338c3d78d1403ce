/*
 * synth.h - the synthetic datasets `shardcache make-dataset` writes (and
 * the tests and benchmarks make theirs with): datasets a classifier can
 * learn.  Internal: the command line links the static library for it.
 */
#ifndef SC_SYNTH_H
#define SC_SYNTH_H

#include <stdint.h>

#include "shardcache/base.h"

/* Progress callbacks: `done` of `total` units (bytes or samples). */
typedef void (*sc__progress_fn)(void *arg, uint64_t done, uint64_t total);

typedef struct sc__synth_params {
    const char *out;           /* file (layout A) or directory (layout B) */
    char layout;               /* 'A' or 'B' */
    uint64_t samples;
    int ndims;
    uint64_t dims[SC_MAX_DIMS];/* shape of one /images sample */
    const char *dtype;         /* element type of /images */
    uint64_t labels;           /* classes in /labels (int64) */
    uint64_t shard_size;       /* layout B: samples per file */
    uint64_t seed;
    uint64_t noise;            /* noise half-width in 0..255 pixel levels; 0: 64 */
    uint64_t sorted;           /* 1: samples stored by class (class-sorted); 0: random */
    uint64_t heldout;          /* 1: new samples of the same classes (same seed's
                                  prototypes, other noise): a held-out set */
    uint64_t compress;         /* SC__SYNTH_RAW (0), SC__SYNTH_GZIP or SC__SYNTH_LZF */
    uint64_t chunk;            /* rows per HDF5 chunk; 0: contiguous, or 1024 when
                                  compressed (at most the file's rows) */
    uint64_t smooth;           /* 1: smooth prototypes in 8 flat bands (posterized), which
                                  with a little noise compress as photos' pixels do;
                                  0: random pixels, which do not compress */
    uint64_t jpeg;             /* 0: /images as pixels; 1..100: each image JPEG-encoded at
                                  this quality, a variable-length uint8 sample (h5py's
                                  vlen_dtype(uint8)); needs uint8 images of 1 or 3 x H x W */
} sc__synth_params;

/* make-dataset --compress: gzip is deflate level 4 after the shuffle filter
 * (what h5py users pick); lzf is h5py's own filter (32000, hdf5-plugin-lzf). */
#define SC__SYNTH_RAW 0
#define SC__SYNTH_GZIP 1
#define SC__SYNTH_LZF 2

/* 0 is the default of every field not named. */
#define SC__SYNTH_PARAMS_INIT                                                            \
    {.layout = 'A', .ndims = 3, .dims = {3, 64, 64}, .dtype = "uint8", .labels = 10,     \
     .shard_size = 1024}

int sc__dataset_make(const sc__synth_params *p, sc__progress_fn progress, void *arg,
                     sc_error *err);

#endif /* SC_SYNTH_H */
