/*
 * test_augment.c - SC_AUGMENT's stages (runtime/storage/augment.c) against
 * expectations computed here by hand: a padded random crop is the image
 * shifted by the top and left that the documented draw (sc__rng, top then
 * left) gives, with the fill or the mirrored edge around it; a flip mirrors
 * on a uniform draw below p; normalize is ToTensor's /255 then (x - mean) /
 * std in float32 (or its float16 rounding); to_nchw / to_nhwc transpose; a
 * whole pipeline equals the stages run one after another on whole buffers;
 * and every bad spec is refused with its reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "hash.h"
#include "sc_test.h"

enum { C = 2, H = 4, W = 5 };

static sc__field image(int hwc, uint64_t c, uint64_t h, uint64_t w)
{
    sc__field f = {.name = "/images", .dtype = SC__DT_U8, .ndims = 3};
    uint64_t d[3] = {c, h, w}, e[3] = {h, w, c};
    memcpy(f.dims, hwc ? e : d, sizeof d);
    f.sample_bytes = c * h * w;
    return f;
}

/* Pixel (c, y, x) of the test image: every value distinct and nonzero. */
static uint8_t px(int c, int y, int x)
{
    return (uint8_t)(1 + c * 100 + y * 10 + x);
}

static void fill_image(uint8_t *img, int hwc)
{
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                img[hwc ? (y * W + x) * C + c : (c * H + y) * W + x] = px(c, y, x);
}

static sc__aug *compile_ok(const char *spec, const sc__field *f, int hwc)
{
    sc_error err = SC_ERROR_INIT;
    sc__aug *a = NULL;
    SC_ASSERT_OK(sc__aug_compile(spec, f, hwc, &a, &err), &err);
    return a;
}

/* Crop (4 x 4, padding 2, fill 7) on both layouts: shifted by the hand-drawn top and left. */
static void test_padded_crop_follows_the_draw(void **state)
{
    (void)state;
    for (int hwc = 0; hwc < 2; hwc++) {
        sc__field f = image(hwc, C, H, W);
        sc__aug *a = compile_ok("random_crop(4, padding=2, fill=7)", &f, hwc);
        uint8_t img[C * H * W], out[C * 4 * 4];
        fill_image(img, hwc);
        int seen[5][6] = {{0}};
        for (uint64_t key = 0; key < 400; key++) {
            sc__rng r;
            sc__rng_init(&r, key);
            int top = (int)sc__rng_below(&r, H + 4 - 4 + 1);
            int left = (int)sc__rng_below(&r, W + 4 - 4 + 1);
            sc__aug_draws d;
            sc__aug_draw(a, key, &d);
            assert_int_equal(d.top[0], top);
            assert_int_equal(d.left[0], left);
            seen[top][left]++;
            sc__aug_run(a, img, out, key);
            for (int c = 0; c < C; c++)
                for (int y = 0; y < 4; y++)
                    for (int x = 0; x < 4; x++) {
                        int sy = y + top - 2, sx = x + left - 2;
                        int in = sy >= 0 && sy < H && sx >= 0 && sx < W;
                        assert_int_equal(out[hwc ? (y * 4 + x) * C + c : (c * 4 + y) * 4 + x],
                                         in ? px(c, sy, sx) : 7);
                    }
        }
        for (int t = 0; t < 5; t++)
            for (int l = 0; l < 6; l++)
                assert_true(seen[t][l] > 0); /* every offset, the padded corners too */
        sc__field o = f;
        sc__aug_output(a, &o);
        assert_int_equal(o.dtype, SC__DT_U8);
        assert_int_equal(o.dims[hwc ? 2 : 0], C);
        assert_int_equal(o.dims[hwc ? 0 : 1], 4);
        assert_int_equal(o.sample_bytes, C * 16);
        sc__aug_free(a);
    }
}

/* One row a b c d padded by 2 on the left and right, the whole width cropped. */
static void test_padding_modes(void **state)
{
    (void)state;
    static const struct {
        const char *mode;
        uint8_t want[8];
    } cases[] = {{"constant", {0, 0, 1, 2, 3, 4, 0, 0}}, {"edge", {1, 1, 1, 2, 3, 4, 4, 4}},
                 {"reflect", {3, 2, 1, 2, 3, 4, 3, 2}}, {"symmetric", {2, 1, 1, 2, 3, 4, 4, 3}}};
    sc__field f = image(0, 1, 1, 4);
    uint8_t row[4] = {1, 2, 3, 4}, out[8];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[128];
        snprintf(spec, sizeof spec, "RandomCrop(size=(1, 8), padding=(2, 0), padding_mode=%s)",
                 cases[i].mode);
        sc__aug *a = compile_ok(spec, &f, 0);
        sc__aug_run(a, row, out, 42);
        assert_memory_equal(out, cases[i].want, 8);
        sc__aug_free(a);
    }
}

