/*
 * resample.c - the crop, its scale and its resample (see resample.h).
 *
 * The resample is Pillow's bilinear resize of the cropped image, as
 * torchvision crops then resizes a PIL image: a triangle filter whose
 * support is widened by the scale when shrinking, its weights clipped to
 * the crop and normalized, in Pillow's fixed point (22 bits), the
 * horizontal pass first, rounded to 8 bits, then the vertical one.  At
 * full scale it is Pillow's to the bit; at a reduced scale the decoder
 * keeps RESAMPLE_KEEP times the output's pixels, so that the filter,
 * not the IDCT, does most of the shrink.
 */
#include "resample.h"

#include <math.h>
#include <stdlib.h>

#include "hash.h"
#include "mem.h"

/* Pillow's PRECISION_BITS for 8-bit images: weights in 2^-22, sums of 8-bit values fit 32 bits. */
#define RESAMPLE_BITS 22

/*
 * The least shrink left to the filter after a reduced-scale decode: the
 * crop at the chosen scale keeps this many times the output's pixels on
 * each axis.  The scaled IDCT is a filter too, not Pillow's; measured on
 * photographs against PIL (docs/benchmarks.md), the worst per-image mean
 * difference at outputs of 32 was 3.0 levels at 2, 1.7 at 4, 0.7 at 8 on
 * desktop backgrounds; the suite's corpus (tests/photos) has a tone-mapping
 * mask 1.54 off at 8 (a 6/8-scale IDCT, output 64) and none above 1 at 12.
 */
#ifndef RESAMPLE_KEEP
#define RESAMPLE_KEEP 12.0
#endif

struct sc__resampler {
    int32_t *at;   /* per output column then row: its window's first source pixel */
    int32_t *wt;   /* the windows' weights: kx a column, then ky a row, in 2^-22 */
    uint8_t *mid;  /* the horizontal pass: the rows the vertical reads, ch planes of width each */
    int32_t *acc;  /* one output row's sums */
    size_t at_cap, wt_cap, mid_cap, acc_cap; /* their bytes */
};

sc__crop sc__crop_default(uint32_t w, uint32_t h)
{
    return (sc__crop){w, h, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, 1, 3, 0};
}

static double resample_uniform(sc__rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(sc__rng_next(r) >> 11) * 0x1.0p-53;
}

/*
 * torchvision's RandomResizedCrop.get_params, drawn from seed: up to ten
 * tries at an area share and a log-uniform aspect ratio that fit, else the
 * centre crop at the nearest allowed ratio.  Then the flip.
 */
sc__rect sc__crop_draw(const sc__crop *c, uint32_t W, uint32_t H, uint64_t seed)
{
    sc__rng r;
    sc__rng_init(&r, seed);
    double area = (double)W * H, lo = log(c->ratio[0]), hi = log(c->ratio[1]);
    /* The whole area at one ratio is the centre crop, not a draw (decode-once's
       square): a draw would place a nearly square image's square at random. */
    int fixed = c->scale[0] == 1.0 && c->scale[1] == 1.0 && c->ratio[0] == c->ratio[1];
    for (int t = 0; t < 10 && !fixed; t++) {
        double target = area * resample_uniform(&r, c->scale[0], c->scale[1]);
        double ar = exp(resample_uniform(&r, lo, hi));
        double w = round(sqrt(target * ar)), h = round(sqrt(target / ar));
        if (w >= 1 && h >= 1 && w <= W && h <= H) {
            double x = (double)sc__rng_below(&r, (uint64_t)(W - w) + 1);
            double y = (double)sc__rng_below(&r, (uint64_t)(H - h) + 1);
            return (sc__rect){x, y, w, h, c->flip && (sc__rng_next(&r) & 1)};
        }
    }
    double ir = (double)W / H, w = W, h = H;
    if (ir < c->ratio[0])
        h = round(w / c->ratio[0]);
    else if (ir > c->ratio[1])
        w = round(h * c->ratio[1]);
    return (sc__rect){floor((W - w) / 2), floor((H - h) / 2), w, h,
                       c->flip && (sc__rng_next(&r) & 1)};
}

