/*
 * bench/jpeg - the per-core limit of decoding JPEG samples, in one thread:
 * N photo-like images (smooth colour fields with noise, S x S pixels,
 * quality 90, encoded outside the clock) decoded
 *
 *   libjpeg-turbo   tjDecompress2 of the whole image to RGB: what one core
 *                   does, the limit a decode stage is measured against
 *   crop            sc__jpeg_decode_crop to a random resized crop of C x C
 *                   and a flip (torchvision's defaults): the decode a
 *                   training step wants, at libjpeg's reduced scales
 *   entropy         libjpeg's jpeg_read_coefficients of the whole image:
 *                   the Huffman decode alone, no IDCT, upsampling or
 *                   colour conversion.  Any decoder of these bytes pays
 *                   it for every row down to the crop's last (the rows
 *                   above a crop cannot be skipped without restart
 *                   markers): the floor under a per-epoch decode
 *
 *   bench_jpeg [--images N] [--size S] [--crop C] [--rounds R] [--file F] [--threads T]
 *              [--dump D]
 *
 * --file F takes the first N images of F's /images instead, JPEG samples
 * as make-dataset --encode jpeg (or h5py's vlen uint8) stores them, each
 * decoded whole at its own size (samples libjpeg-turbo cannot read, a PNG
 * named .jpg, are left out and counted).
 * --threads T then also runs T threads at once, each decoding all N whole
 * images with libjpeg-turbo (one handle each): the machine's own limit
 * with T cores busy (shared caches, memory and clocks), beside T times one
 * thread's rate:
 *
 *   jpeg: T threads: libjpeg-turbo I/s (x of T x one thread's)
 *
 * --dump D (with --file) times nothing: it writes to D, for each image,
 * decode-once's centre crop and 4 random resized crops (seeds (7, k, 0, i))
 * as the loader delivers them, each a record of uint32 image, k, flip, 0,
 * double x, y, w, h (the crop in the image's pixels), then 3 planes of
 * C x C bytes: what bench/resample_vs_pil.py compares with PIL.
 *
 * and prints, best of R rounds (default 3), images/s and MB/s of JPEG in:
 *
 *   jpeg: S x S, N images (K KiB each): libjpeg-turbo I/s (MB/s in, Mpixel/s), crop C: I/s (ratio)
 *   jpeg: entropy decode alone: I/s (x libjpeg-turbo's whole decode)
 *
 * (with --file, "own sizes (mean Mpixel, largest side; left out)" for S x S).
 */
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
/* jpeglib.h needs FILE and size_t first */
#include <jpeglib.h>

#include "bench_doc.h"
#include "hash.h"
#include "jpeg.h"

static void die(const char *what, const sc_error *err)
{
    fprintf(stderr, "bench_jpeg: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

/* A photo-like image: smooth fields of colour and some noise, planar. */
static void photo(uint8_t *p, int s, sc__rng *r)
{
    int cx = (int)sc__rng_below(r, (uint64_t)s), cy = (int)sc__rng_below(r, (uint64_t)s);
    for (int k = 0; k < 3; k++) {
        int base = (int)sc__rng_below(r, 160);
        for (int y = 0; y < s; y++)
            for (int x = 0; x < s; x++) {
                int d = (abs(x - cx) + abs(y - cy)) * (k + 1) / 4;
                p[((size_t)k * s + y) * s + x] =
                    (uint8_t)((base + d + (int)sc__rng_below(r, 24)) & 255);
            }
    }
}

/* The first *n samples of path's /images that libjpeg-turbo reads (fewer if it holds fewer),
   with their sizes; *s gets the largest side, *skipped those it cannot read. */
static void from_file(const char *path, int *n, int *s, unsigned char **img, size_t *len,
                      int *wh, int *skipped)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "/images", H5P_DEFAULT) : -1;
    hid_t fs = d >= 0 ? H5Dget_space(d) : -1, mt = H5Tvlen_create(H5T_NATIVE_UINT8);
    hsize_t all = 0;
    if (fs < 0 || H5Sget_simple_extent_dims(fs, &all, NULL) != 1)
        die("--file: no one-dimensional /images", NULL);
    hsize_t start = 0, cnt = all < (hsize_t)*n ? all : (hsize_t)*n;
    if (cnt == 0)
        die("--file: /images is empty", NULL);
    hvl_t *v = calloc(cnt, sizeof *v);
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
    if (H5Dread(d, mt, ms, fs, H5P_DEFAULT, v) < 0)
        die("--file: /images is not variable-length uint8", NULL);
    tjhandle tj = tjInitDecompress();
    int k = 0;
    *s = *skipped = 0;
    for (hsize_t i = 0; i < cnt; i++) {
        int w = 0, h = 0, sub, cs;
        if (tjDecompressHeader3(tj, v[i].p, v[i].len, &w, &h, &sub, &cs) != 0) {
            ++*skipped;
            continue;
        }
        img[k] = malloc(v[i].len);
        memcpy(img[k], v[i].p, v[i].len);
        len[k] = v[i].len, wh[2 * k] = w, wh[2 * k + 1] = h;
        *s = w > *s ? w : *s;
        *s = h > *s ? h : *s;
        k++;
    }
    tjDestroy(tj);
    H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, v);
    free(v);
    if (k == 0)
        die("--file: no image in /images that libjpeg-turbo reads", NULL);
    *n = k;
    H5Sclose(ms), H5Sclose(fs), H5Tclose(mt), H5Dclose(d), H5Fclose(f);
}

