/*
 * jpeg.c - JPEG samples through libjpeg-turbo (see jpeg.h).
 *
 * A random resized crop needs only part of the image at the output's
 * resolution, and libjpeg-turbo can decode at 1/8..1 of the full size in
 * eighths, for a fraction of the cost (its IDCT then skips coefficients):
 * the decode runs at the smallest scale whose crop still has at least the
 * output's pixels, and a bilinear resample takes the crop from there.
 */
#include "jpeg.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

sc__crop sc__crop_default(uint32_t w, uint32_t h)
{
    return (sc__crop){w, h, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, 1};
}

#ifndef SC_HAVE_JPEG

static int jpeg_missing(sc_error *err)
{
    return sc__seterr(err, SC_ENOTSUP, "this shardcache was built without libjpeg-turbo, so it "
                      "neither decodes nor encodes JPEG samples: install Debian's "
                      "libturbojpeg0-dev and build again (SC_WITH_JPEG=ON makes its absence an "
                      "error)");
}

int sc__jpeg_new(sc__jpeg **out, sc_error *err)
{
    *out = NULL;
    return jpeg_missing(err);
}

void sc__jpeg_free(sc__jpeg *j)
{
    (void)j;
}

int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err)
{
    (void)j, (void)src, (void)n, (void)w, (void)h, (void)channels;
    return jpeg_missing(err);
}

int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    (void)j, (void)src, (void)n, (void)crop, (void)seed, (void)channels, (void)out;
    return jpeg_missing(err);
}

int sc__jpeg_encode(sc__jpeg *j, const uint8_t *planar, int channels, uint32_t w, uint32_t h,
                    int quality, unsigned char **dst, size_t *n, sc_error *err)
{
    (void)j, (void)planar, (void)channels, (void)w, (void)h, (void)quality, (void)dst, (void)n;
    return jpeg_missing(err);
}

#else /* SC_HAVE_JPEG */

#include <math.h>
#include <turbojpeg.h>

/* Images above this many pixels are refused: a forged header must not size our buffers. */
#define JPEG_MAX_PIXELS ((uint64_t)1 << 28)

struct sc__jpeg {
    tjhandle dec, enc;
    unsigned char *img; /* the decoded image, interleaved, or the image to encode */
    int32_t *at;        /* the resample's source columns then rows: [w + h] */
    uint16_t *wt;       /* and their weights */
    uint16_t *mid;      /* one row, blended vertically: [decoded width * channels] */
    size_t img_cap, at_cap, wt_cap, mid_cap; /* their bytes */
};

/* A crop rectangle of the full image, and whether it is mirrored. */
typedef struct jpeg_rect {
    double x, y, w, h;
    int flip;
} jpeg_rect;

static int jpeg_fail(tjhandle t, int code, const char *what, sc_error *err)
{
    return sc__seterr(err, code, "%s: %s", what, tjGetErrorStr2(t));
}

/*
 * A failed decode, said, and the decompressor made anew: libjpeg-turbo 2.1
 * keeps a half-parsed state after a failure that fails every later image
 * on the same handle (one damaged sample must not fail the ones after it).
 */
static int jpeg_dec_fail(sc__jpeg *j, const char *what, sc_error *err)
{
    int rc = jpeg_fail(j->dec, SC_EFORMAT, what, err);
    tjhandle fresh = tjInitDecompress();
    if (fresh) {
        tjDestroy(j->dec);
        j->dec = fresh;
    }
    return rc;
}

int sc__jpeg_new(sc__jpeg **out, sc_error *err)
{
    sc__jpeg *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j)
        return sc__seterr(err, SC_ENOMEM, "no memory for a JPEG decoder");
    j->dec = tjInitDecompress();
    j->enc = tjInitCompress();
    if (!j->dec || !j->enc) {
        int rc = sc__seterr(err, SC_ENOMEM, "libjpeg-turbo: %s", tjGetErrorStr2(NULL));
        sc__jpeg_free(j);
        return rc;
    }
    *out = j;
    return SC_OK;
}

