/*
 * test_decode.c - SC_DECODE (runtime/storage/decode.c) on hand-made field
 * lists, without HDF5, MPI or torch: which fields a setting picks (named,
 * "/x" and "x" alike, or every variable-length uint8 one left for a bare
 * decoder); every bad setting refused naming the source and the field;
 * decode-once's transform declaring 3 x side x side uint8 for the fields
 * it decodes and passing the others through, its shard function decoding
 * the centre square (the bytes sc__jpeg_decode_crop gives) and copying
 * the other fields' blobs as they are, a corrupt image named by its
 * sample; its augmentation mirroring on the seed's top bit alone.  The
 * JPEG tests skip when the build has no libjpeg-turbo.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "jpeg.h"
#include "sc_test.h"
#include "vlen.h"

enum { SIDE = 8, W = 24, H = 16 };
static const char *src = "/data/set.h5";

static sc__field vfield(const char *name, sc__dtype dt)
{
    sc__field f = {.dtype = dt, .vlen = 1, .sample_bytes = 4096};
    snprintf(f.name, sizeof f.name, "%s", name);
    return f;
}

static sc__field xfield(const char *name)
{
    sc__field f = {.dtype = SC__DT_I32, .ndims = 1, .dims = {2}, .sample_bytes = 8};
    snprintf(f.name, sizeof f.name, "%s", name);
    return f;
}

/* /img and /thumb: encoded bytes; /label: fixed int32[2]; /tokens: vlen int32. */
static sc__field fields[4];

static int setup(void **state)
{
    (void)state;
    fields[0] = vfield("/img", SC__DT_U8);
    fields[1] = xfield("/label");
    fields[2] = vfield("/thumb", SC__DT_U8);
    fields[3] = vfield("/tokens", SC__DT_I32);
    return 0;
}

static sc_config cfg(const char *decode)
{
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.decode, sizeof c.decode, "%s", decode);
    c.decode_size = SIDE;
    c.transform = NULL;
    return c;
}

/*
 * Whether this build has JPEG (its features say so); where it has, the
 * decoder must come up: a broken codec fails here, never reads as a skip.
 */
static int have_jpeg(void)
{
    sc_features f;
    sc_features_get(&f);
    if (!f.jpeg)
        return 0;
    sc_error err = SC_ERROR_INIT;
    sc__jpeg *j = NULL;
    SC_ASSERT_OK(sc__jpeg_new(&j, &err), &err);
    sc__jpeg_free(j);
    return 1;
}

/* The decoder SC_DECODE=spec makes, or a failed test. */
static sc__decode *make(const char *spec)
{
    sc_config c = cfg(spec);
    sc_error err = SC_ERROR_INIT;
    sc__decode *d = NULL;
    SC_ASSERT_OK(sc__decode_new(src, fields, 4, &c, NULL, &d, &err), &err);
    return d;
}

static void test_unset_decodes_nothing(void **state)
{
    (void)state;
    sc_config c = cfg("");
    sc_error err = SC_ERROR_INIT;
    sc__decode *d = (sc__decode *)&c; /* overwritten */
    SC_ASSERT_OK(sc__decode_new(src, fields, 4, &c, NULL, &d, &err), &err);
    assert_null(d);
    assert_null(sc__decode_once(NULL));
    assert_int_equal(sc__decode_epoch(NULL, 0).width, 0);
}

static void test_which_fields(void **state)
{
    (void)state;
    if (!have_jpeg())
        skip();
    /* Bare: every variable-length uint8 field, never the fixed or int32 ones. */
    sc__decode *d = make("jpeg");
    int want[4] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
        sc__crop c = sc__decode_epoch(d, i);
        assert_int_equal(c.width, want[i] ? SIDE : 0);
        assert_int_equal(c.height, want[i] ? SIDE : 0);
    }
    assert_null(sc__decode_once(d)); /* nothing decoded once: no transform */
    assert_int_equal(sc__decode_epoch(d, 4).width, 0);
    sc__decode_free(d);

    /* Named first, the bare one for the rest; "thumb" is "/thumb". */
    d = make("jpeg-once,thumb=jpeg");
    assert_int_equal(sc__decode_epoch(d, 0).width, 0);
    assert_int_equal(sc__decode_epoch(d, 2).width, SIDE);
    const sc_transform *t = sc__decode_once(d);
    assert_non_null(t);
    assert_int_equal(t->nout, 4);
    assert_non_null(strstr(t->version, "8")); /* the side is in the cache's key */
    assert_string_equal(t->out[0].name, "/img");
    assert_string_equal(t->out[0].dtype, "uint8");
    assert_int_equal(t->out[0].ndims, 3);
    assert_true(t->out[0].dims[0] == 3 && t->out[0].dims[1] == SIDE && t->out[0].dims[2] == SIDE);
    assert_int_equal(t->out[0].vlen, 0);
    assert_int_equal(t->out[2].vlen, 1); /* decoded every epoch, cached as its blob */
    assert_int_equal(t->out[1].vlen, 0);
    assert_string_equal(t->out[1].dtype, "int32");
    assert_true(t->out[1].ndims == 1 && t->out[1].dims[0] == 2);
    assert_int_equal(t->out[3].vlen, 1);
    assert_string_equal(t->out[3].dtype, "int32");
    sc__field img;
    sc__decode_image(d, &fields[0], &img);
    assert_int_equal(img.sample_bytes, 3 * SIDE * SIDE);
    assert_string_equal(img.name, "/img");
    sc__decode_free(d);
}

