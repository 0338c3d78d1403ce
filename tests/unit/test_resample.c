/*
 * test_resample.c - the crop's resample (runtime/codec/resample.c) is
 * torchvision's on a PIL image, img.crop(box).resize(size, BILINEAR):
 * Pillow's triangle filter widened by the scale when shrinking, its
 * weights clipped to the crop and normalized, within a level of Pillow's
 * (which rounds its horizontal pass to 8 bits before the vertical).
 * Checked on synthetic images against hand-computed weights (a 2:1 and a
 * 3.5:1 shrink of a ramp), against those weights computed in doubles (a
 * checkerboard, 3 channels, a flip, a crop at the image's edge), and,
 * rounded once, within 0.6 of the filter in real numbers over the
 * windows its vector code unrolls; and the plan keeps the filter's
 * pixels: a reduced scale leaves it 12x the output, and the region is the
 * crop's.
 */
#include <math.h>
#include <string.h>

#include "hash.h"
#include "resample.h"
#include "sc_test.h"

/* Pillow's weights for output o of n over a crop of `len` pixels, in doubles: into w, from *x0. */
static int ref_weights(int len, int n, int o, double *w, int *x0)
{
    double scale = (double)len / n, fs = scale < 1 ? 1 : scale, c = (o + 0.5) * scale, sum = 0;
    int lo = (int)floor(c - fs + 0.5), hi = (int)floor(c + fs + 0.5);
    lo = lo < 0 ? 0 : lo, hi = hi > len ? len : hi;
    for (int x = lo; x < hi; x++)
        sum += w[x - lo] = fmax(0, 1 - fabs((x - c + 0.5) / fs));
    for (int x = lo; x < hi; x++)
        w[x - lo] /= sum;
    *x0 = lo;
    return hi - lo;
}

/*
 * The filter in doubles over crop r of a W-wide image (ch channels,
 * interleaved) into ow x oh, planar: with `pillow`, the horizontal pass
 * rounded to 8 bits, as PIL resizes; without, nothing rounded (out in
 * doubles).
 */
static void filter(const uint8_t *img, int W, int ch, const sc__rect *r, int ow, int oh,
                   int pillow, double *out)
{
    int cw = (int)r->w, chh = (int)r->h, x0, y0;
    static double mid[3 * 640 * 640];
    double w[640];
    for (int y = 0; y < chh; y++) /* across, rounded to 8 bits, as Pillow's passes are */
        for (int o = 0; o < ow; o++) {
            int k = ref_weights(cw, ow, o, w, &x0);
            for (int j = 0; j < ch; j++) {
                double s = 0;
                for (int t = 0; t < k; t++)
                    s += w[t] * img[((size_t)(r->y + y) * W + (size_t)r->x + x0 + t) * ch + j];
                mid[((size_t)j * chh + y) * ow + o] = pillow ? floor(s + 0.5) : s;
            }
        }
    for (int o = 0; o < oh; o++) {
        int k = ref_weights(chh, oh, o, w, &y0);
        for (int j = 0; j < ch; j++)
            for (int x = 0; x < ow; x++) {
                double s = 0;
                for (int t = 0; t < k; t++)
                    s += w[t] * mid[((size_t)j * chh + y0 + t) * ow + x];
                int to = r->flip ? ow - 1 - x : x;
                out[((size_t)j * oh + o) * ow + to] = s;
            }
    }
}

/* As PIL resizes: the filter, both passes rounded to 8 bits. */
static void reference(const uint8_t *img, int W, int ch, const sc__rect *r, int ow, int oh,
                      uint8_t *out)
{
    static double d[3 * 64 * 64];
    filter(img, W, ch, r, ow, oh, 1, d);
    for (int i = 0; i < ch * ow * oh; i++)
        out[i] = (uint8_t)floor(d[i] + 0.5);
}

/* Each of got's n bytes within a level of want's. */
static void within_a_level(const uint8_t *got, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_in_range(got[i], want[i] > 0 ? want[i] - 1 : 0, want[i] < 255 ? want[i] + 1 : 255);
}

