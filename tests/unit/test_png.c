/*
 * test_png.c - PNG samples (runtime/codec/png.c through image.c): every
 * colour type and depth PIL reads, interlaced too, decodes to what PIL's
 * convert("RGB") and convert("L") deliver (alpha dropped, 16-bit by its
 * high byte, 16-bit grayscale clipped as PIL's mode "I", palettes looked
 * up), whatever a field says (the signature decides); an eXIf orientation
 * is applied when asked; a forged size, a truncated file and bytes that are
 * no image are refused in words.  Skipped when the build has no libspng.
 */
#include <stdlib.h>
#include <string.h>

#ifdef SC_HAVE_PNG
#include <spng.h>
#endif

#include "image.h"
#include "pixels.h"
#include "sc_test.h"

enum { W = 13, H = 7 };

static sc__image *im;

static int setup(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    return sc__image_new(&im, &err) != SC_OK; /* a build without JPEG: none of this */
}

static int teardown(void **state)
{
    (void)state;
    sc__image_free(im);
    return 0;
}

#ifdef SC_HAVE_PNG

/* A PNG of the samples `raw` (the PNG's own format, 16-bit in host order). */
static unsigned char *encode(const void *raw, size_t len, int depth, int type, int interlace,
                             const struct spng_plte *plte, const char *exif, size_t exif_n,
                             size_t *n)
{
    spng_ctx *c = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ih = {W, H, (uint8_t)depth, (uint8_t)type, 0, 0, (uint8_t)interlace};
    assert_int_equal(spng_set_option(c, SPNG_ENCODE_TO_BUFFER, 1), 0);
    assert_int_equal(spng_set_ihdr(c, &ih), 0);
    if (plte)
        assert_int_equal(spng_set_plte(c, (struct spng_plte *)plte), 0);
    if (exif) {
        struct spng_exif x = {exif_n, (char *)exif};
        assert_int_equal(spng_set_exif(c, &x), 0);
    }
    assert_int_equal(spng_encode_image(c, raw, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
    int e = 0;
    unsigned char *png = spng_get_png_buffer(c, n, &e);
    assert_int_equal(e, 0);
    spng_ctx_free(c);
    return png;
}

/* The whole image at its own size: the crop every draw gives, resampled 1:1. */
static sc__crop whole(int channels, int exif, uint32_t w, uint32_t h)
{
    return (sc__crop){w, h, {1.0, 1.0}, {(double)w / h, (double)w / h}, 0, channels, exif};
}

/* png decodes to `rgb` (H x W interleaved, as PIL's convert("RGB")) and to its luma. */
static void decodes_to(const unsigned char *png, size_t n, const uint8_t *rgb)
{
    sc_error err = SC_ERROR_INIT;
    uint8_t out[3 * W * H], luma[W * H];
    sc__crop c3 = whole(3, 0, W, H), c1 = whole(1, 0, W, H);
    SC_ASSERT_OK(sc__image_decode_crop(im, png, n, &c3, 1, 3, out, &err), &err);
    SC_ASSERT_OK(sc__image_decode_crop(im, png, n, &c1, 1, 1, luma, &err), &err);
    for (int i = 0; i < W * H; i++) {
        for (int k = 0; k < 3; k++)
            assert_int_equal(out[k * W * H + i], rgb[3 * i + k]);
        assert_int_equal(luma[i], sc__luma(rgb + 3 * i));
    }
}

/* A pixel's value v of `bits` bits, as PIL's 8-bit scaling makes it. */
static uint8_t scaled(unsigned v, int bits)
{
    return (uint8_t)(v * 255u / ((1u << bits) - 1));
}

static void test_gray_depths(void **state)
{
    (void)state;
    uint8_t rgb[3 * W * H];
    for (int bits = 1; bits <= 8; bits *= 2)
        for (int lace = 0; lace < 2; lace++) {
            int row = (W * bits + 7) / 8;
            unsigned char raw[H * W] = {0};
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    unsigned v = (unsigned)(x * 7 + y * 3) % (1u << bits);
                    int at = x * bits;
                    raw[y * row + at / 8] |= (unsigned char)(v << (8 - bits - at % 8));
                    memset(rgb + 3 * (y * W + x), scaled(v, bits), 3);
                }
            size_t n;
            unsigned char *png = encode(raw, (size_t)row * H, bits, 0, lace, NULL, NULL, 0, &n);
            decodes_to(png, n, rgb);
            free(png);
        }
}

/* 16 bits: the high byte (RGB, RGBA, gray + alpha), but gray alone clipped to 255 (PIL's "I"). */
static void test_sixteen_bits(void **state)
{
    (void)state;
    static const int types[] = {0, 2, 4, 6}, chans[] = {1, 3, 2, 4};
    for (int t = 0; t < 4; t++) {
        uint16_t raw[4 * W * H];
        uint8_t rgb[3 * W * H];
        int ch = chans[t];
        for (int i = 0; i < W * H; i++) {
            for (int k = 0; k < ch; k++)
                raw[i * ch + k] = (uint16_t)(i * 977 + k * 12345 + (i % 3 ? 0 : 200 - i));
            for (int k = 0; k < 3; k++) {
                uint16_t v = raw[i * ch + (ch >= 3 ? k : 0)];
                rgb[3 * i + k] = types[t] == 0 ? (v > 255 ? 255 : (uint8_t)v) : (uint8_t)(v >> 8);
            }
        }
        size_t n;
        unsigned char *png = encode(raw, sizeof raw[0] * ch * W * H, 16, types[t], t % 2, NULL,
                                    NULL, 0, &n);
        decodes_to(png, n, rgb);
        free(png);
    }
}

/* 8 bits with alpha (dropped, not composited) and a 4-bit palette, interlaced. */
static void test_alpha_and_palette(void **state)
{
    (void)state;
    uint8_t raw[4 * W * H], rgb[3 * W * H];
    for (int i = 0; i < 4 * W * H; i++)
        raw[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < W * H; i++)
        memcpy(rgb + 3 * i, raw + 4 * i, 3);
    size_t n;
    unsigned char *png = encode(raw, sizeof raw, 8, 6, 0, NULL, NULL, 0, &n);
    decodes_to(png, n, rgb);
    free(png);

    struct spng_plte plte = {16, {{0}}};
    for (int k = 0; k < 16; k++)
        plte.entries[k] = (struct spng_plte_entry){(uint8_t)(k * 16), (uint8_t)(255 - k * 9),
                                                   (uint8_t)(k * k), 255};
    int row = (W * 4 + 7) / 8;
    memset(raw, 0, sizeof raw);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int k = (x + 2 * y) % 16;
            raw[y * row + x / 2] |= (uint8_t)(k << (x % 2 ? 0 : 4));
            const struct spng_plte_entry *e = &plte.entries[k];
            uint8_t *p = rgb + 3 * (y * W + x);
            p[0] = e->red, p[1] = e->green, p[2] = e->blue;
        }
    png = encode(raw, (size_t)row * H, 4, 3, 1, &plte, NULL, 0, &n);
    decodes_to(png, n, rgb);
    free(png);
}

