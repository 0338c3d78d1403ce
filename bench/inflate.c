/*
 * bench/inflate - the per-core limit of a compressed source: every stored
 * chunk of its fields read raw into memory first (H5Dread_chunk, outside
 * the clock), then decompressed in one thread, timed two ways:
 *
 *   libdeflate   libdeflate_zlib_decompress alone, one decompressor for
 *                every chunk: what one core can do (the limit)
 *   decode       shardcache's whole decode of the same chunks
 *                (sc__chunk_decode: libdeflate, then the unshuffle)
 *
 *   bench_inflate FILE [ROUNDS]      (fields /images and /labels)
 *
 * and prints, best of ROUNDS (default 3):
 *
 *   inflate: libdeflate S samples/s (G GB/s out), decode S samples/s (G GB/s out)
 *
 * A field that is not deflate-compressed counts in decode only; with none,
 * the libdeflate figure is 0.
 */
#include <hdf5.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "codec.h"

typedef struct chunk {
    unsigned char *raw;
    size_t n;
    unsigned mask;
} chunk;

typedef struct field {
    sc__pipeline pipe;
    chunk *chunks;
    size_t nchunks, bytes; /* bytes: a whole chunk, decoded */
    int deflate_last;      /* deflate is the last filter applied: libdeflate alone undoes it */
} field;

static void die(const char *what)
{
    fprintf(stderr, "bench_inflate: %s\n", what);
    exit(1);
}

/* The field's filters (in write order) and its chunk size, from its creation properties. */
static void field_pipeline(hid_t d, field *f)
{
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    hsize_t cd[H5S_MAX_RANK];
    int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cd);
    if (rank < 1 || H5Sget_simple_extent_ndims(s) != rank)
        die("a field that is not chunked");
    f->bytes = H5Tget_size(t);
    for (int i = 0; i < rank; i++)
        f->bytes *= cd[i];
    f->pipe = (sc__pipeline){0, {0}, (unsigned)H5Tget_size(t)};
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf && i < SC__MAX_PIPELINE; i++) {
        unsigned flags, cdv[8];
        size_t ncd = 8;
        f->pipe.id[f->pipe.n++] =
            (unsigned)H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cdv, 0, NULL, NULL);
    }
    f->deflate_last = f->pipe.n > 0 && f->pipe.id[f->pipe.n - 1] == SC__FILTER_DEFLATE;
    H5Pclose(dcpl);
    H5Tclose(t);
    H5Sclose(s);
}

/* Every stored chunk of /name into memory, as stored. */
static void field_load(hid_t file, const char *name, field *f)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        die(name);
    field_pipeline(d, f);
    hid_t s = H5Dget_space(d);
    hsize_t n = 0;
    if (H5Dget_num_chunks(d, s, &n) < 0 || !(f->chunks = calloc(n + 1, sizeof *f->chunks)))
        die("counting chunks");
    for (hsize_t i = 0; i < n; i++) {
        hsize_t off[H5S_MAX_RANK], size = 0;
        unsigned mask = 0;
        haddr_t addr;
        chunk *c = &f->chunks[i];
        if (H5Dget_chunk_info(d, s, i, off, &mask, &addr, &size) < 0 ||
            !(c->raw = malloc(size)) ||
            H5Dread_chunk(d, H5P_DEFAULT, off, &c->mask, c->raw) < 0)
            die("reading a chunk");
        c->n = size;
    }
    f->nchunks = n;
    H5Sclose(s);
    H5Dclose(d);
}

/* Seconds to decode every chunk of f once: libdeflate alone, or the whole pipeline. */
static double field_time(const field *f, int alone, struct libdeflate_decompressor *z,
                         unsigned char *out, unsigned char *tmp)
{
    double t0 = bench_now();
    for (size_t i = 0; i < f->nchunks; i++) {
        const chunk *c = &f->chunks[i];
        size_t got = 0;
        sc_error err = SC_ERROR_INIT;
        int bad = alone ? libdeflate_zlib_decompress(z, c->raw, c->n, out, f->bytes, &got) !=
                              LIBDEFLATE_SUCCESS
                        : sc__chunk_decode(&f->pipe, c->mask, c->raw, c->n, out, f->bytes, tmp,
                                           "bench", &err) != SC_OK;
        if (bad)
            die(alone ? "libdeflate refused a chunk" : err.msg);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("usage: bench_inflate FILE [ROUNDS]");
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        die(argv[1]);
    field fs[2];
    field_load(file, "/images", &fs[0]);
    field_load(file, "/labels", &fs[1]);
    hid_t d = H5Dopen2(file, "/labels", H5P_DEFAULT), s = H5Dget_space(d);
    hsize_t samples = 0;
    H5Sget_simple_extent_dims(s, &samples, NULL);
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(file);

    size_t cap = fs[0].bytes > fs[1].bytes ? fs[0].bytes : fs[1].bytes;
    unsigned char *out = malloc(cap), *tmp = malloc(cap);
    struct libdeflate_decompressor *z = libdeflate_alloc_decompressor();
    if (!out || !tmp || !z)
        die("no memory");
    double best[2] = {0, 0}, bytes[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        for (int alone = 0; alone < 2; alone++) {
            double t = 0, b = 0;
            for (int k = 0; k < 2; k++) {
                if (alone && !fs[k].deflate_last)
                    continue;
                t += field_time(&fs[k], alone, z, out, tmp);
                b += (double)fs[k].bytes * (double)fs[k].nchunks;
            }
            if (t > 0 && (best[alone] == 0 || t < best[alone]))
                best[alone] = t, bytes[alone] = b;
        }
    }
    printf("inflate: libdeflate %.0f samples/s (%.2f GB/s out), decode %.0f samples/s "
           "(%.2f GB/s out)\n",
           best[1] > 0 ? (double)samples / best[1] : 0, best[1] > 0 ? bytes[1] / best[1] / 1e9 : 0,
           (double)samples / best[0], bytes[0] / best[0] / 1e9);
    libdeflate_free_decompressor(z);
    free(out);
    free(tmp);
    return 0;
}
