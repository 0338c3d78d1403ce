/*
 * synth.c - synthetic datasets a classifier can learn (`make-dataset`).
 *
 * Each class has a random prototype image; a sample is its class's
 * prototype plus uniform noise of a chosen half-width (wide noise makes
 * the classes overlap: a harder set, whose training depends on the
 * order), so class means differ along every pixel and a linear softmax
 * trained on the images really lowers its loss.  Labels are random, or
 * class-sorted (contiguous blocks of classes, as many image packs are
 * written); labels and noise are counter-based functions of (seed, sample
 * id): the same parameters give the same bytes, in either layout.  A
 * held-out set keys them by ids past 2^48: the same classes' prototypes,
 * samples no training set of that seed holds.  Random prototypes do not
 * compress; smooth ones (--smooth: a coarse random grid, interpolated and
 * posterized into 8 bands) with a noise of 1 or 2 levels compress about
 * as photos' pixels do, for measuring compressed sources.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codec.h"
#include "error.h"
#include "h5.h"
#include "jpeg.h"
#include "output.h"
#include "hash.h"
#include "shardcache/dataset.h"
#include "synth.h"

#define ROWS_PER_WRITE 256
#define LZF_FILTER SC__FILTER_LZF
#define GZIP_LEVEL 4
#define SMOOTH_CELL 8  /* pixels between a smooth prototype's random control points */
#define SMOOTH_BAND 32 /* its levels: 256 / 32 = 8 flat bands */

typedef struct gen {
    const sc__synth_params *p;
    sc__jpeg *jpeg;       /* --encode jpeg: the encoder */
    sc__dtype dt;
    uint64_t elems;       /* elements per image */
    int noise;            /* half-width of the noise, in pixel levels */
    unsigned char *proto; /* [labels][elems], 0..255 */
} gen;

/* x, 0 or in [2^-14, 65504], as IEEE binary16 (C11 has no half type), rounded half up. */
static uint16_t synth_half(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if (x == 0.0f)
        return 0;
    uint32_t h = ((b >> 23) - 127 + 15) << 10 | (b >> 13 & 0x3ff);
    return (uint16_t)(h + (b >> 12 & 1)); /* a carry into the exponent is right too */
}

static void synth_store(sc__dtype dt, void *buf, uint64_t j, int v)
{
    switch (dt) {
    case SC__DT_U8: ((uint8_t *)buf)[j] = (uint8_t)v; break;
    case SC__DT_I8: ((int8_t *)buf)[j] = (int8_t)(v - 128); break;
    case SC__DT_U16: ((uint16_t *)buf)[j] = (uint16_t)v; break;
    case SC__DT_I16: ((int16_t *)buf)[j] = (int16_t)v; break;
    case SC__DT_U32: ((uint32_t *)buf)[j] = (uint32_t)v; break;
    case SC__DT_I32: ((int32_t *)buf)[j] = (int32_t)v; break;
    case SC__DT_U64: ((uint64_t *)buf)[j] = (uint64_t)v; break;
    case SC__DT_I64: ((int64_t *)buf)[j] = (int64_t)v; break;
    case SC__DT_F32: ((float *)buf)[j] = (float)v / 255.0f; break;
    case SC__DT_F64: ((double *)buf)[j] = (double)v / 255.0; break;
    case SC__DT_F16: ((uint16_t *)buf)[j] = synth_half((float)v / 255.0f); break;
    case SC__DT_BOOL: ((uint8_t *)buf)[j] = v > 127; break;
    default: break;
    }
}

/*
 * One smooth plane of h x w pixels into out: a grid of random control
 * points every SMOOTH_CELL pixels, interpolated bilinearly in integers
 * (the same bytes on any machine), then posterized.  grid: gh x gw bytes.
 */
