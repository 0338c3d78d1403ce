/*
 * jpeg.c - JPEG samples through libjpeg-turbo (see jpeg.h).
 *
 * A random resized crop needs only part of the image at the output's
 * resolution.  libjpeg-turbo can decode at 1/8..1 of the full size in
 * eighths, for a fraction of the cost (its IDCT then skips coefficients),
 * and, through its libjpeg API, only some columns (jpeg_crop_scanline,
 * to whole iMCUs) and rows (jpeg_skip_scanlines, which skips the IDCT and
 * colour conversion of rows above the crop; rows below are never read):
 * the decode runs at the smallest scale whose crop still has at least the
 * output's pixels, over the crop's rectangle, and a bilinear resample
 * takes the crop from there.  TurboJPEG's API reads headers and encodes.
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
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h */
#include <turbojpeg.h>

/* Images above this many pixels are refused: a forged header must not size our buffers. */
#define JPEG_MAX_PIXELS ((uint64_t)1 << 28)

/* libjpeg's errors, and its warnings (a corrupt image: no half-decoded sample), jump here. */
typedef struct jpeg_trap {
    struct jpeg_error_mgr mgr;
    jmp_buf at;
} jpeg_trap;

struct sc__jpeg {
    tjhandle enc;
    struct jpeg_decompress_struct cinfo; /* the region decode's (libjpeg API) */
    jpeg_trap trap;
    int has_cinfo;
    char why[JMSG_LENGTH_MAX];
    unsigned char *img; /* the decoded image, interleaved, or the image to encode */
    int32_t *at;        /* the resample's source columns then rows: [w + h] */
    uint16_t *wt;       /* and their weights */
    uint16_t *mid;      /* two source rows resampled across: [2 * channels * output width] */
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

static void jpeg_on_error(j_common_ptr c)
{
    longjmp(((jpeg_trap *)c->err)->at, 1);
}

/*
 * A warning is corrupt data libjpeg would decode around: an error here,
 * but for stray bytes before a marker (after the last scan, in some
 * ImageNet files), which leave every pixel as encoded.
 */
static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code != JWRN_EXTRANEOUS_DATA)
        longjmp(((jpeg_trap *)c->err)->at, 1);
}