static void test_flips(void **state)
{
    (void)state;
    sc__field f = image(0, C, H, W);
    uint8_t img[C * H * W], out[C * H * W];
    fill_image(img, 0);
    sc__aug *always = compile_ok("random_horizontal_flip(p=1)", &f, 0);
    sc__aug *never = compile_ok("random_vertical_flip(0)", &f, 0);
    sc__aug *half = compile_ok("random_vertical_flip", &f, 0);
    sc__aug_run(always, img, out, 3);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                assert_int_equal(out[(c * H + y) * W + x], px(c, y, W - 1 - x));
    sc__aug_run(never, img, out, 3);
    assert_memory_equal(out, img, sizeof img);
    int flipped = 0;
    for (uint64_t key = 0; key < 200; key++) {
        sc__rng r;
        sc__rng_init(&r, key);
        int flip = (double)(sc__rng_next(&r) >> 11) * 0x1.0p-53 < 0.5;
        sc__aug_run(half, img, out, key);
        assert_int_equal(out[0], flip ? px(0, H - 1, 0) : px(0, 0, 0));
        flipped += flip;
    }
    assert_true(flipped > 60 && flipped < 140);
    sc__aug_free(always);
    sc__aug_free(never);
    sc__aug_free(half);
}

static void test_normalize(void **state)
{
    (void)state;
    sc__field f = image(0, 2, 16, 16);
    uint8_t img[2 * 256];
    for (int i = 0; i < 512; i++)
        img[i] = (uint8_t)i;
    sc__aug *a = compile_ok("normalize(mean=(0.5, 0.25), std=[0.25, 2])", &f, 0);
    float out[512];
    sc__aug_run(a, img, out, 0);
    for (int c = 0; c < 2; c++)
        for (int v = 0; v < 256; v++) {
            float want = ((float)v / 255.0f - (c ? 0.25f : 0.5f)) / (c ? 2.0f : 0.25f);
            assert_true(out[c * 256 + v] == want);
        }
    assert_true(out[255] == 2.0f && out[0] == -2.0f);
    sc__field o = f;
    sc__aug_output(a, &o);
    assert_int_equal(o.dtype, SC__DT_F32);
    assert_int_equal(o.sample_bytes, 512 * 4);
    sc__aug_free(a);

    a = compile_ok("normalize(mean=0.5, std=0.25, dtype=float16)", &f, 0);
    uint16_t half[512];
    sc__aug_run(a, img, half, 0);
    assert_int_equal(half[255], 0x4000); /* 2.0 */
    assert_int_equal(half[0], 0xc000);   /* -2.0 */
    assert_int_equal(half[128], 0x2004); /* 0.0078433 in float32: numpy and torch say so */
    sc__aug_output(a, &o);
    assert_int_equal(o.dtype, SC__DT_F16);
    assert_int_equal(o.sample_bytes, 512 * 2);
    sc__aug_free(a);
}

static void test_layouts(void **state)
{
    (void)state;
    uint8_t hwc[C * H * W], chw[C * H * W], out[C * H * W];
    fill_image(hwc, 1);
    fill_image(chw, 0);
    sc__field fh = image(1, C, H, W), fc = image(0, C, H, W);
    sc__aug *a = compile_ok("to_nchw", &fh, 1), *b = compile_ok("ToNHWC()", &fc, 0);
    sc__aug_run(a, hwc, out, 0);
    assert_memory_equal(out, chw, sizeof out);
    sc__aug_run(b, chw, out, 0);
    assert_memory_equal(out, hwc, sizeof out);
    sc__field o = fh;
    sc__aug_output(a, &o);
    assert_int_equal(o.dims[0], C);
    assert_int_equal(o.dims[1], H);
    assert_int_equal(o.dims[2], W);
    sc__aug_free(a);
    sc__aug_free(b);
}

/* The whole pipeline in one pass equals its stages run one by one on whole images. */
static void test_pipeline_is_its_stages(void **state)
{
    (void)state;
    sc__field fh = image(1, C, H, W);
    const char *spec = "random_crop(3, padding=1); random_horizontal_flip; "
                       "normalize(mean=0.5,0.4,std=0.2,0.3); to_nchw";
    sc__aug *all = compile_ok(spec, &fh, 1);
    sc__aug *crop = compile_ok("random_crop(3, padding=1)", &fh, 1);
    uint8_t img[C * H * W], cropped[C * 9];
    fill_image(img, 1);
    for (uint64_t key = 100; key < 160; key++) {
        sc__aug_draws d, dc;
        sc__aug_draw(all, key, &d);
        sc__aug_draw(crop, key, &dc); /* the crop draws first: the same top and left */
        assert_int_equal(d.top[0], dc.top[0]);
        assert_int_equal(d.left[0], dc.left[0]);
        sc__aug_run(crop, img, cropped, key);
        float out[C * 9];
        sc__aug_run(all, img, out, key);
        for (int c = 0; c < C; c++)
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 3; x++) {
                    int sx = d.flip[1] ? 2 - x : x;
                    float v = (float)cropped[(y * 3 + sx) * C + c] / 255.0f;
                    float want = (v - (c ? 0.4f : 0.5f)) / (c ? 0.3f : 0.2f);
                    assert_true(out[(c * 3 + y) * 3 + x] == want);
                }
    }
    sc__aug_free(all);
    sc__aug_free(crop);
}