/*
 * SC_DECODE=spec (side: SC_DECODE_SIZE) over fields[first, 4) is refused
 * with SC_EINVAL and a message holding `says`.
 */
static void refused_from(int first, const char *spec, uint64_t side, const sc_transform *tf,
                         const char *says)
{
    sc_config c = cfg(spec);
    c.decode_size = side;
    c.transform = tf;
    sc_error err = SC_ERROR_INIT;
    sc__decode *d = NULL;
    SC_ASSERT_RC(sc__decode_new(src, fields + first, 4 - first, &c, NULL, &d, &err), SC_EINVAL, &err);
    assert_null(d);
    if (!strstr(err.msg, says))
        fail_msg("SC_DECODE='%s': '%s' does not say '%s'", spec, err.msg, says);
}

static void refused(const char *spec, uint64_t side, const sc_transform *tf, const char *says)
{
    refused_from(0, spec, side, tf, says);
}

static void test_bad_settings_are_named(void **state)
{
    (void)state;
    refused("label=jpeg", SIDE, NULL, "source '/data/set.h5': SC_DECODE names field '/label', "
            "which holds fixed-shape int32 samples");
    refused("tokens=jpeg", SIDE, NULL, "field '/tokens', which holds variable-length int32");
    refused("img=jpeg,/img=jpeg-once", SIDE, NULL, "names field '/img' twice");
    refused("img=png", SIDE, NULL, "unknown decoder 'png'");
    refused("=jpeg", SIDE, NULL, "'=jpeg' names no field");
    refused("nope=jpeg", SIDE, NULL, "names field 'nope': the source has no such field");
    refused_from(3, "jpeg", SIDE, NULL, "source '/data/set.h5': SC_DECODE: the source has no "
                 "variable-length uint8 field");
    refused("jpeg", 0, NULL, "SC_DECODE_SIZE=0");
    refused("jpeg", 8193, NULL, "SC_DECODE_SIZE=8193");
    sc_transform tf = {.name = "mine", .version = "1"};
    if (have_jpeg())
        refused("jpeg", SIDE, &tf, "SC_DECODE and transform 'mine' together");
}

static void test_no_jpeg_says_so(void **state)
{
    (void)state;
    if (have_jpeg())
        skip();
    sc_config c = cfg("jpeg");
    sc_error err = SC_ERROR_INIT;
    sc__decode *d = NULL;
    SC_ASSERT_RC(sc__decode_new(src, fields, 4, &c, NULL, &d, &err), SC_ENOTSUP, &err);
    assert_non_null(strstr(err.msg, "source '/data/set.h5': SC_DECODE='jpeg'"));
}

/* A blob of n samples (vlen.h): offsets, then each sample's bytes. */
static unsigned char *blob_of(unsigned char *const *s, const size_t *len, uint64_t n)
{
    uint64_t total = 0;
    for (uint64_t k = 0; k < n; k++)
        total += len[k];
    unsigned char *b = malloc(8 * (n + 1) + total + 1);
    uint64_t at = 0;
    for (uint64_t k = 0; k <= n; k++) {
        memcpy(b + 8 * k, &at, 8);
        if (k < n) {
            memcpy(b + 8 * (n + 1) + at, s[k], len[k]);
            at += len[k];
        }
    }
    return b;
}

/* A W x H colour image whose red grows left to right, green with seed. */
static unsigned char *encoded(sc__jpeg *j, int seed, size_t *n)
{
    static uint8_t img[3 * H * W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            img[(0 * H + y) * W + x] = (uint8_t)(x * 10);
            img[(1 * H + y) * W + x] = (uint8_t)(seed * 60 + y);
            img[(2 * H + y) * W + x] = 90;
        }
    unsigned char *out = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__jpeg_encode(j, img, 3, W, H, 90, &out, n, &err), &err);
    return out;
}