/* --threads: one thread's share, the whole set decoded once with its own handle. */
typedef struct worker {
    unsigned char **img;
    size_t *len;
    const int *wh; /* each image's width and height */
    int n, s;      /* s: the largest side */
} worker;

/* Image i decoded whole, at its own size, into px (room for s x s x 3). */
static int decode_whole(tjhandle tj, const worker *w, int i, uint8_t *px)
{
    int width = w->wh[2 * i], height = w->wh[2 * i + 1];
    return tjDecompress2(tj, w->img[i], w->len[i], px, width, 3 * width, height, TJPF_RGB, 0);
}

static void *decode_all(void *arg)
{
    const worker *w = arg;
    tjhandle tj = tjInitDecompress();
    uint8_t *px = malloc((size_t)3 * w->s * w->s);
    for (int i = 0; tj && px && i < w->n; i++)
        if (decode_whole(tj, w, i, px) != 0)
            die(tjGetErrorStr2(tj), NULL);
    free(px);
    if (tj)
        tjDestroy(tj);
    return NULL;
}

/* libjpeg's errors end the benchmark: these are images tjDecompress2 read. */
static void entropy_fail(j_common_ptr c)
{
    char why[JMSG_LENGTH_MAX];
    c->err->format_message(c, why);
    die(why, NULL);
}

/* Seconds to Huffman-decode every image of w whole (jpeg_read_coefficients). */
static double entropy_all(const worker *w)
{
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jerr.error_exit = entropy_fail;
    jpeg_create_decompress(&c);
    double t0 = bench_now();
    for (int i = 0; i < w->n; i++) {
        jpeg_mem_src(&c, w->img[i], (unsigned long)w->len[i]);
        jpeg_read_header(&c, TRUE);
        jpeg_read_coefficients(&c);
        jpeg_abort_decompress(&c);
    }
    double t = bench_now() - t0;
    jpeg_destroy_decompress(&c);
    return t;
}

/* T threads decoding the set at once, best of `rounds`: images/s over all of them. */
static double decode_parallel(int t, const worker *set, int rounds)
{
    pthread_t *th = calloc((size_t)t, sizeof *th);
    worker w = *set;
    int n = w.n;
    double best = 1e30;
    for (int r = 0; th && r < rounds; r++) {
        double t0 = bench_now();
        for (int i = 0; i < t; i++)
            if (pthread_create(&th[i], NULL, decode_all, &w) != 0)
                die("pthread_create", NULL);
        for (int i = 0; i < t; i++)
            pthread_join(th[i], NULL);
        best = bench_now() - t0 < best ? bench_now() - t0 : best;
    }
    free(th);
    return (double)t * n / best;
}

/* --dump: each image's centre crop (k 0) and 4 random ones, with their rectangles, to path. */
static void dump(sc__jpeg *j, const char *path, unsigned char **img, size_t *len, int n, int c)
{
    FILE *f = fopen(path, "wb");
    uint8_t *out = malloc((size_t)3 * c * c);
    sc_error err = SC_ERROR_INIT;
    if (!f || !out)
        die("--dump: cannot write there", NULL);
    for (int i = 0; i < n; i++) {
        uint32_t W, H;
        int ch;
        if (sc__jpeg_info(j, img[i], len[i], &W, &H, &ch, &err) != SC_OK)
            die("--dump: info", &err);
        for (uint32_t k = 0; k < 5; k++) {
            sc__crop crop = k ? sc__crop_default((uint32_t)c, (uint32_t)c)
                              : (sc__crop){(uint32_t)c, (uint32_t)c, {1, 1}, {1, 1}, 0, 3, 0};
            uint64_t seed = sc__rng_key(7, k, 0, (uint64_t)i);
            sc__rect r = sc__crop_draw(&crop, W, H, seed);
            if (sc__jpeg_decode_crop(j, img[i], len[i], &crop, seed, 3, out, &err) != SC_OK)
                die("--dump: decode", &err);
            uint32_t head[4] = {(uint32_t)i, k, (uint32_t)r.flip, 0};
            double rect[4] = {r.x, r.y, r.w, r.h};
            fwrite(head, sizeof head, 1, f);
            fwrite(rect, sizeof rect, 1, f);
            fwrite(out, (size_t)3 * c * c, 1, f);
        }
    }
    if (fclose(f) != 0)
        die("--dump: write failed", NULL);
    free(out);
}