/* shardcache's resample of crop r of a W x H image at full scale (a decoder without reduced scales). */
static void resample(const uint8_t *img, uint32_t W, uint32_t H, int ch, const sc__rect *r,
                     uint32_t ow, uint32_t oh, uint8_t *out)
{
    sc__crop c = sc__crop_default(ow, oh);
    sc__region g;
    sc__resample_plan(r, &c, W, H, NULL, 0, &g);
    assert_int_equal(g.num, g.denom);
    sc__resampler *rs;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__resampler_new(&rs, &err), &err);
    SC_ASSERT_OK(sc__resample(rs, img, W, 0, 0, ch, &g, r, W, H, &c, out, &err), &err);
    sc__resampler_free(rs);
}

/* A ramp of 10 levels a column, two rows, shrunk 2:1 and 3.5:1: the weights worked by hand. */
static void test_ramp_by_hand(void **state)
{
    (void)state;
    uint8_t img[2 * 14], out[4 * 1];
    for (int x = 0; x < 14; x++)
        img[x] = img[14 + x] = (uint8_t)(10 * x);
    /* 8 -> 4, support 2: (3, 3, 1)/7 at the edges, (1, 3, 3, 1)/8 inside.  The 2-tap
       bilinear gives 5, 25, 45, 65. */
    sc__rect r = {0, 0, 8, 2, 0};
    resample(img, 14, 2, 1, &r, 4, 1, out);
    assert_memory_equal(out, ((uint8_t[]){7, 25, 45, 63}), 4); /* 50/7, 200/8, 360/8, 440/7 */
    /* 14 -> 4, support 3.5: (2.25, 3.25, 2.75, 1.75, 0.75)/10.75 for the first output,
       (0.75, 1.75, 2.75, 3.25, 2.25, 1.25, 0.25)/12.25 for the second, mirrored after. */
    r.w = 14;
    resample(img, 14, 2, 1, &r, 4, 1, out);
    assert_memory_equal(out, ((uint8_t[]){16, 48, 82, 114}), 4); /* 170/10.75, 582.5/12.25 */
}

/* A checkerboard, 3 channels (one coarser), shrunk 3.5:1 by 7:3, and its flip. */
static void test_checkerboard_and_flip(void **state)
{
    (void)state;
    enum { W = 28, H = 21, OW = 8, OH = 7 };
    static uint8_t img[W * H * 3], got[3 * OW * OH], want[3 * OW * OH];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = img + ((size_t)y * W + x) * 3;
            p[0] = (x + y) & 1 ? 220 : 30;
            p[1] = (x / 3 + y / 2) & 1 ? 200 : 10;
            p[2] = (uint8_t)(x * 9);
        }
    for (int flip = 0; flip < 2; flip++) {
        sc__rect r = {0, 0, W, H, flip};
        resample(img, W, H, 3, &r, OW, OH, got);
        reference(img, W, 3, &r, OW, OH, want);
        within_a_level(got, want, sizeof got);
    }
    for (int x = 0; x < OW; x++) /* the flip mirrors the ramp's plane */
        assert_in_range(got[2 * OW * OH + x], want[2 * OW * OH + x] - 1u,
                        want[2 * OW * OH + x] + 1u);
    assert_true(got[2 * OW * OH] > got[2 * OW * OH + OW - 1]);
}

/*
 * Crops at the image's edges read only the crop's pixels, as PIL's crop
 * leaves no others: a frame of 255 around them changes nothing.
 */
static void test_crop_at_the_edge(void **state)
{
    (void)state;
    enum { W = 24, H = 12 };
    static uint8_t img[W * H], got[6 * 4], want[6 * 4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            img[y * W + x] = x >= 9 && y >= 2 ? (uint8_t)(7 * x + 3 * y) : 255;
    sc__rect edges[] = {{9, 2, 15, 10, 0}, {9, 2, 15, 10, 1}, {12, 5, 9, 7, 0}};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        resample(img, W, H, 1, &edges[i], 6, 4, got);
        reference(img, W, 1, &edges[i], 6, 4, want);
        within_a_level(got, want, sizeof got);
        for (size_t k = 0; k < sizeof got; k++)
            assert_true(got[k] < 255);
    }
}

/*
 * Rounded once: on noise (where Pillow's rounding of its first pass moves
 * outputs by up to a level), every output within 0.6 of the filter in
 * real numbers, over shrinks whose windows are 2 to 10+ taps (the vector
 * code unrolls 2, 4, 6 and 8), an enlargement, crops whose rows are no
 * multiple of the vectors' 16 or 32 bytes, odd widths, flips, and 1 and 3
 * channels; and the portable C, SSE2 and AVX2 code (each the CPU has)
 * give the same bytes.
 */