static void synth_smooth_plane(sc__rng *rng, uint64_t h, uint64_t w, unsigned char *grid,
                               unsigned char *out)
{
    const uint64_t gw = w / SMOOTH_CELL + 2, gh = h / SMOOTH_CELL + 2, C = SMOOTH_CELL;
    for (uint64_t i = 0; i < gw * gh; i++)
        grid[i] = (unsigned char)sc__rng_next(rng);
    for (uint64_t y = 0; y < h; y++) {
        const unsigned char *r0 = grid + (y / C) * gw, *r1 = r0 + gw;
        uint64_t ty = y % C;
        for (uint64_t x = 0; x < w; x++) {
            uint64_t ix = x / C, tx = x % C;
            uint64_t top = r0[ix] * (C - tx) + r0[ix + 1] * tx;
            uint64_t bot = r1[ix] * (C - tx) + r1[ix + 1] * tx;
            uint64_t v = (top * (C - ty) + bot * ty) / (C * C);
            out[y * w + x] = (unsigned char)(v / SMOOTH_BAND * SMOOTH_BAND + SMOOTH_BAND / 2);
        }
    }
}

/* Every class's prototype: random pixels, or smooth planes over the last two dims. */
static int synth_prototypes(gen *g, sc_error *err)
{
    const sc__synth_params *p = g->p;
    if (!(g->proto = malloc(p->labels * g->elems)))
        return sc__seterr(err, SC_ENOMEM, "make-dataset: no memory for prototypes");
    sc__rng rng;
    sc__rng_init(&rng, sc__rng_key(p->seed, 0, SC__PURPOSE_SYNTH_PROTO, 0));
    if (!p->smooth) {
        for (uint64_t i = 0; i < p->labels * g->elems; i++)
            g->proto[i] = (unsigned char)sc__rng_next(&rng);
        return SC_OK;
    }
    uint64_t w = p->dims[p->ndims - 1], h = p->ndims > 1 ? p->dims[p->ndims - 2] : 1;
    unsigned char *grid = malloc((w / SMOOTH_CELL + 2) * (h / SMOOTH_CELL + 2));
    if (!grid)
        return sc__seterr(err, SC_ENOMEM, "make-dataset: no memory for prototypes");
    for (uint64_t at = 0; at < p->labels * g->elems; at += h * w)
        synth_smooth_plane(&rng, h, w, grid, g->proto + at);
    free(grid);
    return SC_OK;
}

/* Fills `rows` samples from `first` into images/labels. */
static void synth_fill(const gen *g, uint64_t first, uint64_t rows, void *images,
                       int64_t *labels)
{
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t id = first + r;
        sc__rng rng;
        sc__rng_init(&rng, sc__rng_key(g->p->seed, id + (g->p->heldout << 48),
                                         SC__PURPOSE_SYNTH_SAMPLE, 0));
        uint64_t c = sc__rng_below(&rng, g->p->labels);
        if (g->p->sorted) /* contiguous blocks, as equal as the count allows */
            c = (uint64_t)((unsigned __int128)id * g->p->labels / g->p->samples);
        labels[r] = (int64_t)c;
        const unsigned char *proto = g->proto + c * g->elems;
        uint64_t bits = 0;
        for (uint64_t j = 0; j < g->elems; j++) {
            if (j % 8 == 0)
                bits = sc__rng_next(&rng);
            int noise = (int)((bits >> (8 * (j % 8))) & 0xff) * g->noise / 128 - g->noise;
            int v = proto[j] + noise;
            v = v < 0 ? 0 : v > 255 ? 255 : v;
            synth_store(g->dt, images, r * g->elems + j, v);
        }
    }
}

/*
 * The creation properties of a field of `type` and `rank` dims, n rows: chunks of
 * p->chunk rows (at most n) and the filters of p->compress, or H5P_DEFAULT
 * (contiguous).  Lock held.
 */
