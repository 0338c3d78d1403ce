/*
 * test_jpeg.c - JPEG samples (runtime/codec/jpeg.c): an encoded image
 * decodes back to itself within JPEG's loss, a full-image crop is the
 * image and its flip is its mirror, random resized crops depend on the
 * seed alone (the same seed, the same bytes), and damaged, truncated,
 * forged or random bytes are refused with a reason, never decoded into a
 * half-written sample (under ASan: never read out of bounds either).
 * Skipped when the build has no libjpeg-turbo.
 */
#include <stdlib.h>
#include <string.h>

#ifdef SC_HAVE_JPEG
#include <turbojpeg.h>
#endif

#include "hash.h"
#include "jpeg.h"
#include "sc_test.h"

enum { W = 64, H = 48 };

static sc__jpeg *jp;
static uint8_t img[3 * H * W];
static unsigned char *enc;
static size_t enc_n;

static int setup(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    if (sc__jpeg_new(&jp, &err) != SC_OK)
        return 0; /* each test skips, saying why */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            img[(0 * H + y) * W + x] = (uint8_t)(x * 4);
            img[(1 * H + y) * W + x] = (uint8_t)(y * 5);
            img[(2 * H + y) * W + x] = 128;
        }
    SC_ASSERT_OK(sc__jpeg_encode(jp, img, 3, W, H, 95, &enc, &enc_n, &err), &err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(enc);
    sc__jpeg_free(jp);
    return 0;
}

static void need_jpeg(void)
{
    if (!jp) {
        sc_error err = SC_ERROR_INIT;
        sc__jpeg *j = NULL;
        assert_int_equal(sc__jpeg_new(&j, &err), SC_ENOTSUP);
        assert_non_null(strstr(err.msg, "libturbojpeg0-dev"));
        skip();
    }
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return s / (double)n;
}

/* The whole image at its own size and ratio: the crop every try draws. */
static sc__crop whole(int flip)
{
    return (sc__crop){W, H, {1.0, 1.0}, {(double)W / H, (double)W / H}, flip, 3, 0};
}

static void test_round_trip(void **state)
{
    (void)state;
    need_jpeg();
    uint32_t w, h;
    int ch;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__jpeg_info(jp, enc, enc_n, &w, &h, &ch, &err), &err);
    assert_true(w == W && h == H && ch == 3);
    uint8_t out[3 * H * W];
    sc__crop c = whole(0);
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, 7, 3, out, &err), &err);
    double d = mean_abs_diff(out, img, sizeof out);
    if (d > 3.0)
        fail_msg("decoded image differs from the source by %.2f levels on average", d);
    uint8_t gray[H * W]; /* one channel from a colour image: its luma */
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, 7, 1, gray, &err), &err);
    assert_true(gray[0] < gray[W - 1]); /* red grows left to right */
}

static void test_flip_is_the_mirror(void **state)
{
    (void)state;
    need_jpeg();
    uint8_t plain[3 * H * W], out[3 * H * W];
    sc_error err = SC_ERROR_INIT;
    sc__crop c = whole(0), f = whole(1);
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, 1, 3, plain, &err), &err);
    int mirrored = 0, same = 0;
    for (uint64_t seed = 0; seed < 32; seed++) {
        SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &f, seed, 3, out, &err), &err);
        int is_same = !memcmp(out, plain, sizeof out), is_mirror = 1;
        for (int k = 0; k < 3 * H && is_mirror; k++)
            for (int x = 0; x < W; x++)
                is_mirror &= out[k * W + x] == plain[k * W + W - 1 - x];
        assert_true(is_same || is_mirror);
        same += is_same;
        mirrored += is_mirror && !is_same;
    }
    assert_true(same > 0 && mirrored > 0);
}

static void test_crops_follow_the_seed(void **state)
{
    (void)state;
    need_jpeg();
    sc__crop c = sc__crop_default(24, 24);
    uint8_t a[3 * 24 * 24], b[3 * 24 * 24], first[3 * 24 * 24];
    sc_error err = SC_ERROR_INIT;
    int differ = 0;
    for (uint64_t seed = 0; seed < 40; seed++) {
        uint64_t key = sc__rng_key(5, 2, 9, seed);
        SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, key, 3, a, &err), &err);
        SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, key, 3, b, &err), &err);
        assert_memory_equal(a, b, sizeof a);
        for (size_t i = 2 * 24 * 24; i < sizeof a; i++) /* blue is 128 everywhere */
            assert_true(abs(a[i] - 128) <= 4);
        if (seed == 0)
            memcpy(first, a, sizeof a);
        differ += memcmp(first, a, sizeof a) != 0;
    }
    assert_true(differ >= 30);
}