static void test_rounded_once(void **state)
{
    (void)state;
    enum { W = 640, H = 480 };
    static uint8_t img[W * H * 3], got[3 * 96 * 80], first[3 * 96 * 80];
    static double want[3 * 96 * 80];
    sc__rng g;
    sc__rng_init(&g, 5);
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)sc__rng_below(&g, 256);
    const struct { sc__rect r; uint32_t ow, oh; } cases[] = {
        {{3, 5, 101, 77, 0}, 96, 80},  {{3, 5, 101, 77, 1}, 50, 40},
        {{17, 2, 193, 161, 0}, 64, 64}, {{0, 0, 333, 250, 1}, 81, 62},
        {{40, 30, 600, 450, 0}, 71, 53}, {{9, 9, 31, 23, 1}, 96, 80},
        {{1, 1, 250, 200, 1}, 93, 70},
    };
#if !defined(SC_TESTING) /* a release build: its own code only (the forcing hook is testing's) */
    int levels = 1;
#define sc__resample_force(level) ((void)(level))
#elif defined(__x86_64__) && defined(__GNUC__)
    int levels = __builtin_cpu_supports("avx2") ? 3 : 2;
#else
    int levels = 1;
#endif
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int ch = 1; ch <= 3; ch += 2)
            for (int level = 0; level < levels; level++) {
                size_t n = (size_t)ch * cases[i].ow * cases[i].oh;
                sc__resample_force(level);
                resample(img, W, H, ch, &cases[i].r, cases[i].ow, cases[i].oh, got);
                sc__resample_force(-1);
                if (level == 0) {
                    memcpy(first, got, n);
                    filter(img, W, ch, &cases[i].r, (int)cases[i].ow, (int)cases[i].oh, 0,
                           want);
                }
                for (size_t k = 0; k < n; k++)
                    if (fabs(got[k] - want[k]) > 0.6 || got[k] != first[k])
                        fail_msg("case %zu, %d channels, code %d, value %zu: %u (portable C %u), "
                                 "the filter %.3f", i, ch, level, k, got[k], first[k], want[k]);
            }
}

/*
 * The plan: the scale leaves the filter at least 12x the output's pixels
 * (the IDCT alone shrinking to the output differs from PIL by levels),
 * and the region is the crop's pixels at that scale, which every window
 * lies in.
 */
static void test_plan_keeps_the_filter(void **state)
{
    (void)state;
    const int scales[8][2] = {{1, 8}, {2, 8}, {3, 8}, {4, 8}, {5, 8}, {6, 8}, {7, 8}, {8, 8}};
    sc__crop c = sc__crop_default(32, 32);
    sc__rect r = {0, 0, 1024, 1024, 0};
    sc__region g;
    sc__resample_plan(&r, &c, 1024, 1024, scales, 8, &g);
    assert_int_equal(g.num * 8, 3 * g.denom); /* 384 = 12 x 32 pixels; 2/8 leaves 256 */
    assert_int_equal(g.x1 - g.x0, 384);
    r = (sc__rect){100, 36, 800, 700, 0}; /* 5/8: 437.5 rows; 4/8 leaves 350 */
    sc__resample_plan(&r, &c, 1024, 1024, scales, 8, &g);
    assert_int_equal(g.num * 8, 5 * g.denom);
    assert_int_equal(g.sw, 640);
    assert_int_equal(g.x0, 62), assert_int_equal(g.x1, 563); /* [62.5, 562.5]: the centres in it */
    assert_int_equal(g.y0, 22), assert_int_equal(g.y1, 460); /* [22.5, 460] */
    c = sc__crop_default(224, 224);
    sc__resample_plan(&r, &c, 1024, 1024, scales, 8, &g);
    assert_int_equal(g.num, g.denom); /* no scale keeps 12 x 224 */
    assert_int_equal(g.x0, 100), assert_int_equal(g.x1, 900);
    assert_int_equal(g.y0, 36), assert_int_equal(g.y1, 736);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ramp_by_hand),
        cmocka_unit_test(test_checkerboard_and_flip),
        cmocka_unit_test(test_crop_at_the_edge),
        cmocka_unit_test(test_rounded_once),
        cmocka_unit_test(test_plan_keeps_the_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
