/*
 * resample.c - the crop, its scale and its resample (see resample.h).
 *
 * The resample is Pillow's bilinear resize of the cropped image, as
 * torchvision crops then resizes a PIL image: a triangle filter whose
 * support is widened by the scale when shrinking, its weights clipped to
 * the crop and normalized.  Pillow's weights, not its arithmetic: the
 * vertical pass first (over the crop's columns, one output row at a time,
 * so only 224 rows of a 224 crop reach the horizontal pass), both passes
 * in SSE2 or AVX2 (pmaddwd; portable C elsewhere, the same bytes) on
 * 14-bit weights, rounded once at the output (within 0.6 of the filter in
 * real numbers; Pillow rounds each pass to 8 bits, and the two differ by
 * a level at most).  At a reduced scale the decoder
 * keeps RESAMPLE_KEEP times the output's pixels, so that the filter, not
 * the IDCT, does most of the shrink.
 */
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
/* x86-64: SSE2 always, AVX2 where the CPU has it (chosen at run time) */
#if defined(__x86_64__) && defined(__GNUC__)
#define RESAMPLE_X86 1
#include <immintrin.h>
#endif

#include "hash.h"
#include "mem.h"

/*
 * The fixed point: weights in 2^-14, so that SSE2's pmaddwd multiplies
 * pixels by two taps at once (int16 pairs into int32), each window's
 * summing to exactly 2^14; the vertical pass's sums kept to 2^-7 of a
 * level in int16 (255 << 7 fits), so that only the output is rounded to
 * 8 bits (Pillow rounds after each pass: the two differ by a level at
 * most, at 0.1-0.3 of a pixel's, see docs/benchmarks.md).
 */
#define RESAMPLE_WBITS 14
#define RESAMPLE_FBITS 7
#define RESAMPLE_ONE (1 << RESAMPLE_WBITS)

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
    int32_t *at;        /* per output column then row: its window's first source pixel */
    int16_t *wt;        /* the windows' weights: kx a column, then ky a row (both even) */
    int16_t *mid;       /* one output row's vertical pass: the crop's columns, ch values each */
    const uint8_t **rp; /* the ky source rows it reads */
#ifdef RESAMPLE_X86
    __m128i *wq;        /* wt's pairs of taps, each pair 4 times: pmaddwd's operand */
#endif
    size_t at_cap, wt_cap, mid_cap, rp_cap, wq_cap; /* their bytes */
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
 * Pillow's precompute_coeffs: for each output (mirrored when flip) the
 * first of its k source pixels, counted from `from` (the first pixel the
 * caller holds), and their weights: the triangle at each pixel's centre,
 * normalized over the window, in 2^-14, the rounding's remainder given to
 * the largest so that they sum to 2^14 (no sum then leaves 8 bits).  A
 * window shorter than k is moved left within [lo, hi) and padded with
 * zeros, so that every output reads k pixels inside the crop; `pad`
 * zeros more follow (to an even count), their pixel possibly hi's.
 */