/* The smallest scale at which the crop keeps RESAMPLE_KEEP times the output's pixels. */
static void resample_scale(const sc__rect *r, const sc__crop *c, const int (*scales)[2], int n,
                           sc__region *g)
{
    g->num = g->denom = 1;
    for (int i = 0; i < n; i++) {
        double s = (double)scales[i][0] / scales[i][1];
        if (s <= 1.0 && s < (double)g->num / g->denom && r->w * s >= RESAMPLE_KEEP * c->width &&
            r->h * s >= RESAMPLE_KEEP * c->height)
            g->num = scales[i][0], g->denom = scales[i][1];
    }
}

/*
 * One axis of the crop at the decoded scale: the crop is [a, a + span) in
 * the scaled image's pixels (of len), its pixels those whose centres it
 * holds, [lo, hi) (at least one; at full scale exactly the crop's), as
 * Pillow reads only the cropped image's.  Positions are kept from
 * base = floor(a), so that at full scale the centres are Pillow's to the
 * bit.
 */
typedef struct resample_axis {
    double base, frac, scale, support, ss; /* a = base + frac; scale: of the crop per output */
    int32_t lo, hi;                        /* from base */
    uint32_t n;                            /* outputs */
} resample_axis;

static resample_axis resample_axis_of(double a, double span, uint32_t len, uint32_t n)
{
    resample_axis ax = {.base = floor(a), .n = n};
    ax.frac = a - ax.base;
    double lo = ceil(a - 0.5), hi = floor(a + span - 0.5) + 1;
    lo = lo < 0 ? 0 : lo > (double)len - 1 ? (double)len - 1 : lo;
    hi = hi > len ? len : hi <= lo ? lo + 1 : hi;
    ax.lo = (int32_t)(lo - ax.base), ax.hi = (int32_t)(hi - ax.base);
    ax.scale = span / n;
    double fs = ax.scale < 1.0 ? 1.0 : ax.scale; /* widened when shrinking */
    ax.support = fs, ax.ss = 1.0 / fs;        /* the triangle's half-width is 1 */
    return ax;
}

/* Pillow's window for output o: source pixels [*x0, *x1) (from base) around its centre. */
static double resample_window(const resample_axis *ax, uint32_t o, int32_t *x0, int32_t *x1)
{
    double c = ax->frac + (o + 0.5) * ax->scale;
    double l = floor(c - ax->support + 0.5), h = floor(c + ax->support + 0.5);
    *x0 = l < ax->lo ? ax->lo : (int32_t)l;
    *x1 = h > ax->hi ? ax->hi : (int32_t)h;
    return c;
}

