/*
 * resample.c - the crop, its scale and its resample (see resample.h).
 *
 * The resample is bilinear at the output's pixel centres within the crop,
 * as torchvision crops then resizes, in 8-bit fixed point.  It does not
 * widen its filter when shrinking: the reduced scale the decoder chose
 * keeps the shrink under 2x.
 */
#include "resample.h"

#include <math.h>
#include <stdlib.h>

#include "hash.h"
#include "mem.h"

struct sc__resampler {
    int32_t *at;   /* the source columns then rows: [w + h] */
    uint16_t *wt;  /* and their weights */
    uint16_t *mid; /* two source rows resampled across: [2 * channels * output width] */
    size_t at_cap, wt_cap, mid_cap; /* their bytes */
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
    for (int t = 0; t < 10; t++) {
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

/* The smallest scale at which the crop keeps the output's pixels. */
static void resample_scale(const sc__rect *r, const sc__crop *c, const int (*scales)[2], int n,
                           sc__region *g)
{
    g->num = g->denom = 1;
    for (int i = 0; i < n; i++) {
        double s = (double)scales[i][0] / scales[i][1];
        if (s <= 1.0 && s < (double)g->num / g->denom && r->w * s >= c->width &&
            r->h * s >= c->height)
            g->num = scales[i][0], g->denom = scales[i][1];
    }
}

void sc__resample_plan(const sc__rect *r, const sc__crop *c, uint32_t W, uint32_t H,
                       const int (*scales)[2], int n, sc__region *g)
{
    resample_scale(r, c, scales, n, g);
    g->sw = (uint32_t)(((uint64_t)W * g->num + g->denom - 1) / g->denom);
    g->sh = (uint32_t)(((uint64_t)H * g->num + g->denom - 1) / g->denom);
    double fx = (double)g->sw / W, fy = (double)g->sh / H;
    double xe = ceil((r->x + r->w) * fx) + 1, ye = ceil((r->y + r->h) * fy) + 1;
    g->x0 = (uint32_t)floor(r->x * fx);
    g->y0 = (uint32_t)floor(r->y * fy);
    g->x1 = xe < g->sw ? (uint32_t)xe : g->sw; /* and the one past each edge bilinear blends */
    g->y1 = ye < g->sh ? (uint32_t)ye : g->sh;
}

/*
 * For each of `n` outputs along one axis, the first of the two source
 * pixels it blends (of `len`) and the second's weight in 1/256ths: the crop
 * [x0, x0 + span) sampled at output pixel centres, mirrored when flip.
 */
static void resample_axis(int32_t *at, uint16_t *wt, uint32_t n, double x0, double span, int len,
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
resample_across(const sc__resampler *j, const unsigned char *restrict row, int sw, const int ch,
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
resample_ch(const sc__resampler *j, const unsigned char *img, int sw, size_t stride, const int ch,
            const sc__crop *c, uint8_t *out)
{
    const uint32_t width = c->width;
    const int32_t *ya = j->at + width;
    const uint16_t *yw = j->wt + width;
    size_t plane = (size_t)c->height * c->width, row = stride * ch;
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
            resample_across(j, img + (size_t)r0 * row, sw, ch, c->width, h[0]), held[0] = r0;
        if (held[1] != r1 && r1 != r0)
            resample_across(j, img + (size_t)r1 * row, sw, ch, c->width, h[1]), held[1] = r1;
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

/* Room for the resample's tables and two resampled rows of an output of w x h, ch channels. */
static int resample_tables(sc__resampler *j, uint32_t w, uint32_t h, int ch, sc_error *err)
{
    size_t n = (size_t)w + h;
    j->at = sc__scratch(j->at, &j->at_cap, n * sizeof *j->at);
    j->wt = sc__scratch(j->wt, &j->wt_cap, n * sizeof *j->wt);
    j->mid = sc__scratch(j->mid, &j->mid_cap, 2 * (size_t)ch * w * sizeof *j->mid);
    return j->at && j->wt && j->mid
               ? SC_OK
               : sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", w, h);
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
    free(rs);
}

int sc__resample(sc__resampler *rs, const uint8_t *img, size_t stride, uint32_t ox, uint32_t oy,
                 int ch, const sc__region *g, const sc__rect *r, uint32_t W, uint32_t H,
                 const sc__crop *c, uint8_t *out, sc_error *err)
{
    int rc = resample_tables(rs, c->width, c->height, ch, err);
    if (rc != SC_OK)
        return rc;
    double fx = (double)g->sw / W, fy = (double)g->sh / H;
    int sw = (int)(g->x1 - ox); /* the columns it may read: up to the region's end */
    resample_axis(rs->at, rs->wt, c->width, r->x * fx - ox, r->w * fx, sw, r->flip);
    resample_axis(rs->at + c->width, rs->wt + c->width, c->height, r->y * fy - oy, r->h * fy,
                  (int)(g->y1 - oy), 0);
    /* The channel count a constant, so that the compiler unrolls the inner loop. */
    if (ch == 3)
        resample_ch(rs, img, sw, stride, 3, c, out);
    else
        resample_ch(rs, img, sw, stride, 1, c, out);
    return SC_OK;
}