void sc__jpeg_free(sc__jpeg *j)
{
    if (!j)
        return;
    if (j->dec)
        tjDestroy(j->dec);
    if (j->enc)
        tjDestroy(j->enc);
    free(j->img);
    free(j->at);
    free(j->wt);
    free(j->mid);
    free(j);
}

/*
 * A scratch buffer of at least n bytes: `old` (of *cap bytes) when it is
 * big enough, else a new one (the contents are never kept); NULL when out
 * of memory.
 */
static void *jpeg_scratch(void *old, size_t *cap, size_t n)
{
    if (old && n <= *cap)
        return old;
    free(old);
    void *p = malloc(n ? n : 1);
    *cap = p ? n : 0;
    return p;
}

/* j->img with room for n bytes. */
static int jpeg_room(sc__jpeg *j, size_t n, sc_error *err)
{
    j->img = jpeg_scratch(j->img, &j->img_cap, n);
    return j->img ? SC_OK : sc__seterr(err, SC_ENOMEM, "no memory for a %zu-byte image", n);
}

int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err)
{
    int iw = 0, ih = 0, sub = 0, space = 0;
    if (!j || !src || n > ULONG_MAX)
        return sc__seterr(err, SC_EINVAL, "sc__jpeg_info: no decoder or no image");
    if (tjDecompressHeader3(j->dec, src, (unsigned long)n, &iw, &ih, &sub, &space) != 0)
        return jpeg_dec_fail(j, "not a JPEG image libjpeg-turbo can read", err);
    if (iw <= 0 || ih <= 0)
        return sc__seterr(err, SC_EFORMAT, "not a JPEG image libjpeg-turbo can read: no size");
    if (space == TJCS_CMYK || space == TJCS_YCCK)
        return sc__seterr(err, SC_EFORMAT, "a CMYK JPEG image: shardcache decodes RGB and "
                          "grayscale JPEGs (convert it, e.g. PIL's convert(\"RGB\"))");
    if ((uint64_t)iw * (uint64_t)ih > JPEG_MAX_PIXELS)
        return sc__seterr(err, SC_EFORMAT, "a JPEG image of %dx%d pixels: shardcache decodes "
                          "images of 1 to %llu pixels", iw, ih,
                          (unsigned long long)JPEG_MAX_PIXELS);
    *w = (uint32_t)iw;
    *h = (uint32_t)ih;
    *channels = space == TJCS_GRAY ? 1 : 3;
    return SC_OK;
}

static double jpeg_uniform(sc__rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(sc__rng_next(r) >> 11) * 0x1.0p-53;
}

/*
 * torchvision's RandomResizedCrop.get_params, drawn from seed: up to ten
 * tries at an area share and a log-uniform aspect ratio that fit, else the
 * centre crop at the nearest allowed ratio.  Then the flip.
 */
static jpeg_rect jpeg_draw(const sc__crop *c, uint32_t W, uint32_t H, uint64_t seed)
{
    sc__rng r;
    sc__rng_init(&r, seed);
    double area = (double)W * H, lo = log(c->ratio[0]), hi = log(c->ratio[1]);
    for (int t = 0; t < 10; t++) {
        double target = area * jpeg_uniform(&r, c->scale[0], c->scale[1]);
        double ar = exp(jpeg_uniform(&r, lo, hi));
        double w = round(sqrt(target * ar)), h = round(sqrt(target / ar));
        if (w >= 1 && h >= 1 && w <= W && h <= H) {
            double x = (double)sc__rng_below(&r, (uint64_t)(W - w) + 1);
            double y = (double)sc__rng_below(&r, (uint64_t)(H - h) + 1);
            return (jpeg_rect){x, y, w, h, c->flip && (sc__rng_next(&r) & 1)};
        }
    }
    double ir = (double)W / H, w = W, h = H;
    if (ir < c->ratio[0])
        h = round(w / c->ratio[0]);
    else if (ir > c->ratio[1])
        w = round(h * c->ratio[1]);
    return (jpeg_rect){floor((W - w) / 2), floor((H - h) / 2), w, h,
                       c->flip && (sc__rng_next(&r) & 1)};
}