static void test_decode_once_shard(void **state)
{
    (void)state;
    if (!have_jpeg())
        skip();
    enum { N = 2 };
    sc_error err = SC_ERROR_INIT;
    sc__jpeg *j = NULL;
    SC_ASSERT_OK(sc__jpeg_new(&j, &err), &err);
    unsigned char *jp[N];
    size_t jn[N];
    for (int k = 0; k < N; k++)
        jp[k] = encoded(j, k, &jn[k]);
    unsigned char *img = blob_of(jp, jn, N);
    int32_t label[2 * N] = {1, 2, 3, 4};
    unsigned char tok0[] = {1, 0, 0, 0}, *tok[N] = {tok0, tok0};
    size_t tokn[N] = {4, 0};
    unsigned char *tokens = blob_of(tok, tokn, N);

    sc__decode *d = make("img=jpeg-once");
    const sc_transform *t = sc__decode_once(d);
    assert_non_null(t);
    enum { IMG = 3 * SIDE * SIDE };
    unsigned char out0[N * IMG], out1[sizeof label], out3[64];
    memset(out3, 0xee, sizeof out3);
    /* /thumb is not decoded here: it passes through, as its blob (here /img's). */
    const void *in[4] = {img, label, img, tokens};
    unsigned char *thumb = malloc(sc__vlen_blob_bytes(img, N));
    void *const out2[4] = {out0, out1, thumb, out3};
    char msg[256] = "";
    assert_int_equal(t->shard(t->arg, 5, 100, N, in, out2, msg, sizeof msg), 0);
    sc__crop centre = {SIDE, SIDE, {1.0, 1.0}, {1.0, 1.0}, 0, 3, 0};
    for (int k = 0; k < N; k++) {
        uint8_t want[IMG];
        SC_ASSERT_OK(sc__jpeg_decode_crop(j, jp[k], jn[k], &centre, 0, 3, want, &err), &err);
        assert_memory_equal(out0 + k * IMG, want, IMG);
    }
    assert_memory_not_equal(out0, out0 + IMG, IMG); /* two images, not one twice */
    assert_memory_equal(out1, label, sizeof label);
    assert_int_equal(sc__vlen_blob_bytes(tokens, N), 8 * 3 + 4);
    assert_memory_equal(out3, tokens, sc__vlen_blob_bytes(tokens, N));
    assert_int_equal(out3[sc__vlen_blob_bytes(tokens, N)], 0xee); /* not a byte more */
    assert_memory_equal(thumb, img, sc__vlen_blob_bytes(img, N));

    /* A damaged second image: the transform fails, naming sample 101 and its field. */
    img[8 * (N + 1) + jn[0] + jn[1] / 2] ^= 0xff;
    img[8 * (N + 1) + jn[0] + jn[1] - 2] = 0; /* no end-of-image marker */
    msg[0] = 0;
    int bad = t->shard(t->arg, 5, 100, N, in, out2, msg, sizeof msg);
    assert_int_not_equal(bad, 0);
    if (!strstr(msg, "sample 101: field '/img'"))
        fail_msg("the message names no sample: '%s'", msg);

    free(img);
    free(thumb);
    free(tokens);
    for (int k = 0; k < N; k++)
        free(jp[k]);
    sc__jpeg_free(j);
    sc__decode_free(d);
}

static void test_decode_once_flip(void **state)
{
    (void)state;
    if (!have_jpeg())
        skip();
    sc__decode *d = make("img=jpeg-once");
    const sc_transform *t = sc__decode_once(d);
    enum { IMG = 3 * SIDE * SIDE };
    unsigned char a[IMG], b[IMG], other[8] = {1, 2, 3, 4, 5, 6, 7, 8}, keep[8];
    for (int i = 0; i < IMG; i++)
        a[i] = (unsigned char)(i * 7);
    memcpy(b, a, IMG);
    memcpy(keep, other, sizeof keep);
    void *const f[4] = {b, other, other, other};
    char msg[64] = "";
    assert_int_equal(t->augment(t->arg, 1, 2, 0x7fffffffffffffffULL, f, msg, sizeof msg), 0);
    assert_memory_equal(a, b, IMG); /* top bit clear: as it is */
    assert_int_equal(t->augment(t->arg, 1, 2, 1ULL << 63, f, msg, sizeof msg), 0);
    for (int row = 0; row < 3 * SIDE; row++)
        for (int x = 0; x < SIDE; x++)
            assert_int_equal(b[row * SIDE + x], a[row * SIDE + SIDE - 1 - x]);
    assert_memory_equal(other, keep, sizeof keep); /* the fields not decoded: untouched */
    sc__decode_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_decodes_nothing),
        cmocka_unit_test(test_which_fields),
        cmocka_unit_test(test_bad_settings_are_named),
        cmocka_unit_test(test_no_jpeg_says_so),
        cmocka_unit_test(test_decode_once_shard),
        cmocka_unit_test(test_decode_once_flip),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