/* eXIf orientation 6 (rotate 90 clockwise): applied when asked (H x W out), not otherwise. */
static void test_exif_orientation(void **state)
{
    (void)state;
    static const char tiff[] = "MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0";
    uint8_t raw[W * H], up[W * H], plain[W * H];
    for (int i = 0; i < W * H; i++)
        raw[i] = (uint8_t)(i * 3);
    size_t n;
    unsigned char *png = encode(raw, sizeof raw, 8, 0, 0, NULL, tiff, sizeof tiff - 1, &n);
    sc_error err = SC_ERROR_INIT;
    sc__crop turned = whole(1, 1, H, W), as_is = whole(1, 0, W, H);
    SC_ASSERT_OK(sc__image_decode_crop(im, png, n, &turned, 1, 1, up, &err), &err);
    SC_ASSERT_OK(sc__image_decode_crop(im, png, n, &as_is, 1, 1, plain, &err), &err);
    for (int v = 0; v < W; v++) /* upright (u, v) is stored (v, H - 1 - u) */
        for (int u = 0; u < H; u++)
            assert_int_equal(up[v * H + u], raw[(H - 1 - u) * W + v]);
    assert_memory_equal(plain, raw, sizeof raw);
    free(png);
}

/* The png's IHDR CRC after its size was changed (the decoder checks it). */
static void fix_ihdr_crc(unsigned char *png)
{
    uint32_t c = 0xFFFFFFFFu;
    for (int i = 12; i < 12 + 4 + 13; i++) {
        c ^= png[i];
        for (int b = 0; b < 8; b++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    c ^= 0xFFFFFFFFu;
    for (int i = 0; i < 4; i++)
        png[29 + i] = (unsigned char)(c >> (24 - 8 * i));
}

static void test_refusals_in_words(void **state)
{
    (void)state;
    uint8_t raw[3 * W * H] = {0}, out[3 * 4 * 4];
    size_t n;
    unsigned char *png = encode(raw, sizeof raw, 8, 2, 0, NULL, NULL, 0, &n);
    sc__crop c = sc__crop_default(4, 4);
    sc_error err = SC_ERROR_INIT;
    for (int i = 0; i < 8; i++) /* 70000 x 70000 */
        png[16 + i] = (unsigned char[]){0, 1, 0x11, 0x70, 0, 1, 0x11, 0x70}[i];
    fix_ihdr_crc(png);
    assert_int_equal(sc__image_decode_crop(im, png, n, &c, 1, 3, out, &err), SC_EFORMAT);
    assert_non_null(strstr(err.msg, "a PNG image of 70000x70000 pixels"));
    free(png);
    png = encode(raw, sizeof raw, 8, 2, 0, NULL, NULL, 0, &n);
    assert_int_equal(sc__image_decode_crop(im, png, n / 2, &c, 1, 3, out, &err), SC_EFORMAT);
    assert_non_null(strstr(err.msg, "a damaged PNG image"));
    free(png);
    assert_int_equal(sc__image_decode_crop(im, "GIF89a", 6, &c, 1, 3, out, &err), SC_EFORMAT);
    assert_string_equal(err.msg, "not an image shardcache decodes: starts with 0x47 0x49 (JPEG "
                                 "and PNG are)");
}

#else

static void test_no_png(void **state)
{
    (void)state;
    skip();
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef SC_HAVE_PNG
        cmocka_unit_test(test_gray_depths),
        cmocka_unit_test(test_sixteen_bits),
        cmocka_unit_test(test_alpha_and_palette),
        cmocka_unit_test(test_exif_orientation),
        cmocka_unit_test(test_refusals_in_words),
#else
        cmocka_unit_test(test_no_png),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