/* The smallest of libjpeg-turbo's scales at which the crop keeps the output's pixels. */
static tjscalingfactor jpeg_scale(const jpeg_rect *r, const sc__crop *c)
{
    int n = 0;
    tjscalingfactor *f = tjGetScalingFactors(&n), best = {1, 1};
    for (int i = 0; f && i < n; i++) {
        double s = (double)f[i].num / f[i].denom;
        if (s <= 1.0 && s < (double)best.num / best.denom && r->w * s >= c->width &&
            r->h * s >= c->height)
            best = f[i];
    }
    return best;
}

/*
 * For each of `n` outputs along one axis, the first of the two source
 * pixels it blends (of `len`) and the second's weight in 1/256ths: the crop
 * [x0, x0 + span) sampled at output pixel centres, mirrored when flip.
 */
static void jpeg_axis(int32_t *at, uint16_t *wt, uint32_t n, double x0, double span, int len,
                      int flip)
{
    double lo = x0, hi = x0 + span - 1; /* within the crop, as cropping before resizing is */
    lo = lo < 0 ? 0 : lo;
    hi = hi > len - 1 ? len - 1 : hi < lo ? lo : hi;
    for (uint32_t o = 0; o < n; o++) {
        double f = x0 + (o + 0.5) * span / n - 0.5;
        f = f < lo ? lo : f > hi ? hi : f;
        int32_t i = (int32_t)f;
        uint32_t to = flip ? n - 1 - o : o;
        at[to] = i < len - 1 ? i : len - 2 < 0 ? 0 : len - 2;
        wt[to] = (uint16_t)((f - at[to]) * 256.0 + 0.5);
    }
}

/*
 * Bilinear resample of the decoded sw-pixel-wide image (ch channels,
 * interleaved) into planar out, in 8-bit fixed point and in two passes per
 * output row: the two source rows blended over the crop's columns, then
 * each output pixel from two of those.
 */
static inline __attribute__((always_inline)) void
jpeg_resample_ch(const sc__jpeg *j, int sw, const int ch, const sc__crop *c, uint8_t *out)
{
    const int32_t *xa = j->at, *ya = j->at + c->width;
    const uint16_t *xw = j->wt, *yw = j->wt + c->width;
    int32_t lo = xa[0], hi = xa[0];
    for (uint32_t x = 1; x < c->width; x++) {
        lo = xa[x] < lo ? xa[x] : lo;
        hi = xa[x] > hi ? xa[x] : hi;
    }
    hi = hi + 1 < sw ? hi + 1 : sw - 1;
    uint16_t *mid = j->mid;
    size_t plane = (size_t)c->height * c->width, row = (size_t)sw * ch;
    for (uint32_t y = 0; y < c->height; y++) {
        const unsigned char *r0 = j->img + (size_t)ya[y] * row;
        const unsigned char *r1 = yw[y] ? r0 + row : r0;
        unsigned b = yw[y], a = 256 - b;
        for (size_t i = (size_t)lo * ch; i < (size_t)(hi + 1) * ch; i++)
            mid[i] = (uint16_t)(r0[i] * a + r1[i] * b);
        for (uint32_t x = 0; x < c->width; x++) {
            const uint16_t *p = mid + (size_t)xa[x] * ch;
            unsigned w1 = xw[x], w0 = 256 - w1;
            int step = xa[x] + 1 < sw ? ch : 0;
            for (int k = 0; k < ch; k++)
                out[k * plane + (size_t)y * c->width + x] =
                    (uint8_t)((p[k] * w0 + p[k + step] * w1 + 32768) >> 16);
        }
    }
}

/* The channel count a constant, so that the compiler unrolls the inner loop. */
static void jpeg_resample(const sc__jpeg *j, int sw, int ch, const sc__crop *c, uint8_t *out)
{
    if (ch == 3)
        jpeg_resample_ch(j, sw, 3, c, out);
    else
        jpeg_resample_ch(j, sw, 1, c, out);
}