int main(int argc, char **argv)
{
    int n = 256, s = 256, c = 224, rounds = 3, threads = 0;
    const char *file = NULL, *dump_to = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--images")) n = v;
        else if (!strcmp(argv[i], "--size")) s = v;
        else if (!strcmp(argv[i], "--crop")) c = v;
        else if (!strcmp(argv[i], "--rounds")) rounds = v;
        else if (!strcmp(argv[i], "--file")) file = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = v;
        else if (!strcmp(argv[i], "--dump")) dump_to = argv[i + 1];
        else die("usage: bench_jpeg [--images N] [--size S] [--crop C] [--rounds R] [--file F] "
                 "[--threads T] [--dump D]", NULL);
    }
    if (n < 1 || s < 8 || c < 1 || rounds < 1)
        die("--images, --size (>= 8), --crop and --rounds must be positive", NULL);
    sc__jpeg *j;
    sc_error err = SC_ERROR_INIT;
    if (sc__jpeg_new(&j, &err) != SC_OK)
        die("no JPEG decoder", &err);
    unsigned char **img = calloc((size_t)n, sizeof *img);
    size_t *len = calloc((size_t)n, sizeof *len), total = 0;
    int *wh = calloc((size_t)2 * n, sizeof *wh), skipped = 0;
    double pixels = 0;
    uint8_t *px = malloc((size_t)3 * s * s), *out = malloc((size_t)3 * c * c);
    sc__rng r;
    sc__rng_init(&r, 1);
    if (file) {
        from_file(file, &n, &s, img, len, wh, &skipped);
        free(px);
        px = malloc((size_t)3 * s * s);
        if (dump_to) {
            dump(j, dump_to, img, len, n, c);
            return 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (!file) {
            photo(px, s, &r);
            if (sc__jpeg_encode(j, px, 3, (uint32_t)s, (uint32_t)s, 90, &img[i], &len[i], &err))
                die("encode", &err);
            wh[2 * i] = wh[2 * i + 1] = s;
        }
        total += len[i];
        pixels += (double)wh[2 * i] * wh[2 * i + 1];
    }
    tjhandle tj = tjInitDecompress();
    worker set = {img, len, wh, n, s};
    double best_full = 1e30, best_crop = 1e30, best_entropy = 1e30;
    sc__crop crop = sc__crop_default((uint32_t)c, (uint32_t)c);
    for (int t = 0; t < rounds; t++) {
        double t0 = bench_now();
        for (int i = 0; i < n; i++)
            if (decode_whole(tj, &set, i, px) != 0)
                die(tjGetErrorStr2(tj), NULL);
        double t1 = bench_now();
        for (int i = 0; i < n; i++)
            if (sc__jpeg_decode_crop(j, img[i], len[i], &crop, sc__rng_key(1, (uint64_t)t, 0,
                                     (uint64_t)i), 3, out, &err) != SC_OK)
                die("decode", &err);
        double t2 = bench_now();
        best_full = t1 - t0 < best_full ? t1 - t0 : best_full;
        best_crop = t2 - t1 < best_crop ? t2 - t1 : best_crop;
        double te = entropy_all(&set);
        best_entropy = te < best_entropy ? te : best_entropy;
    }
    if (file)
        printf("jpeg: own sizes (%.2f Mpixel mean, %d largest side; %d not JPEG left out), ",
               pixels / n / 1e6, s, skipped);
    else
        printf("jpeg: %dx%d, ", s, s);
    printf("%d images (%.1f KiB each): libjpeg-turbo %.0f images/s (%.1f MB/s in, %.0f Mpixel/s), "
           "crop %d: %.0f images/s (%.2fx)\n", n, total / 1024.0 / n, n / best_full,
           total / best_full / 1e6, pixels / best_full / 1e6, c, n / best_crop,
           best_full / best_crop);
    printf("jpeg: entropy decode alone: %.0f images/s (%.2fx libjpeg-turbo's whole decode)\n",
           n / best_entropy, best_full / best_entropy);
    if (threads > 0) {
        double all = decode_parallel(threads, &set, rounds);
        printf("jpeg: %d threads: libjpeg-turbo %.0f images/s (%.2f of %d x one thread's)\n",
               threads, all, all / (threads * n / best_full), threads);
    }
    tjDestroy(tj);
    for (int i = 0; i < n; i++)
        free(img[i]);
    free(img), free(len), free(wh), free(px), free(out);
    sc__jpeg_free(j);
    return 0;
}