static void resample_weights(const resample_axis *ax, int32_t k, int32_t pad, int32_t from,
                             int flip, int32_t *at, int16_t *wt)
{
    for (uint32_t o = 0; o < ax->n; o++) {
        int32_t x0, x1, big = 0, total = 0;
        double c = resample_window(ax, o, &x0, &x1), sum = 0;
        for (int32_t x = x0; x < x1; x++)
            sum += resample_triangle((x - c + 0.5) * ax->ss);
        uint32_t to = flip ? ax->n - 1 - o : o;
        int32_t start = x0 < ax->hi - k ? x0 : ax->hi - k;
        int16_t *t = wt + (size_t)to * (k + pad);
        at[to] = start + (int32_t)(ax->base - from);
        for (int32_t i = 0; i < k + pad; i++) {
            int32_t x = start + i;
            double v = x >= x0 && x < x1 && sum != 0.0
                           ? resample_triangle((x - c + 0.5) * ax->ss) / sum : 0.0;
            t[i] = (int16_t)(0.5 + v * RESAMPLE_ONE);
            total += t[i];
            big = t[i] > t[big] ? i : big;
        }
        t[big] = (int16_t)(t[big] + RESAMPLE_ONE - total);
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

/* The code the passes run: 0 portable C, 1 SSE2, 2 AVX2 (x86-64: the best the CPU has). */
#ifdef SC_TESTING
static int resample_forced = -1;

void sc__resample_force(int level)
{
    resample_forced = level;
}
#endif

static int resample_level(void)
{
#ifdef SC_TESTING
    if (resample_forced >= 0)
        return resample_forced;
#endif
#ifdef RESAMPLE_X86
    return __builtin_cpu_supports("avx2") ? 2 : 1;
#else
    return 0;
#endif
}

#ifdef RESAMPLE_X86
/* The vertical pass's 16 or 32 sums, in 2^-14, to 2^-7 of a level. */
#define RESAMPLE_MID(v) _mm_srai_epi32(v, RESAMPLE_WBITS - RESAMPLE_FBITS)
#define RESAMPLE_MID256(v) _mm256_srai_epi32(v, RESAMPLE_WBITS - RESAMPLE_FBITS)

/*
 * resample_down's values [i, n) 16 at a time: two rows' bytes interleaved
 * into int16 pairs against their two weights (pmaddwd).  The first not
 * done.
 */
static size_t resample_down_sse2(const uint8_t *const *rp, const __m128i *wq, int32_t k,
                                 size_t i, size_t n, int16_t *restrict mid)
{
    const __m128i z = _mm_setzero_si128();
    const __m128i r = _mm_set1_epi32(1 << (RESAMPLE_WBITS - RESAMPLE_FBITS - 1));
    for (; i + 16 <= n; i += 16) {
        __m128i s0 = r, s1 = r, s2 = r, s3 = r;
        for (int32_t t = 0; t < k; t += 2) {
            __m128i a = _mm_loadu_si128((const __m128i *)(rp[t] + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(rp[t + 1] + i));
            __m128i lo = _mm_unpacklo_epi8(a, b), hi = _mm_unpackhi_epi8(a, b);
            s0 = _mm_add_epi32(s0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, z), wq[t / 2]));
            s1 = _mm_add_epi32(s1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, z), wq[t / 2]));
            s2 = _mm_add_epi32(s2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, z), wq[t / 2]));
            s3 = _mm_add_epi32(s3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, z), wq[t / 2]));
        }
        _mm_storeu_si128((__m128i *)(mid + i),
                         _mm_packs_epi32(RESAMPLE_MID(s0), RESAMPLE_MID(s1)));
        _mm_storeu_si128((__m128i *)(mid + i + 8),
                         _mm_packs_epi32(RESAMPLE_MID(s2), RESAMPLE_MID(s3)));
    }
    return i;
}

/*
 * The same 32 at a time: AVX2 unpacks and packs within each 128-bit
 * lane, so sums hold values 0-7 and 16-23, 8-15 and 24-31, put back in
 * order by the two stores' lane permutes.
 */
__attribute__((target("avx2"))) static size_t
resample_down_avx2(const uint8_t *const *rp, const __m128i *wq, int32_t k, size_t n,
                   int16_t *restrict mid)
{
    const __m256i z = _mm256_setzero_si256();
    const __m256i r = _mm256_set1_epi32(1 << (RESAMPLE_WBITS - RESAMPLE_FBITS - 1));
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i s0 = r, s1 = r, s2 = r, s3 = r;
        for (int32_t t = 0; t < k; t += 2) {
            __m256i wp = _mm256_broadcastsi128_si256(wq[t / 2]);
            __m256i a = _mm256_loadu_si256((const __m256i *)(rp[t] + i));
            __m256i b = _mm256_loadu_si256((const __m256i *)(rp[t + 1] + i));
            __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, z), wp));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, z), wp));
            s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, z), wp));
            s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, z), wp));
        }
        __m256i p0 = _mm256_packs_epi32(RESAMPLE_MID256(s0), RESAMPLE_MID256(s1));
        __m256i p1 = _mm256_packs_epi32(RESAMPLE_MID256(s2), RESAMPLE_MID256(s3));
        _mm256_storeu_si256((__m256i *)(mid + i), _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_storeu_si256((__m256i *)(mid + i + 16), _mm256_permute2x128_si256(p0, p1, 0x31));
    }
    return i;
}
#endif