/* Room for the resample's tables of an output of w x h from a decoded row of `row` values. */
static int jpeg_tables(sc__jpeg *j, uint32_t w, uint32_t h, size_t row, sc_error *err)
{
    size_t n = (size_t)w + h;
    j->at = jpeg_scratch(j->at, &j->at_cap, n * sizeof *j->at);
    j->wt = jpeg_scratch(j->wt, &j->wt_cap, n * sizeof *j->wt);
    j->mid = jpeg_scratch(j->mid, &j->mid_cap, row * sizeof *j->mid);
    return j->at && j->wt && j->mid
               ? SC_OK
               : sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", w, h);
}

int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    uint32_t W, H;
    int has;
    if (!crop || !out || (channels != 1 && channels != 3) || !crop->width || !crop->height ||
        !(crop->scale[0] > 0 && crop->scale[0] <= crop->scale[1] && crop->scale[1] <= 1) ||
        !(crop->ratio[0] > 0 && crop->ratio[0] <= crop->ratio[1] && crop->ratio[1] < 1e6))
        return sc__seterr(err, SC_EINVAL, "a JPEG decode needs an output of 1 or 3 channels and "
                          "a size, a scale range within (0, 1] and a positive ratio range");
    int rc = sc__jpeg_info(j, src, n, &W, &H, &has, err);
    if (rc != SC_OK)
        return rc;
    jpeg_rect r = jpeg_draw(crop, W, H, seed);
    tjscalingfactor s = jpeg_scale(&r, crop);
    int sw = TJSCALED((int)W, s), sh = TJSCALED((int)H, s);
    if ((rc = jpeg_room(j, (size_t)sw * sh * channels, err)) != SC_OK ||
        (rc = jpeg_tables(j, crop->width, crop->height, (size_t)sw * channels, err)) != SC_OK)
        return rc;
    if (tjDecompress2(j->dec, src, (unsigned long)n, j->img, sw, 0, sh,
                      channels == 3 ? TJPF_RGB : TJPF_GRAY, TJFLAG_STOPONWARNING) != 0)
        return jpeg_dec_fail(j, "a damaged JPEG image", err);
    double fx = (double)sw / W, fy = (double)sh / H;
    jpeg_axis(j->at, j->wt, crop->width, r.x * fx, r.w * fx, sw, r.flip);
    jpeg_axis(j->at + crop->width, j->wt + crop->width, crop->height, r.y * fy, r.h * fy, sh, 0);
    jpeg_resample(j, sw, channels, crop, out);
    return SC_OK;
}

int sc__jpeg_encode(sc__jpeg *j, const uint8_t *planar, int channels, uint32_t w, uint32_t h,
                    int quality, unsigned char **dst, size_t *n, sc_error *err)
{
    *dst = NULL;
    if (!j || (channels != 1 && channels != 3) || !w || !h || w > INT32_MAX / 3 ||
        h > INT32_MAX / 3 || quality < 1 || quality > 100)
        return sc__seterr(err, SC_EINVAL, "a JPEG encode of %d channels, %ux%u, quality %d: "
                          "1 or 3 channels, quality 1-100", channels, w, h, quality);
    size_t px = (size_t)w * h;
    int rc = jpeg_room(j, px * channels, err);
    for (size_t i = 0; rc == SC_OK && i < px; i++) /* planar to interleaved */
        for (int k = 0; k < channels; k++)
            j->img[i * channels + k] = planar[(size_t)k * px + i];
    unsigned char *buf = NULL;
    unsigned long len = 0;
    if (rc == SC_OK && tjCompress2(j->enc, j->img, (int)w, 0, (int)h,
                                   channels == 3 ? TJPF_RGB : TJPF_GRAY, &buf, &len,
                                   channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0) != 0)
        rc = jpeg_fail(j->enc, SC_EINVAL, "libjpeg-turbo could not encode an image", err);
    if (rc == SC_OK && !(*dst = malloc(len ? len : 1)))
        rc = sc__seterr(err, SC_ENOMEM, "no memory for a %lu-byte JPEG image", len);
    if (rc == SC_OK) {
        memcpy(*dst, buf, len);
        *n = len;
    }
    tjFree(buf);
    return rc;
}

#endif /* SC_HAVE_JPEG */