static hid_t synth_dcpl(const sc__synth_params *p, hid_t type, int rank, const hsize_t *dims,
                        uint64_t n)
{
    uint64_t rows = p->chunk ? p->chunk : p->compress ? 1024 : 0;
    if (!rows)
        return H5P_DEFAULT;
    hsize_t cdims[SC_MAX_DIMS + 1];
    memcpy(cdims, dims, sizeof cdims[0] * (size_t)rank);
    cdims[0] = rows < n ? rows : n;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    herr_t h = dcpl < 0 ? -1 : H5Pset_chunk(dcpl, rank, cdims);
    if (h >= 0 && p->compress == SC__SYNTH_GZIP)
        h = H5Pset_shuffle(dcpl) < 0 ? -1 : H5Pset_deflate(dcpl, GZIP_LEVEL);
    if (h >= 0 && p->compress == SC__SYNTH_LZF) { /* as h5py declares it: version 4 */
        uint64_t bytes = H5Tget_size(type);
        for (int i = 0; i < rank; i++)
            bytes *= cdims[i];
        unsigned cd[3] = {4, 0x0105, (unsigned)bytes}; /* the chunk's bytes, h5py's hint */
        h = H5Pset_filter(dcpl, LZF_FILTER, H5Z_FLAG_OPTIONAL, 3, cd);
    }
    if (h < 0 && dcpl >= 0)
        H5Pclose(dcpl);
    return h < 0 ? H5I_INVALID_HID : dcpl;
}

/*
 * Encodes one chunk of `bytes` (a whole chunk, zero past the data) with
 * the filters p declares and stores it as it is (H5Dwrite_chunk): the
 * encoders are codec.c's, so no HDF5 filter plugin is needed to write,
 * only to read elsewhere.  Lock held.
 */
static herr_t synth_put_chunk(const sc__synth_params *p, hid_t d, uint64_t row, const void *data,
                              size_t bytes, unsigned elem)
{
    sc__pipeline pipe = {0, {0}, elem};
    if (p->compress == SC__SYNTH_GZIP)
        pipe = (sc__pipeline){2, {SC__FILTER_SHUFFLE, SC__FILTER_DEFLATE}, elem};
    else if (p->compress == SC__SYNTH_LZF)
        pipe = (sc__pipeline){1, {SC__FILTER_LZF}, elem};
    unsigned char *out = malloc(sc__chunk_bound(bytes)), *tmp = malloc(bytes + 1);
    size_t got = 0;
    unsigned mask = 0;
    hsize_t off[SC_MAX_DIMS + 1] = {row};
    herr_t h = out && tmp && sc__chunk_encode(&pipe, GZIP_LEVEL, data, bytes, out, &got,
                                              &mask, tmp) == 0
                   ? H5Dwrite_chunk(d, H5P_DEFAULT, mask, off, got, out)
                   : -1;
    free(out);
    free(tmp);
    return h;
}

/*
 * Rows [at, at + rows) with /images as JPEG: each image encoded, the rows
 * written as variable-length uint8 sequences; /labels as ever.
 */