/*
 * The vertical pass of one output row: the k source rows rp[] (k even,
 * the last padded with a zero weight), n values each, weighted by w (wq:
 * its pairs for pmaddwd) into mid in 2^-7 of a level, with the code of
 * `level`; what the vector code leaves, in C.
 */
static void resample_down(const uint8_t *const *rp, const int16_t *w, const void *wq, int32_t k,
                          size_t n, int16_t *restrict mid, int level)
{
    size_t i = 0;
#ifdef RESAMPLE_X86
    if (level >= 2)
        i = resample_down_avx2(rp, wq, k, n, mid);
    if (level >= 1)
        i = resample_down_sse2(rp, wq, k, i, n, mid);
#else
    (void)wq, (void)level;
#endif
    for (; i < n; i++) {
        int32_t s = 1 << (RESAMPLE_WBITS - RESAMPLE_FBITS - 1);
        for (int32_t t = 0; t < k; t++)
            s += rp[t][i] * w[t];
        mid[i] = (int16_t)(s >> (RESAMPLE_WBITS - RESAMPLE_FBITS));
    }
}

/* A sum of the horizontal pass, in 2^-21 of a level, to 8 bits (never negative nor over). */
#define RESAMPLE_OUT(s) ((uint8_t)(((s) + (1 << (RESAMPLE_WBITS + RESAMPLE_FBITS - 1))) >> \
                                   (RESAMPLE_WBITS + RESAMPLE_FBITS)))

#ifdef RESAMPLE_X86
/*
 * One output pixel of 3 channels from k taps (even) at p, weights wq
 * (its pairs of taps at wq[0], wq[2]...: see resample_xq): a pair of
 * pixels' int16 values interleaved (r0 r1 g0 g1 b0 b1) against the
 * pair's weights, into the sums r g b and an unused lane.  Reads up to 2
 * values past the window's last pixel.  k a constant where the caller
 * unrolls it.
 */
static inline __attribute__((always_inline)) __m128i
resample_pixel3(const int16_t *p, const __m128i *wq, int32_t k)
{
    __m128i s = _mm_set1_epi32(1 << (RESAMPLE_WBITS + RESAMPLE_FBITS - 1));
    for (int32_t t = 0; t < k; t += 2) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 3 * t));
        s = _mm_add_epi32(s, _mm_madd_epi16(_mm_unpacklo_epi16(v, _mm_srli_si128(v, 6)),
                                            wq[t]));
    }
    return _mm_srai_epi32(s, RESAMPLE_WBITS + RESAMPLE_FBITS);
}

/* The weights of output x, k taps, in the x table: pixel pairs' pairs of taps interleaved. */
static inline const __m128i *resample_xq(const __m128i *wq, uint32_t x, int32_t k)
{
    return wq + (size_t)(x >> 1) * (size_t)k + (x & 1);
}

/* 4 output pixels' sums (r g b -) transposed into their 3 planes' bytes at o. */
static inline __attribute__((always_inline)) void
resample_store4(__m128i s0, __m128i s1, __m128i s2, __m128i s3, size_t plane, uint8_t *o)
{
    __m128i t0 = _mm_unpacklo_epi32(s0, s1), t1 = _mm_unpacklo_epi32(s2, s3);
    __m128i b = _mm_unpacklo_epi64(_mm_unpackhi_epi32(s0, s1), _mm_unpackhi_epi32(s2, s3));
    __m128i v = _mm_packus_epi16(_mm_packs_epi32(_mm_unpacklo_epi64(t0, t1),
                                                 _mm_unpackhi_epi64(t0, t1)),
                                 _mm_packs_epi32(b, b));
    uint32_t r = (uint32_t)_mm_cvtsi128_si32(v);
    uint32_t g = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 4));
    uint32_t bl = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 8));
    memcpy(o, &r, 4), memcpy(o + plane, &g, 4), memcpy(o + 2 * plane, &bl, 4);
}