/* The good image decodes on the same handle: a damaged one before it left nothing behind. */
static void good_still_decodes(void)
{
    uint8_t out[3 * 16 * 16];
    sc__crop c = sc__crop_default(16, 16);
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, 3, 3, out, &err), &err);
}

static void expect_refused(const unsigned char *p, size_t n, const char *words)
{
    uint8_t out[3 * 16 * 16];
    sc__crop c = sc__crop_default(16, 16);
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc__jpeg_decode_crop(jp, p, n, &c, 3, 3, out, &err), SC_EFORMAT);
    if (!strstr(err.msg, words))
        fail_msg("'%s' does not say '%s'", err.msg, words);
    good_still_decodes();
}

static void test_damage_is_refused(void **state)
{
    (void)state;
    need_jpeg();
    unsigned char *p = malloc(enc_n);
    memcpy(p, enc, enc_n);
    expect_refused(p, enc_n - 40, "no end-of-image marker (truncated)");
    expect_refused(p, 200, "JPEG"); /* cut in its tables */
    expect_refused((const unsigned char *)"not a jpeg at all", 17, "not a JPEG");
    for (size_t i = 0; i + 8 < enc_n; i++) /* a forged frame header: 65535 x 65535 */
        if (p[i] == 0xFF && p[i + 1] == 0xC0) {
            memset(p + i + 5, 0xFF, 4);
            break;
        }
    expect_refused(p, enc_n, "pixels");
    /* Random damage: refused or decoded, never a crash or an out-of-bounds read. */
    sc__rng r;
    sc__rng_init(&r, 11);
    uint8_t out[3 * 16 * 16];
    sc__crop c = sc__crop_default(16, 16);
    for (int t = 0; t < 300; t++) {
        memcpy(p, enc, enc_n);
        for (int k = 0; k < 1 + t % 5; k++)
            p[sc__rng_below(&r, enc_n)] = (unsigned char)sc__rng_next(&r);
        sc_error err = SC_ERROR_INIT;
        int rc = sc__jpeg_decode_crop(jp, p, enc_n - sc__rng_below(&r, 3), &c, (uint64_t)t, 3,
                                      out, &err);
        assert_true(rc == SC_OK || (rc == SC_EFORMAT && err.msg[0]));
        good_still_decodes();
    }
    for (size_t cut = 100; cut < enc_n; cut += 37) /* cut anywhere, tables included */
        if (sc__jpeg_decode_crop(jp, enc, cut, &c, 1, 3, out, &(sc_error){0}) == SC_EFORMAT)
            good_still_decodes();
    free(p);
}

/*
 * A truncated image is refused whatever the crop (the decode reads only the
 * crop's rows, so this is the end marker's check); stray bytes before a
 * marker, as some ImageNet files have, decode to the image's own bytes.
 */
static void test_truncated_always_and_stray_bytes_never(void **state)
{
    (void)state;
    need_jpeg();
    uint8_t a[3 * 16 * 16], b[3 * 16 * 16];
    sc__crop c = sc__crop_default(16, 16);
    sc_error err = SC_ERROR_INIT;
    for (uint64_t seed = 0; seed < 40; seed++) {
        assert_int_equal(sc__jpeg_decode_crop(jp, enc, enc_n - 200, &c, seed, 3, a, &err),
                         SC_EFORMAT);
        assert_non_null(strstr(err.msg, "end-of-image"));
    }
    size_t at = 2; /* the first quantization table's marker */
    while (at + 1 < enc_n && !(enc[at] == 0xFF && enc[at + 1] == 0xDB))
        at++;
    assert_true(at + 1 < enc_n);
    unsigned char *p = malloc(enc_n + 3);
    memcpy(p, enc, at);
    memcpy(p + at, "\x12\x34\x56", 3);
    memcpy(p + at + 3, enc + at, enc_n - at);
    for (uint64_t seed = 0; seed < 10; seed++) {
        SC_ASSERT_OK(sc__jpeg_decode_crop(jp, p, enc_n + 3, &c, seed, 3, a, &err), &err);
        SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, seed, 3, b, &err), &err);
        assert_memory_equal(a, b, sizeof a);
    }
    free(p);
}

/* PIL's RGB of one CMYK pixel as libjpeg delivers it: inverted (Adobe's), then cmyk2rgb. */
static void pil_cmyk(const unsigned char *p, uint8_t *rgb)
{
    for (int k = 0; k < 3; k++) {
        unsigned c = 255u - p[k], nk = p[3], t = c * nk + 128;
        rgb[k] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
    }
}