static herr_t synth_put_jpeg(const gen *g, hid_t di, hid_t dl, hid_t si, hid_t sl, uint64_t at,
                             uint64_t rows, const unsigned char *images, const int64_t *labels)
{
    const sc__synth_params *p = g->p;
    hvl_t *v = calloc(rows, sizeof *v);
    herr_t h = v ? 0 : -1;
    for (uint64_t i = 0; h >= 0 && i < rows; i++) {
        size_t n = 0;
        unsigned char *jpg = NULL;
        sc_error err = SC_ERROR_INIT;
        h = sc__jpeg_encode(g->jpeg, images + i * g->elems, (int)p->dims[0], (uint32_t)p->dims[2],
                            (uint32_t)p->dims[1], (int)p->jpeg, &jpg, &n, &err) == SC_OK ? 0 : -1;
        v[i] = (hvl_t){n, jpg};
    }
    hsize_t start = at, cnt = rows;
    hid_t mi = H5Screate_simple(1, &cnt, NULL), mt = H5Tvlen_create(H5T_NATIVE_UINT8);
    if (h >= 0)
        h = H5Sselect_hyperslab(si, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
    if (h >= 0)
        h = H5Dwrite(di, mt, mi, si, H5P_DEFAULT, v);
    if (h >= 0)
        h = H5Sselect_hyperslab(sl, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
    if (h >= 0)
        h = H5Dwrite(dl, H5T_NATIVE_INT64, mi, sl, H5P_DEFAULT, labels);
    for (uint64_t i = 0; v && i < rows; i++)
        free(v[i].p);
    free(v);
    H5Sclose(mi);
    H5Tclose(mt);
    return h;
}

/* Rows [at, at + rows) of both fields: a hyperslab each, or whole chunks when compressed. */
static herr_t synth_put_rows(const gen *g, hid_t di, hid_t dl, hid_t si, hid_t sl,
                             const hsize_t *dims, uint64_t at, uint64_t rows, uint64_t step,
                             const void *images, const int64_t *labels)
{
    const sc__synth_params *p = g->p;
    size_t esize = sc__dtype_size(g->dt);
    if (p->jpeg)
        return synth_put_jpeg(g, di, dl, si, sl, at, rows, images, labels);
    if (p->compress)
        return synth_put_chunk(p, di, at, images, step * g->elems * esize, (unsigned)esize) < 0 ||
                       synth_put_chunk(p, dl, at, labels, step * sizeof *labels, 8) < 0
                   ? -1
                   : 0;
    hsize_t start[SC_MAX_DIMS + 1] = {at}, cnt[SC_MAX_DIMS + 1];
    memcpy(cnt, dims, sizeof cnt);
    cnt[0] = rows;
    hid_t mi = H5Screate_simple(p->ndims + 1, cnt, NULL);
    hid_t ml = H5Screate_simple(1, cnt, NULL);
    herr_t h = H5Sselect_hyperslab(si, H5S_SELECT_SET, start, NULL, cnt, NULL);
    hid_t mt = sc__h5_mem_type(H5I_INVALID_HID, g->dt);
    if (h >= 0)
        h = mt < 0 ? -1 : H5Dwrite(di, mt, mi, si, H5P_DEFAULT, images);
    if (mt >= 0)
        H5Tclose(mt);
    if (h >= 0)
        h = H5Sselect_hyperslab(sl, H5S_SELECT_SET, start, NULL, cnt, NULL);
    if (h >= 0)
        h = H5Dwrite(dl, H5T_NATIVE_INT64, ml, sl, H5P_DEFAULT, labels);
    H5Sclose(mi);
    H5Sclose(ml);
    return h;
}

/*
 * Creates the HDF5 file at path, which sc__output_clear emptied: EXCL
 * (O_CREAT|O_EXCL, so a link planted meanwhile is refused, not followed),
 * then mode 0600 on the descriptor HDF5 opened.  Under the HDF5 lock.
 */
static hid_t synth_create(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    int *fd = NULL;
    if (f >= 0 && H5Fget_vfd_handle(f, H5P_DEFAULT, (void **)&fd) >= 0 && fd)
        (void)fchmod(*fd, 0600);
    return f;
}

/* Writes samples [first, first+n) as one file with /images and /labels. */
static int synth_write_file(const gen *g, const char *path, uint64_t first, uint64_t n,
                            sc__progress_fn progress, void *arg, uint64_t *done,
                            sc_error *err)
{
    const sc__synth_params *p = g->p;
    hsize_t dims[SC_MAX_DIMS + 1], ldims[1] = {n};
    dims[0] = n;
    for (int i = 0; i < p->ndims; i++)
        dims[i + 1] = p->dims[i];
    size_t esize = sc__dtype_size(g->dt);
    /* Compressed: a chunk at a time, the last one zero-padded to its full size. */
    uint64_t crows = p->chunk ? p->chunk : 1024;
    uint64_t step = p->compress ? (crows < n ? crows : n) : ROWS_PER_WRITE;
    void *images = calloc(step, g->elems * esize);
    int64_t *labels = calloc(step, sizeof *labels);
    int rc = SC_OK;
    hid_t f = H5I_INVALID_HID, di = H5I_INVALID_HID, dl = H5I_INVALID_HID;
    hid_t si = H5I_INVALID_HID, sl = H5I_INVALID_HID;

    if (!images || !labels) {
        rc = sc__seterr(err, SC_ENOMEM, "make-dataset: no memory");
        goto out;
    }
    rc = sc__output_clear(path, "make-dataset: output file", err);
    sc__h5_lock();
    f = rc == SC_OK ? synth_create(path) : H5I_INVALID_HID;
    si = p->jpeg ? H5Screate_simple(1, ldims, NULL) : H5Screate_simple(p->ndims + 1, dims, NULL);
    sl = H5Screate_simple(1, ldims, NULL);
    hid_t ti = p->jpeg ? H5Tvlen_create(H5T_NATIVE_UINT8) : sc__h5_mem_type(H5I_INVALID_HID, g->dt);
    hid_t pi = synth_dcpl(p, ti, p->ndims + 1, dims, n);
    hid_t pl = synth_dcpl(p, H5T_NATIVE_INT64, 1, ldims, n);
    if (f >= 0 && si >= 0 && sl >= 0 && ti >= 0 && pi >= 0 && pl >= 0) {
        di = H5Dcreate2(f, "/images", ti, si, H5P_DEFAULT, pi, H5P_DEFAULT);
        dl = H5Dcreate2(f, "/labels", H5T_NATIVE_INT64, sl, H5P_DEFAULT, pl, H5P_DEFAULT);
    }
    if (rc == SC_OK && (f < 0 || di < 0 || dl < 0))
        rc = sc__h5_err(err, SC_EHDF5, "make-dataset: cannot create '%s'", path);
    if (pi > 0 && pi != H5P_DEFAULT)
        H5Pclose(pi);
    if (pl > 0 && pl != H5P_DEFAULT)
        H5Pclose(pl);
    if (ti >= 0)
        H5Tclose(ti);
    sc__h5_unlock();

    for (uint64_t at = 0; rc == SC_OK && at < n; at += step) {
        uint64_t rows = n - at < step ? n - at : step;
        if (rows < step) {
            memset(images, 0, step * g->elems * esize);
            memset(labels, 0, step * sizeof *labels);
        }
        synth_fill(g, first + at, rows, images, labels);
        sc__h5_lock();
        if (synth_put_rows(g, di, dl, si, sl, dims, at, rows, step, images, labels) < 0)
            rc = sc__h5_err(err, SC_EHDF5, "make-dataset: writing '%s' failed", path);
        sc__h5_unlock();
        *done += rows;
        if (progress)
            progress(arg, *done, p->samples);
    }

    sc__h5_lock();
    if (di >= 0)
        H5Dclose(di);
    if (dl >= 0)
        H5Dclose(dl);
    if (si >= 0)
        H5Sclose(si);
    if (sl >= 0)
        H5Sclose(sl);
    if (f >= 0 && H5Fclose(f) < 0 && rc == SC_OK)
        rc = sc__h5_err(err, SC_EHDF5, "make-dataset: closing '%s' failed", path);
    sc__h5_unlock();
out:
    free(images);
    free(labels);
    return rc;
}

static int synth_check_compress(const sc__synth_params *p, sc_error *err)
{
    if (p->compress > SC__SYNTH_LZF)
        return sc__seterr(err, SC_EINVAL, "make-dataset: compression %llu: choose none (0), "
                          "gzip (1) or lzf (2)", (unsigned long long)p->compress);
    if (p->jpeg > 100)
        return sc__seterr(err, SC_EINVAL, "make-dataset: JPEG quality %llu: 1 to 100",
                          (unsigned long long)p->jpeg);
    if (p->jpeg && (strcmp(p->dtype, "uint8") || p->ndims != 3 ||
                    (p->dims[0] != 1 && p->dims[0] != 3) || p->compress || p->chunk))
        return sc__seterr(err, SC_EINVAL, "make-dataset: --encode jpeg needs uint8 images of "
                          "1 or 3 channels (--shape 3xHxW) and no --compress or --chunk (JPEG "
                          "is the compression)");
    return SC_OK; /* chunks are encoded here (codec.c): no HDF5 filter is needed */
}

int sc__dataset_make(const sc__synth_params *p, sc__progress_fn progress, void *arg,
                    sc_error *err)
{
    gen g = {p, NULL, SC__DT_INVALID, 1, 64, NULL};
    int rc = SC_OK;

    if (!p || !p->out || !p->out[0] || !p->dtype)
        return sc__seterr(err, SC_EINVAL, "make-dataset: no output path");
    if ((g.dt = sc__dtype_parse(p->dtype)) == SC__DT_INVALID)
        return sc__seterr(err, SC_EINVAL,
                          "make-dataset: unknown dtype '%s' (uint8, int8, uint16, "
                          "int16, uint32, int32, uint64, int64, float16, float32, float64, "
                          "bool)",
                          p->dtype);
    if (p->samples == 0 || p->labels == 0 || p->labels > 65536)
        return sc__seterr(err, SC_EINVAL,
                          "make-dataset: need samples >= 1 and 1..65536 labels");
    if (p->ndims < 1 || p->ndims > SC_MAX_DIMS)
        return sc__seterr(err, SC_EINVAL, "make-dataset: shape needs 1 to %d dimensions",
                          SC_MAX_DIMS);
    for (int i = 0; i < p->ndims; i++) {
        if (p->dims[i] == 0 || __builtin_mul_overflow(g.elems, p->dims[i], &g.elems) ||
            g.elems > (UINT64_C(1) << 28))
            return sc__seterr(err, SC_EINVAL, "make-dataset: bad or huge sample shape");
    }
    if (p->noise > 255 || p->sorted > 1 || p->heldout > 1 || p->smooth > 1)
        return sc__seterr(err, SC_EINVAL, "make-dataset: noise %llu (0..255), sorted %llu, "
                          "heldout %llu or smooth %llu (0 or 1) out of range",
                          (unsigned long long)p->noise, (unsigned long long)p->sorted,
                          (unsigned long long)p->heldout, (unsigned long long)p->smooth);
    g.noise = p->noise ? (int)p->noise : 64;
    if (p->layout != 'A' && p->layout != 'B')
        return sc__seterr(err, SC_EINVAL, "make-dataset: layout must be A or B");
    if (p->layout == 'B' && p->shard_size == 0)
        return sc__seterr(err, SC_EINVAL, "make-dataset: layout B needs a shard size");
    if ((rc = synth_check_compress(p, err)) != SC_OK)
        return rc;

    if (p->jpeg && (rc = sc__jpeg_new(&g.jpeg, err)) != SC_OK)
        return rc;
    if ((rc = synth_prototypes(&g, err)) != SC_OK) {
        sc__jpeg_free(g.jpeg);
        return rc;
    }

    uint64_t done = 0;
    if (p->layout == 'A') {
        rc = synth_write_file(&g, p->out, 0, p->samples, progress, arg, &done, err);
    } else if ((rc = sc_output_dir(p->out, err)) != SC_OK) {
        rc = sc__errctx(err, rc, "make-dataset");
    } else {
        char path[SC_PATH_MAX + 64];
        for (uint64_t k = 0; rc == SC_OK && k * p->shard_size < p->samples; k++) {
            uint64_t first = k * p->shard_size, n = p->samples - first;
            n = n < p->shard_size ? n : p->shard_size;
            snprintf(path, sizeof path, "%s/shard-%06llu.h5", p->out,
                     (unsigned long long)k);
            rc = synth_write_file(&g, path, first, n, progress, arg, &done, err);
        }
    }
    free(g.proto);
    sc__jpeg_free(g.jpeg);
    return rc;
}