int sc__jpeg_new(sc__jpeg **out, sc_error *err)
{
    sc__jpeg *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j)
        return sc__seterr(err, SC_ENOMEM, "no memory for a JPEG decoder");
    j->enc = tjInitCompress();
    j->cinfo.err = jpeg_std_error(&j->trap.mgr);
    j->trap.mgr.error_exit = jpeg_on_error;
    j->trap.mgr.emit_message = jpeg_on_message;
    if (!setjmp(j->trap.at)) { /* only out of memory fails it */
        jpeg_create_decompress(&j->cinfo);
        j->has_cinfo = 1;
    }
    if (!j->enc || !j->has_cinfo) {
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
    if (j->enc)
        tjDestroy(j->enc);
    if (j->has_cinfo)
        jpeg_destroy_decompress(&j->cinfo);
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
 * Source row `r` of the decoded image (sw pixels of ch channels,
 * interleaved) resampled across: for each output column x, the two source
 * pixels it blends, weighted in 1/256ths, into h[k * width + x] (planar).
 */
static inline __attribute__((always_inline)) void
jpeg_across(const sc__jpeg *j, const unsigned char *restrict row, int sw, const int ch,
            uint32_t width, uint16_t *restrict h)
{
    const int32_t *xa = j->at;
    const uint16_t *xw = j->wt;
    for (uint32_t x = 0; x < width; x++) {
        const unsigned char *p = row + (size_t)xa[x] * ch;
        unsigned w1 = xw[x], w0 = 256 - w1;
        int step = xa[x] + 1 < sw ? ch : 0;
        for (int k = 0; k < ch; k++)
            h[(size_t)k * width + x] = (uint16_t)(p[k] * w0 + p[k + step] * w1);
    }
}

/*
 * Bilinear resample of the decoded sw-pixel-wide image (ch channels,
 * interleaved) into planar out, in 8-bit fixed point: each source row the
 * crop needs resampled across once (two kept: consecutive output rows
 * share them), then each output row blended from two of those, a loop the
 * compiler vectorizes.  The same sums as blending down first.
 */
static inline __attribute__((always_inline)) void
jpeg_resample_ch(const sc__jpeg *j, int sw, int stride, const int ch, const sc__crop *c,
                 uint8_t *out)
{
    const uint32_t width = c->width;
    const int32_t *ya = j->at + width;
    const uint16_t *yw = j->wt + width;
    size_t plane = (size_t)c->height * c->width, row = (size_t)stride * ch;
    size_t n = (size_t)ch * c->width;
    uint16_t *h[2] = {j->mid, j->mid + n};
    int32_t held[2] = {-1, -1}; /* the source rows h[] hold */
    for (uint32_t y = 0; y < c->height; y++) {
        int32_t r0 = ya[y], r1 = yw[y] ? r0 + 1 : r0;
        if (held[0] != r0 && held[1] == r0) { /* moved down a row: keep the lower one */
            uint16_t *t = h[0];
            h[0] = h[1], h[1] = t, held[0] = r0, held[1] = -1;
        }
        if (held[0] != r0)
            jpeg_across(j, j->img + (size_t)r0 * row, sw, ch, c->width, h[0]), held[0] = r0;
        if (held[1] != r1 && r1 != r0)
            jpeg_across(j, j->img + (size_t)r1 * row, sw, ch, c->width, h[1]), held[1] = r1;
        const uint16_t *lo = h[0], *hi = r1 != r0 ? h[1] : h[0];
        unsigned b = yw[y], a = 256 - b;
        for (int k = 0; k < ch; k++) {
            /* restrict, and the width in a local: a uint8_t store may alias anything
               (c->width too), which stops the vectorizer */
            uint8_t *restrict o = out + k * plane + (size_t)y * width;
            const uint16_t *restrict p0 = lo + (size_t)k * width;
            const uint16_t *restrict p1 = hi + (size_t)k * width;
            for (uint32_t x = 0; x < width; x++)
                o[x] = (uint8_t)((p0[x] * a + p1[x] * b + 32768) >> 16);
        }
    }
}

/* The channel count a constant, so that the compiler unrolls the inner loop. */
static void jpeg_resample(const sc__jpeg *j, int sw, int stride, int ch, const sc__crop *c,
                          uint8_t *out)
{
    if (ch == 3)
        jpeg_resample_ch(j, sw, stride, 3, c, out);
    else
        jpeg_resample_ch(j, sw, stride, 1, c, out);
}

/* Room for the resample's tables and two resampled rows of an output of w x h, ch channels. */
static int jpeg_tables(sc__jpeg *j, uint32_t w, uint32_t h, int ch, sc_error *err)
{
    size_t n = (size_t)w + h;
    j->at = jpeg_scratch(j->at, &j->at_cap, n * sizeof *j->at);
    j->wt = jpeg_scratch(j->wt, &j->wt_cap, n * sizeof *j->wt);
    j->mid = jpeg_scratch(j->mid, &j->mid_cap, 2 * (size_t)ch * w * sizeof *j->mid);
    return j->at && j->wt && j->mid
               ? SC_OK
               : sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", w, h);
}

/* One image read through libjpeg: its header, then (with a crop) the crop's rectangle. */
typedef struct jpeg_job {
    const sc__crop *crop; /* NULL: the header alone */
    uint64_t seed;
    int ch;                /* the output's channels */
    uint32_t W, H;         /* the header's */
    J_COLOR_SPACE space;
    int decoding;          /* past the header: a failure is a damaged image */
    int rc;                /* SC_OK, or a refusal of the header (in err) */
    jpeg_rect r;           /* the crop, drawn from the seed */
    tjscalingfactor s;     /* the scale it is decoded at: sw x sh */
    int sw, sh;
    JDIMENSION y0, y1, x0, w, end; /* rows [y0, y1) and columns [x0, x0 + w) decoded;
                                      the resample reads columns before `end` */
} jpeg_job;

/* A header shardcache decodes: a size, not CMYK, not too many pixels. */
static int jpeg_check(const jpeg_job *job, sc_error *err)
{
    if (job->W == 0 || job->H == 0)
        return sc__seterr(err, SC_EFORMAT, "not a JPEG image libjpeg-turbo can read: no size");
    if (job->space == JCS_CMYK || job->space == JCS_YCCK)
        return sc__seterr(err, SC_EFORMAT, "a CMYK JPEG image: shardcache decodes RGB and "
                          "grayscale JPEGs (convert it, e.g. PIL's convert(\"RGB\"))");
    if ((uint64_t)job->W * job->H > JPEG_MAX_PIXELS)
        return sc__seterr(err, SC_EFORMAT, "a JPEG image of %ux%u pixels: shardcache decodes "
                          "images of 1 to %llu pixels", job->W, job->H,
                          (unsigned long long)JPEG_MAX_PIXELS);
    return SC_OK;
}

/*
 * The crop, its scale, and what to decode: the scaled crop's pixels and the
 * one past each edge that bilinear may blend, rows [y0, y1) and columns
 * [x0, end).  libjpeg-turbo 2.1's fancy upsampling leaves the edge columns
 * of a cropped row undefined where the row starts or ends inside the
 * image, so 16 more columns (an iMCU at most) each side are decoded and
 * never read.
 */
static void jpeg_plan(jpeg_job *job)
{
    job->r = jpeg_draw(job->crop, job->W, job->H, job->seed);
    job->s = jpeg_scale(&job->r, job->crop);
    job->sw = TJSCALED((int)job->W, job->s);
    job->sh = TJSCALED((int)job->H, job->s);
    double fx = (double)job->sw / job->W, fy = (double)job->sh / job->H;
    JDIMENSION need = (JDIMENSION)floor(job->r.x * fx), sw = (JDIMENSION)job->sw;
    double ye = ceil((job->r.y + job->r.h) * fy) + 1, xe = ceil((job->r.x + job->r.w) * fx) + 1;
    job->y0 = (JDIMENSION)floor(job->r.y * fy);
    job->y1 = ye < job->sh ? (JDIMENSION)ye : (JDIMENSION)job->sh;
    job->end = xe < sw ? (JDIMENSION)xe : sw;
    job->x0 = need > 16 ? need - 16 : 0;
    job->w = (job->end + 16 < sw ? job->end + 16 : sw) - job->x0;
}

/*
 * Reads src's header into job and, with a crop that the header passes,
 * decodes the crop's rows and columns (libjpeg widens x0 and w to whole
 * iMCUs) into j->img, job->ch values a pixel.  NULL, or libjpeg's reason
 * (in j->why); either way the decompressor is left ready for the next image.
 */
static const char *jpeg_run(sc__jpeg *j, const void *src, size_t n, jpeg_job *job,
                            sc_error *err)
{
    struct jpeg_decompress_struct *c = &j->cinfo;
    if (setjmp(j->trap.at)) {
        c->err->format_message((j_common_ptr)c, j->why);
        jpeg_abort_decompress(c);
        return j->why;
    }
    jpeg_mem_src(c, src, (unsigned long)n);
    jpeg_read_header(c, TRUE);
    job->W = c->image_width;
    job->H = c->image_height;
    job->space = c->jpeg_color_space;
    job->decoding = 1;
    if ((job->rc = jpeg_check(job, err)) != SC_OK || !job->crop) {
        jpeg_abort_decompress(c);
        return NULL;
    }
    jpeg_plan(job);
    c->out_color_space = job->ch == 3 ? JCS_RGB : JCS_GRAYSCALE;
    c->scale_num = (unsigned)job->s.num;
    c->scale_denom = (unsigned)job->s.denom;
    jpeg_start_decompress(c);
    jpeg_crop_scanline(c, &job->x0, &job->w);
    size_t row = (size_t)job->w * (size_t)job->ch;
    if (!(j->img = jpeg_scratch(j->img, &j->img_cap, row * (job->y1 - job->y0)))) {
        jpeg_abort_decompress(c);
        return "no memory for the image";
    }
    if (job->y0 > 0)
        jpeg_skip_scanlines(c, job->y0);
    while (c->output_scanline < job->y1) {
        JSAMPROW r = j->img + (size_t)(c->output_scanline - job->y0) * row;
        jpeg_read_scanlines(c, &r, 1);
    }
    jpeg_abort_decompress(c); /* the rows below the crop are never decoded */
    return NULL;
}

int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err)
{
    if (!j || !src || n > ULONG_MAX)
        return sc__seterr(err, SC_EINVAL, "sc__jpeg_info: no decoder or no image");
    jpeg_job job = {0};
    const char *why = jpeg_run(j, src, n, &job, err);
    if (why)
        return sc__seterr(err, SC_EFORMAT, "not a JPEG image libjpeg-turbo can read: %s", why);
    *w = job.W;
    *h = job.H;
    *channels = job.space == JCS_GRAYSCALE ? 1 : 3;
    return job.rc;
}