/*
 * A YCCK JPEG (TurboJPEG writes CMYK so, with Adobe's marker; some
 * ImageNet files are CMYK) decodes to PIL's RGB of libjpeg's CMYK, and 1
 * plane to its luma; bad crop settings are refused.
 */
static void test_cmyk_and_bad_settings(void **state)
{
    (void)state;
    need_jpeg();
#ifdef SC_HAVE_JPEG
    enum { S = 16 };
    unsigned char cmyk[4 * S * S], raw[4 * S * S], *buf = NULL;
    unsigned long n = 0;
    for (int i = 0; i < 4 * S * S; i++)
        cmyk[i] = (unsigned char)(i % 4 == 3 ? 40 + i / 8 : (i * 29) % 256);
    tjhandle t = tjInitCompress(), d = tjInitDecompress();
    assert_int_equal(tjCompress2(t, cmyk, S, 0, S, TJPF_CMYK, &buf, &n, TJSAMP_444, 95, 0), 0);
    assert_int_equal(tjDecompress2(d, buf, n, raw, S, 0, S, TJPF_CMYK, 0), 0);
    uint8_t out[3 * S * S], luma[S * S];
    sc__crop c = {S, S, {1.0, 1.0}, {1.0, 1.0}, 0, 3, 0}, c1 = c;
    c1.channels = 1;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, buf, n, &c, 3, 3, out, &err), &err);
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, buf, n, &c1, 3, 1, luma, &err), &err);
    for (int i = 0; i < S * S; i++) {
        uint8_t rgb[3];
        pil_cmyk(raw + 4 * i, rgb);
        for (int k = 0; k < 3; k++)
            assert_int_equal(out[k * S * S + i], rgb[k]);
        assert_int_equal(luma[i], (rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
    }
    tjFree(buf);
    tjDestroy(t);
    tjDestroy(d);
    good_still_decodes();
    sc__crop bad = sc__crop_default(16, 16);
    bad.scale[0] = 0.9, bad.scale[1] = 0.5;
    assert_int_equal(sc__jpeg_decode_crop(jp, enc, enc_n, &bad, 3, 3, out, &err), SC_EINVAL);
    bad = sc__crop_default(16, 16), bad.ratio[0] = 0.0 / 0.0;
    assert_int_equal(sc__jpeg_decode_crop(jp, enc, enc_n, &bad, 3, 3, out, &err), SC_EINVAL);
#endif
}

/*
 * Bytes after the end-of-image marker, however many, are not the image:
 * 2 KiB of them decode to the image's own bytes; so does an EXIF block
 * with a thumbnail (its own FF D8 .. FF D9, skipped with its segment),
 * whose image cut before its end is still refused.
 */
static void test_trailing_bytes_and_thumbnails(void **state)
{
    (void)state;
    need_jpeg();
    uint8_t a[3 * 16 * 16], b[3 * 16 * 16];
    sc__crop c = sc__crop_default(16, 16);
    sc_error err = SC_ERROR_INIT;
    unsigned char *p = malloc(enc_n + 4096);
    memcpy(p, enc, enc_n);
    for (int i = 0; i < 2048; i++)
        p[enc_n + i] = (unsigned char)(i * 7);
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, p, enc_n + 2048, &c, 5, 3, a, &err), &err);
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, enc, enc_n, &c, 5, 3, b, &err), &err);
    assert_memory_equal(a, b, sizeof a);
    /* APP1 "Exif" holding a whole small JPEG (the thumbnail) right after SOI */
    size_t seg = 2 + 6 + enc_n;
    p[0] = 0xFF, p[1] = 0xD8, p[2] = 0xFF, p[3] = 0xE1;
    p[4] = (unsigned char)(seg >> 8), p[5] = (unsigned char)seg;
    memcpy(p + 6, "Exif\0\0", 6);
    memcpy(p + 12, enc, enc_n);
    memcpy(p + 12 + enc_n, enc + 2, enc_n - 2);
    size_t n = 12 + enc_n + enc_n - 2;
    SC_ASSERT_OK(sc__jpeg_decode_crop(jp, p, n, &c, 5, 3, a, &err), &err);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(sc__jpeg_decode_crop(jp, p, n - 300, &c, 5, 3, a, &err), SC_EFORMAT);
    assert_non_null(strstr(err.msg, "a JPEG image with no end-of-image marker (truncated)"));
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_flip_is_the_mirror),
        cmocka_unit_test(test_crops_follow_the_seed),
        cmocka_unit_test(test_damage_is_refused),
        cmocka_unit_test(test_truncated_always_and_stray_bytes_never),
        cmocka_unit_test(test_cmyk_and_bad_settings),
        cmocka_unit_test(test_trailing_bytes_and_thumbnails),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