/* Pillow's bilinear filter: a triangle of half-width 1. */
static double resample_triangle(double x)
{
    x = x < 0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* The most taps any output of the axis has: every window is padded to it. */
static int32_t resample_taps(const resample_axis *ax)
{
    int32_t k = 1, x0, x1;
    for (uint32_t o = 0; o < ax->n; o++) {
        resample_window(ax, o, &x0, &x1);
        k = x1 - x0 > k ? x1 - x0 : k;
    }
    return k;
}

/*
 * Pillow's precompute_coeffs then normalize_coeffs_8bpc: for each output
 * (mirrored when flip) the first of its k source pixels, counted from
 * `from` (the first pixel the caller holds), and their weights: the
 * triangle at each pixel's centre, normalized over the window, in 2^-22.
 * A window shorter than k is moved left within [lo, hi) and padded with
 * zeros, so that every output reads k pixels inside the crop.
 */
static void resample_weights(const resample_axis *ax, int32_t k, int32_t from, int flip,
                             int32_t *at, int32_t *wt)
{
    for (uint32_t o = 0; o < ax->n; o++) {
        int32_t x0, x1;
        double c = resample_window(ax, o, &x0, &x1), sum = 0;
        for (int32_t x = x0; x < x1; x++)
            sum += resample_triangle((x - c + 0.5) * ax->ss);
        uint32_t to = flip ? ax->n - 1 - o : o;
        int32_t start = x0 < ax->hi - k ? x0 : ax->hi - k, *t = wt + (size_t)to * k;
        at[to] = start + (int32_t)(ax->base - from);
        for (int32_t x = start; x < start + k; x++) {
            double v = x >= x0 && x < x1 && sum != 0.0
                           ? resample_triangle((x - c + 0.5) * ax->ss) / sum : 0.0;
            t[x - start] = (int32_t)(0.5 + v * (1 << RESAMPLE_BITS));
        }
    }
}

void sc__resample_plan(const sc__rect *r, const sc__crop *c, uint32_t W, uint32_t H,
                       const int (*scales)[2], int n, sc__region *g)
{
    resample_scale(r, c, scales, n, g);
    g->sw = (uint32_t)(((uint64_t)W * g->num + g->denom - 1) / g->denom);
    g->sh = (uint32_t)(((uint64_t)H * g->num + g->denom - 1) / g->denom);
    double fx = (double)g->sw / W, fy = (double)g->sh / H;
    resample_axis x = resample_axis_of(r->x * fx, r->w * fx, g->sw, c->width);
    resample_axis y = resample_axis_of(r->y * fy, r->h * fy, g->sh, c->height);
    /* the crop's pixels: every window lies in them */
    g->x0 = (uint32_t)(x.base + x.lo), g->x1 = (uint32_t)(x.base + x.hi);
    g->y0 = (uint32_t)(y.base + y.lo), g->y1 = (uint32_t)(y.base + y.hi);
}

/* v >> 22, clipped to 8 bits, as Pillow's clip8. */
static inline uint8_t resample_clip(int32_t v)
{
    v >>= RESAMPLE_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/*
 * The horizontal pass over source row `row` (ch channels interleaved):
 * each output column's k taps, into h: ch planes of width.
 */
static inline __attribute__((always_inline)) void
resample_across(const int32_t *restrict at, const int32_t *restrict wt, int32_t k,
                const uint8_t *restrict row, const int ch, uint32_t width, uint8_t *restrict h)
{
    for (uint32_t x = 0; x < width; x++) {
        const uint8_t *p = row + (size_t)at[x] * ch;
        const int32_t *w = wt + (size_t)x * k;
        int32_t s[3] = {1 << (RESAMPLE_BITS - 1), 1 << (RESAMPLE_BITS - 1),
                        1 << (RESAMPLE_BITS - 1)};
        for (int32_t t = 0; t < k; t++)
            for (int j = 0; j < ch; j++)
                s[j] += p[t * ch + j] * w[t];
        for (int j = 0; j < ch; j++)
            h[(size_t)j * width + x] = resample_clip(s[j]);
    }
}

/*
 * The vertical pass for one output plane row: k rows of the horizontal
 * pass (`rows` apart) weighted into o.  Loops over the row, which the
 * compiler vectorizes.
 */
static void resample_down(const uint8_t *restrict src, size_t rows, const int32_t *restrict w,
                          int32_t k, uint32_t width, int32_t *restrict acc, uint8_t *restrict o)
{
    for (uint32_t x = 0; x < width; x++)
        acc[x] = 1 << (RESAMPLE_BITS - 1);
    for (int32_t t = 0; t < k; t++) {
        const uint8_t *restrict p = src + (size_t)t * rows;
        int32_t wv = w[t];
        if (wv)
            for (uint32_t x = 0; x < width; x++)
                acc[x] += p[x] * wv;
    }
    for (uint32_t x = 0; x < width; x++)
        o[x] = resample_clip(acc[x]);
}

/* What one resample reads: its tables and the rows of its horizontal pass. */
typedef struct resample_job {
    int32_t kx, ky;   /* taps a column, a row */
    int32_t y0, y1;   /* source rows the vertical pass reads, from the buffer's first */
} resample_job;

/*
 * The horizontal pass over the rows the vertical reads, then the
 * vertical into planar out: ch a constant, so that the compiler unrolls
 * the channel loops.
 */
static inline __attribute__((always_inline)) void
resample_ch(const sc__resampler *rs, const resample_job *jb, const uint8_t *img, size_t stride,
            const int ch, const sc__crop *c, uint8_t *out)
{
    const uint32_t width = c->width;
    const size_t plane = (size_t)c->height * width, rows = (size_t)ch * width;
    for (int32_t y = jb->y0; y < jb->y1; y++) {
        const uint8_t *src = img + (size_t)y * stride * ch;
        uint8_t *h = rs->mid + (size_t)(y - jb->y0) * rows;
        if (jb->kx == 2) /* an enlargement's: unrolled */
            resample_across(rs->at, rs->wt, 2, src, ch, width, h);
        else
            resample_across(rs->at, rs->wt, jb->kx, src, ch, width, h);
    }
    const int32_t *ya = rs->at + width, *yw = rs->wt + (size_t)width * jb->kx;
    for (uint32_t y = 0; y < c->height; y++)
        for (int j = 0; j < ch; j++)
            resample_down(rs->mid + (size_t)(ya[y] - jb->y0) * rows + (size_t)j * width, rows,
                          yw + (size_t)y * jb->ky, jb->ky, width, rs->acc,
                          out + j * plane + (size_t)y * width);
}

/* Room for the tables, the horizontal pass and a row's sums. */
static int resample_room(sc__resampler *rs, const resample_job *jb, const sc__crop *c, int ch,
                         sc_error *err)
{
    size_t n = (size_t)c->width + c->height;
    size_t w = (size_t)c->width * jb->kx + (size_t)c->height * jb->ky;
    rs->at = sc__scratch(rs->at, &rs->at_cap, n * sizeof *rs->at);
    rs->wt = sc__scratch(rs->wt, &rs->wt_cap, w * sizeof *rs->wt);
    rs->mid = sc__scratch(rs->mid, &rs->mid_cap, (size_t)(jb->y1 - jb->y0) * ch * c->width);
    rs->acc = sc__scratch(rs->acc, &rs->acc_cap, (size_t)c->width * sizeof *rs->acc);
    return rs->at && rs->wt && rs->mid && rs->acc
               ? SC_OK
               : sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", c->width, c->height);
}

int sc__resampler_new(sc__resampler **out, sc_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? SC_OK : sc__seterr(err, SC_ENOMEM, "no memory for a resampler");
}

void sc__resampler_free(sc__resampler *rs)
{
    if (!rs)
        return;
    free(rs->at);
    free(rs->wt);
    free(rs->mid);
    free(rs->acc);
    free(rs);
}

int sc__resample(sc__resampler *rs, const uint8_t *img, size_t stride, uint32_t ox, uint32_t oy,
                 int ch, const sc__region *g, const sc__rect *r, uint32_t W, uint32_t H,
                 const sc__crop *c, uint8_t *out, sc_error *err)
{
    double fx = (double)g->sw / W, fy = (double)g->sh / H;
    resample_axis x = resample_axis_of(r->x * fx, r->w * fx, g->sw, c->width);
    resample_axis y = resample_axis_of(r->y * fy, r->h * fy, g->sh, c->height);
    resample_job jb = {.kx = resample_taps(&x), .ky = resample_taps(&y)};
    /* the rows the vertical pass reads: its windows lie in [lo, hi) */
    jb.y0 = (int32_t)(y.base - oy) + y.lo, jb.y1 = (int32_t)(y.base - oy) + y.hi;
    int rc = resample_room(rs, &jb, c, ch, err);
    if (rc != SC_OK)
        return rc;
    resample_weights(&x, jb.kx, (int32_t)ox, r->flip, rs->at, rs->wt);
    resample_weights(&y, jb.ky, (int32_t)oy, 0, rs->at + c->width,
                     rs->wt + (size_t)c->width * jb.kx);
    if (ch == 3)
        resample_ch(rs, &jb, img, stride, 3, c, out);
    else
        resample_ch(rs, &jb, img, stride, 1, c, out);
    return SC_OK;
}