/*
 * Whether src ends with an image's end marker (0xFF 0xD9) in its last KiB:
 * the region decode never reads the rows below the crop, so a truncated
 * image would decode whenever its crop missed the lost rows; this refuses
 * it at every epoch instead.  (Damage inside the data below a crop is
 * found only when a crop reaches it.)
 */
static int jpeg_has_end(const unsigned char *src, size_t n)
{
    for (size_t i = n, stop = n > 1024 ? n - 1024 : 0; i >= stop + 2; i--)
        if (src[i - 2] == 0xFF && src[i - 1] == 0xD9)
            return 1;
    return 0;
}

/* Whether a crop's settings hold together. */
static int jpeg_crop_ok(const sc__crop *crop, int channels)
{
    return crop && (channels == 1 || channels == 3) && crop->width && crop->height &&
           crop->scale[0] > 0 && crop->scale[0] <= crop->scale[1] && crop->scale[1] <= 1 &&
           crop->ratio[0] > 0 && crop->ratio[0] <= crop->ratio[1] && crop->ratio[1] < 1e6;
}

int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    if (!out || !jpeg_crop_ok(crop, channels))
        return sc__seterr(err, SC_EINVAL, "a JPEG decode needs an output of 1 or 3 channels and "
                          "a size, a scale range within (0, 1] and a positive ratio range");
    if (!j || !src || n > ULONG_MAX)
        return sc__seterr(err, SC_EINVAL, "sc__jpeg_decode_crop: no decoder or no image");
    const unsigned char *b = src; /* a JPEG (it starts so) whose end is missing */
    if (n >= 2 && b[0] == 0xFF && b[1] == 0xD8 && !jpeg_has_end(b, n))
        return sc__seterr(err, SC_EFORMAT, "a damaged JPEG image: no end-of-image marker in "
                          "its last KiB (truncated?)");
    jpeg_job job = {.crop = crop, .seed = seed, .ch = channels};
    const char *why = jpeg_run(j, src, n, &job, err);
    if (why)
        return sc__seterr(err, SC_EFORMAT, "%s: %s", job.decoding ? "a damaged JPEG image"
                          : "not a JPEG image libjpeg-turbo can read", why);
    int rc = job.rc != SC_OK ? job.rc : jpeg_tables(j, crop->width, crop->height, channels, err);
    if (rc != SC_OK)
        return rc;
    double fx = (double)job.sw / job.W, fy = (double)job.sh / job.H;
    jpeg_axis(j->at, j->wt, crop->width, job.r.x * fx - job.x0, job.r.w * fx,
              (int)(job.end - job.x0), job.r.flip);
    jpeg_axis(j->at + crop->width, j->wt + crop->width, crop->height, job.r.y * fy - job.y0,
              job.r.h * fy, (int)(job.y1 - job.y0), 0);
    jpeg_resample(j, (int)(job.end - job.x0), (int)job.w, channels, crop, out);
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