/* The row's outputs [x, width) of 3 channels, k taps each, one by one. */
static inline __attribute__((always_inline)) void
resample_tail3(const int32_t *restrict at, const __m128i *wq, int32_t k, uint32_t x,
               const int16_t *restrict mid, uint32_t width, size_t plane, uint8_t *restrict o)
{
    for (; x < width; x++) {
        __m128i s = resample_pixel3(mid + at[x] * 3, resample_xq(wq, x, k), k);
        uint32_t v = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(s, s), s));
        o[x] = (uint8_t)v, o[plane + x] = (uint8_t)(v >> 8), o[2 * plane + x] = (uint8_t)(v >> 16);
    }
}

/* The row's outputs of 3 channels, k taps each (SSE2): 4 at a time, then one by one. */
static inline __attribute__((always_inline)) void
resample_across3(const int32_t *restrict at, const __m128i *wq, int32_t k,
                 const int16_t *restrict mid, uint32_t width, size_t plane, uint8_t *restrict o)
{
    uint32_t x = 0;
    for (; x + 4 <= width; x += 4)
        resample_store4(resample_pixel3(mid + at[x] * 3, resample_xq(wq, x, k), k),
                        resample_pixel3(mid + at[x + 1] * 3, resample_xq(wq, x + 1, k), k),
                        resample_pixel3(mid + at[x + 2] * 3, resample_xq(wq, x + 2, k), k),
                        resample_pixel3(mid + at[x + 3] * 3, resample_xq(wq, x + 3, k), k),
                        plane, o + x);
    resample_tail3(at, wq, k, x, mid, width, plane, o);
}

/*
 * Outputs x and x + 1 (x even) as resample_pixel3, one in each 128-bit
 * lane: their pairs of taps lie side by side in the x table.
 */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i
resample_pixel3x2(const int16_t *p0, const int16_t *p1, const __m128i *wq, int32_t k)
{
    __m256i s = _mm256_set1_epi32(1 << (RESAMPLE_WBITS + RESAMPLE_FBITS - 1));
    for (int32_t t = 0; t < k; t += 2) {
        __m256i v = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + 3 * t))),
            _mm_loadu_si128((const __m128i *)(p1 + 3 * t)), 1);
        __m256i w = _mm256_loadu_si256((const __m256i *)(wq + t));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(
                                    _mm256_unpacklo_epi16(v, _mm256_srli_si256(v, 6)), w));
    }
    return _mm256_srai_epi32(s, RESAMPLE_WBITS + RESAMPLE_FBITS);
}

/* resample_across3 in AVX2: 4 outputs at a time, two to a register. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
resample_across3_avx2(const int32_t *restrict at, const __m128i *wq, int32_t k,
                      const int16_t *restrict mid, uint32_t width, size_t plane,
                      uint8_t *restrict o)
{
    uint32_t x = 0;
    for (; x + 4 <= width; x += 4) {
        __m256i a = resample_pixel3x2(mid + at[x] * 3, mid + at[x + 1] * 3,
                                      resample_xq(wq, x, k), k);
        __m256i b = resample_pixel3x2(mid + at[x + 2] * 3, mid + at[x + 3] * 3,
                                      resample_xq(wq, x + 2, k), k);
        resample_store4(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1),
                        _mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1), plane, o + x);
    }
    resample_tail3(at, wq, k, x, mid, width, plane, o);
}

/* The horizontal pass of 3 channels in AVX2, the common windows unrolled. */
__attribute__((target("avx2"))) static void
resample_across_avx2(const int32_t *restrict at, const __m128i *q, int32_t k,
                     const int16_t *restrict mid, uint32_t width, size_t plane,
                     uint8_t *restrict o)
{
    switch (k) {
    case 2: resample_across3_avx2(at, q, 2, mid, width, plane, o); break;
    case 4: resample_across3_avx2(at, q, 4, mid, width, plane, o); break;
    case 6: resample_across3_avx2(at, q, 6, mid, width, plane, o); break;
    case 8: resample_across3_avx2(at, q, 8, mid, width, plane, o); break;
    default: resample_across3_avx2(at, q, k, mid, width, plane, o);
    }
}
#endif

