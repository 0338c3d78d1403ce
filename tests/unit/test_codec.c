/*
 * test_codec.c - the chunk filters shardcache decodes itself: LZF, shuffle
 * and deflate round trips on random, repetitive and empty chunks of random
 * sizes, HDF5's filter mask (a skipped filter), and damaged or truncated
 * streams refused with the chunk named, never decoded into garbage.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "hash.h"
#include "sc_test.h"

/* Random bytes, runs and repeats: compressible in parts. */
static void fill(unsigned char *b, size_t n, sc__rng *r)
{
    for (size_t i = 0; i < n;) {
        size_t run = 1 + sc__rng_below(r, 300);
        int kind = (int)sc__rng_below(r, 3);
        for (size_t k = 0; k < run && i < n; k++, i++)
            b[i] = kind == 0   ? (unsigned char)sc__rng_next(r)
                   : kind == 1 ? (unsigned char)(i / 7)
                   : i >= 64   ? b[i - 64]
                               : 0;
    }
}

static void roundtrip(const sc__pipeline *p, const unsigned char *in, size_t n)
{
    unsigned char *enc = malloc(sc__chunk_bound(n)), *dec = malloc(n + 1), *tmp = malloc(n + 1);
    size_t got = 0;
    unsigned mask = 0;
    sc_error err;
    assert_int_equal(sc__chunk_encode(p, 4, in, n, enc, &got, &mask, tmp), 0);
    SC_ASSERT_OK(sc__chunk_decode(p, mask, enc, got, dec, n, tmp, "chunk", &err), &err);
    assert_memory_equal(in, dec, n);
    free(enc), free(dec), free(tmp);
}

static void test_roundtrips(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 21, 0, 0));
    const sc__pipeline pipes[] = {
        {1, {SC__FILTER_LZF}, 1},
        {2, {SC__FILTER_SHUFFLE, SC__FILTER_LZF}, 4},
        {1, {SC__FILTER_DEFLATE}, 8},
        {2, {SC__FILTER_SHUFFLE, SC__FILTER_DEFLATE}, 3},
        {1, {SC__FILTER_SHUFFLE}, 2},
    };
    for (int c = 0; c < 60; c++) {
        size_t n = c < 3 ? (size_t)c : 1 + sc__rng_below(&r, c % 2 ? 200000 : 3000);
        unsigned char *in = malloc(n + 1);
        fill(in, n, &r);
        for (size_t p = 0; p < sizeof pipes / sizeof pipes[0]; p++)
            roundtrip(&pipes[p], in, n);
        free(in);
    }
}

/* LZF's edge cases: long matches, overlapping copies, the longest offset. */
static void test_lzf_edges(void **state)
{
    (void)state;
    enum { N = 70000 };
    unsigned char *in = malloc(N), *enc = malloc(2 * N), *dec = malloc(N);
    size_t got = 0;
    memset(in, 'a', N); /* one literal, then back references of the longest length */
    size_t z = sc__lzf_compress(in, N, enc, 2 * N);
    assert_true(z > 0 && z < N / 50);
    assert_int_equal(sc__lzf_decompress(enc, z, dec, N, &got), 0);
    assert_int_equal(got, N);
    assert_memory_equal(in, dec, N);
    for (size_t i = 0; i < N; i++) /* a period of 8190: matches at the farthest offset */
        in[i] = (unsigned char)(sc__mix64(i % 8190) & 0xff);
    z = sc__lzf_compress(in, N, enc, 2 * N);
    assert_true(z > 0 && z < N / 2);
    assert_int_equal(sc__lzf_decompress(enc, z, dec, N, &got), 0);
    assert_memory_equal(in, dec, N);
    /* Random bytes do not shrink: the compressor says so and stores nothing. */
    for (size_t i = 0; i < N; i++)
        in[i] = (unsigned char)sc__mix64(i);
    assert_int_equal(sc__lzf_compress(in, N, enc, N), 0);
    free(in), free(enc), free(dec);
}

static void test_damage_is_refused(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 22, 0, 0));
    enum { N = 20000 };
    unsigned char in[N], enc[N + N / 8 + 4096], dec[N], tmp[N];
    fill(in, N, &r);
    const sc__pipeline pipes[] = {{1, {SC__FILTER_LZF}, 1},
                                  {2, {SC__FILTER_SHUFFLE, SC__FILTER_DEFLATE}, 4}};
    for (size_t p = 0; p < 2; p++) {
        size_t got = 0;
        unsigned mask = 0;
        sc_error err;
        assert_int_equal(sc__chunk_encode(&pipes[p], 4, in, N, enc, &got, &mask, tmp), 0);
        /* Truncated: never a full chunk. */
        SC_ASSERT_RC(sc__chunk_decode(&pipes[p], mask, enc, got / 2, dec, N, tmp,
                                      "f.h5 /x chunk 3", &err), SC_EFORMAT, &err);
        assert_non_null(strstr(err.msg, "f.h5 /x chunk 3"));
        /* Bytes flipped in the middle: refused or, for LZF (no checksum), not silent about size. */
        for (int k = 0; k < 8; k++)
            enc[got / 2 + (size_t)k] ^= 0xa5;
        int rc = sc__chunk_decode(&pipes[p], mask, enc, got, dec, N, tmp, "chunk", &err);
        if (pipes[p].id[pipes[p].n - 1] == SC__FILTER_DEFLATE)
            assert_int_equal(rc, SC_EFORMAT); /* zlib's Adler-32 catches it */
        else
            assert_true(rc == SC_EFORMAT || memcmp(in, dec, N) != 0);
        /* A chunk declared larger than its bytes decode to. */
        assert_int_equal(sc__chunk_encode(&pipes[p], 4, in, N - 10, enc, &got, &mask, tmp), 0);
        SC_ASSERT_RC(sc__chunk_decode(&pipes[p], mask, enc, got, dec, N, tmp, "chunk", &err),
                     SC_EFORMAT, &err);
    }
    /* HDF5's mask: a skipped (optional) filter is not undone. */
    sc__pipeline lzf = {1, {SC__FILTER_LZF}, 1};
    sc_error err;
    SC_ASSERT_OK(sc__chunk_decode(&lzf, 1, in, N, dec, N, tmp, "chunk", &err), &err);
    assert_memory_equal(in, dec, N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrips),
        cmocka_unit_test(test_lzf_edges),
        cmocka_unit_test(test_damage_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