/* A pad after normalize fills with the number itself; before, with its normalized value. */
static void test_fill_follows_normalize(void **state)
{
    (void)state;
    sc__field f = image(0, 1, 1, 1);
    uint8_t one = 255;
    float out[9];
    sc__aug *a = compile_ok("normalize(0, 1); random_crop(3, padding=1, fill=-1.5)", &f, 0);
    sc__aug_run(a, &one, out, 0);
    assert_true(out[4] == 1.0f && out[0] == -1.5f);
    sc__aug_free(a);
    a = compile_ok("random_crop(3, padding=1, fill=51); normalize(0, 1)", &f, 0);
    sc__aug_run(a, &one, out, 0);
    assert_true(out[4] == 1.0f && out[8] == 51.0f / 255.0f);
    sc__aug_free(a);
}

static void refused(const char *spec, const sc__field *f, int hwc, const char *why)
{
    sc_error err = SC_ERROR_INIT;
    sc__aug *a = (sc__aug *)1;
    assert_int_equal(sc__aug_compile(spec, f, hwc, &a, &err), SC_EINVAL);
    assert_null(a);
    if (!strstr(err.msg, why))
        fail_msg("'%s': '%s' does not say '%s'", spec, err.msg, why);
}

static void test_bad_specs_are_refused(void **state)
{
    (void)state;
    sc__field f = image(0, 3, 32, 32), hwc = image(1, 3, 32, 32), small = image(1, 3, 4, 4);
    refused("random_crop(32,padding=4);color_jitter", &f, 0, "unknown stage 'color_jitter'");
    refused("random_crop(41, padding=4)", &f, 0, "larger than the padded image");
    refused("random_crop(32, padding=4)", &hwc, 0, "32 channels of 32 x 3"); /* hwc read as chw */
    refused("random_crop(size=(8, 9), padding=2)", &small, 1, "larger than the padded image");
    refused("random_crop(32, padding=40, padding_mode=reflect)", &f, 0, "cannot mirror");
    refused("random_crop(32, padding=4, padding_mode=wrap)", &f, 0, "'wrap'");
    refused("random_crop(32, padding=4, fill=300)", &f, 0, "0 to 255");
    refused("random_crop", &f, 0, "needs its size");
    refused("random_crop(32, pad=4)", &f, 0, "no argument 'pad'");
    refused("random_crop(32, 1, 2)", &f, 0, "positional");
    refused("random_crop(32.5)", &f, 0, "size must be a whole number");
    refused("random_crop(32, padding=(1,2,3))", &f, 0, "padding: one, two");
    refused("normalize(mean=0.5, std=0)", &f, 0, "std of 0");
    refused("normalize(mean=0.5,0.5, std=1)", &f, 0, "one per channel (3)");
    refused("normalize(mean=0.5, std=1, dtype=int8)", &f, 0, "'int8'");
    refused("normalize(0.5, 1); normalize(0.5, 1)", &f, 0, "comes once");
    refused("random_horizontal_flip(p=2)", &f, 0, "from 0 to 1");
    refused("random_horizontal_flip(p=abc)", &f, 0, "not a number");
    refused("to_nchw", &f, 0, "channels first already");
    refused("to_nhwc", &hwc, 1, "channels last already");
    refused("to_nchw; to_nchw", &hwc, 1, "channels first already");
    refused("random_crop(32, padding=(4)", &f, 0, "malformed");
    refused(" ; ", &f, 0, "no stage");
    sc__field flt = f, two = image(0, 3, 32, 32), wide = image(0, 64, 8, 8);
    flt.dtype = SC__DT_F32;
    two.ndims = 2;
    refused("to_nhwc", &flt, 0, "not a fixed-shape 3-D uint8 image");
    refused("to_nhwc", &two, 0, "of 2 dimensions");
    refused("to_nhwc", &wide, 0, "1 to 16 channels");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padded_crop_follows_the_draw),
        cmocka_unit_test(test_padding_modes),
        cmocka_unit_test(test_flips),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_pipeline_is_its_stages),
        cmocka_unit_test(test_fill_follows_normalize),
        cmocka_unit_test(test_bad_specs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