/*
 * The horizontal pass of one output row: each column's k taps (even) of
 * mid (ch values a pixel) into the ch planes' row o (`plane` apart).
 */
static void resample_across(const int32_t *restrict at, const int16_t *restrict wt,
                            const void *wq, int32_t k, const int16_t *restrict mid, int ch,
                            uint32_t width, size_t plane, uint8_t *restrict o, int level)
{
#ifdef RESAMPLE_X86
    const __m128i *q = wq;
    if (ch == 3 && level >= 2) {
        resample_across_avx2(at, q, k, mid, width, plane, o);
        return;
    }
    if (ch == 3 && level >= 1) {
        switch (k) { /* the common windows unrolled: shrinks of up to 3.5x */
        case 2: resample_across3(at, q, 2, mid, width, plane, o); break;
        case 4: resample_across3(at, q, 4, mid, width, plane, o); break;
        case 6: resample_across3(at, q, 6, mid, width, plane, o); break;
        case 8: resample_across3(at, q, 8, mid, width, plane, o); break;
        default: resample_across3(at, q, k, mid, width, plane, o);
        }
        return;
    }
#else
    (void)wq, (void)level;
#endif
    for (uint32_t x = 0; x < width; x++) {
        const int16_t *p = mid + (size_t)at[x] * ch, *w = wt + (size_t)x * k;
        for (int j = 0; j < ch; j++) {
            int32_t s = 0;
            for (int32_t t = 0; t < k; t++)
                s += p[t * ch + j] * w[t];
            o[(size_t)j * plane + x] = RESAMPLE_OUT(s);
        }
    }
}

/* What one resample reads: its tables' taps, and the crop's columns and rows. */
typedef struct resample_job {
    int32_t kx, ky;   /* taps a column, a row: even */
    int32_t x0, cols; /* the crop's first column, from the buffer's first, and its columns */
    int32_t y1;       /* the rows the vertical pass reads end there, from the buffer's first */
} resample_job;

#ifdef RESAMPLE_X86
/* The x table's entries: outputs in pairs (the last padded), k / 2 pairs of taps each. */
static size_t resample_xq_size(uint32_t width, int32_t k)
{
    return (size_t)(width + 1) / 2 * (size_t)k;
}

/* One pair of taps, t and t + 1 of w, 4 times: pmaddwd's operand. */
static __m128i resample_pair(const int16_t *w)
{
    return _mm_set1_epi32((int32_t)((uint32_t)(uint16_t)w[0] | (uint32_t)(uint16_t)w[1] << 16));
}

/* wt's pairs of taps as the passes read them: the x table (resample_xq), then the y rows'. */
static void resample_pairs(sc__resampler *rs, const sc__crop *c, const resample_job *jb)
{
    for (uint32_t x = 0; x < c->width; x++)
        for (int32_t t = 0; t < jb->kx; t += 2)
            ((__m128i *)resample_xq(rs->wq, x, jb->kx))[t] =
                resample_pair(rs->wt + (size_t)x * jb->kx + t);
    __m128i *yq = rs->wq + resample_xq_size(c->width, jb->kx);
    const int16_t *yw = rs->wt + (size_t)c->width * jb->kx;
    for (size_t i = 0; i < (size_t)c->height * jb->ky / 2; i++)
        yq[i] = resample_pair(yw + 2 * i);
}
#endif

/*
 * Each output row: the vertical pass over the crop's columns of its ky
 * source rows into rs->mid, then the horizontal into the planes' row.
 */
static void resample_rows(sc__resampler *rs, const resample_job *jb, const uint8_t *img,
                          size_t stride, int ch, const sc__crop *c, uint8_t *out)
{
    const uint32_t width = c->width;
    const size_t plane = (size_t)c->height * width, n = (size_t)jb->cols * ch;
    const int32_t *ya = rs->at + width;
    const int16_t *yw = rs->wt + (size_t)width * jb->kx;
    const void *xq = NULL, *yq = NULL;
    const int level = resample_level();
#ifdef RESAMPLE_X86
    xq = rs->wq, yq = rs->wq + resample_xq_size(width, jb->kx);
#endif
    for (uint32_t y = 0; y < c->height; y++) {
        for (int32_t t = 0; t < jb->ky; t++) { /* a padded tap's row may be past the crop */
            int32_t row = ya[y] + t < jb->y1 ? ya[y] + t : jb->y1 - 1;
            rs->rp[t] = img + ((size_t)row * stride + (size_t)jb->x0) * ch;
        }
        resample_down(rs->rp, yw + (size_t)y * jb->ky,
                      yq ? (const char *)yq + (size_t)y * jb->ky / 2 * 16 : NULL, jb->ky, n,
                      rs->mid, level);
        resample_across(rs->at, rs->wt, xq, jb->kx, rs->mid, ch, width, plane,
                        out + (size_t)y * width, level);
    }
}

/*
 * Room for the tables, the source rows and a row of the vertical pass:
 * the crop's columns, a padded tap's pixel after them and the 2 values
 * the horizontal pass reads past its last (zeros: a padded tap's weight
 * is 0, and its pixel must be a number).
 */
static int resample_room(sc__resampler *rs, const resample_job *jb, const sc__crop *c, int ch,
                         sc_error *err)
{
    size_t n = (size_t)c->width + c->height, pad = (size_t)ch + 8;
    size_t w = (size_t)c->width * jb->kx + (size_t)c->height * jb->ky;
    size_t mid = (size_t)jb->cols * ch;
    rs->at = sc__scratch(rs->at, &rs->at_cap, n * sizeof *rs->at);
    rs->wt = sc__scratch(rs->wt, &rs->wt_cap, w * sizeof *rs->wt);
    rs->mid = sc__scratch(rs->mid, &rs->mid_cap, (mid + pad) * sizeof *rs->mid);
    rs->rp = sc__scratch(rs->rp, &rs->rp_cap, (size_t)jb->ky * sizeof *rs->rp);
#ifdef RESAMPLE_X86
    size_t q = resample_xq_size(c->width, jb->kx) + (size_t)c->height * jb->ky / 2;
    rs->wq = sc__scratch(rs->wq, &rs->wq_cap, q * sizeof *rs->wq);
    if (!rs->wq)
        return sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", c->width, c->height);
#endif
    if (!rs->at || !rs->wt || !rs->mid || !rs->rp)
        return sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u crop", c->width, c->height);
    memset(rs->mid + mid, 0, pad * sizeof *rs->mid);
    return SC_OK;
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
    free(rs->rp);
#ifdef RESAMPLE_X86
    free(rs->wq);
#endif
    free(rs);
}

int sc__resample(sc__resampler *rs, const uint8_t *img, size_t stride, uint32_t ox, uint32_t oy,
                 int ch, const sc__region *g, const sc__rect *r, uint32_t W, uint32_t H,
                 const sc__crop *c, uint8_t *out, sc_error *err)
{
    double fx = (double)g->sw / W, fy = (double)g->sh / H;
    resample_axis x = resample_axis_of(r->x * fx, r->w * fx, g->sw, c->width);
    resample_axis y = resample_axis_of(r->y * fy, r->h * fy, g->sh, c->height);
    int32_t kx = resample_taps(&x), ky = resample_taps(&y);
    resample_job jb = {.kx = kx + (kx & 1), .ky = ky + (ky & 1), .cols = x.hi - x.lo};
    /* the vertical pass reads the crop's columns, its windows the rows [lo, hi) */
    jb.x0 = (int32_t)(x.base - ox) + x.lo, jb.y1 = (int32_t)(y.base - oy) + y.hi;
    int rc = resample_room(rs, &jb, c, ch, err);
    if (rc != SC_OK)
        return rc;
    resample_weights(&x, kx, kx & 1, (int32_t)(x.base + x.lo), r->flip, rs->at, rs->wt);
    resample_weights(&y, ky, ky & 1, (int32_t)oy, 0, rs->at + c->width,
                     rs->wt + (size_t)c->width * jb.kx);
#ifdef RESAMPLE_X86
    resample_pairs(rs, c, &jb);
#endif
    resample_rows(rs, &jb, img, stride, ch, c, out);
    return SC_OK;
}
