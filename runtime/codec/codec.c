/*
 * codec.c - chunk filters decoded outside the HDF5 lock (see codec.h).
 *
 * LZF, as h5py's filter writes it (liblzf's format): a control byte below
 * 32 starts a run of ctrl+1 literal bytes; any other is a back reference
 * of (ctrl >> 5) + 2 bytes (7 means a length byte follows) at distance
 * ((ctrl & 31) << 8) + next byte + 1.  The compressor is greedy over a
 * hash of three bytes: made for make-dataset's synthetic chunks, not for
 * ratio.
 */
#include "codec.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

#define LZF_HLOG 14
#define LZF_MAX_OFF 8192
#define LZF_MAX_LEN 264 /* 7 + 255 + 2 */
#define LZF_MAX_LIT 32

const char *sc__filter_name(unsigned id)
{
    static const struct {
        unsigned id;
        const char *name;
    } known[] = {{1, "deflate (gzip)"}, {2, "shuffle"}, {3, "Fletcher-32 checksum"},
                 {4, "SZIP"}, {5, "N-bit"}, {6, "scale-offset"}, {307, "bzip2"},
                 {32000, "LZF"}, {32001, "Blosc"}, {32004, "LZ4"}, {32008, "bitshuffle"},
                 {32013, "ZFP"}, {32015, "Zstandard"}, {32017, "SZ"}, {32026, "Blosc2"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].id == id)
            return known[i].name;
    return "a filter plugin";
}

int sc__pipeline_decodable(const sc__pipeline *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->id[i] != SC__FILTER_DEFLATE && p->id[i] != SC__FILTER_SHUFFLE &&
            p->id[i] != SC__FILTER_LZF)
            return 0;
    return p->n > 0;
}

/*
 * The shuffle and its inverse: shuffled, byte b of element j sits at
 * b * count + j; the bytes past the last whole element stay where they are.
 */
static void codec_transpose(const unsigned char *in, unsigned char *out, size_t n,
                            unsigned elem, int back)
{
    size_t count = elem > 1 ? n / elem : 0;
    for (unsigned b = 0; b < elem && count; b++)
        for (size_t j = 0; j < count; j++)
            if (back)
                out[j * elem + b] = in[b * count + j];
            else
                out[b * count + j] = in[j * elem + b];
    memcpy(out + count * elem, in + count * elem, n - count * elem);
}

void sc__shuffle(const unsigned char *in, unsigned char *out, size_t n, unsigned elem)
{
    codec_transpose(in, out, n, elem, 0);
}

void sc__unshuffle(const unsigned char *in, unsigned char *out, size_t n, unsigned elem)
{
    codec_transpose(in, out, n, elem, 1);
}

/* Literals in[from, to) as runs of at most 32; the new op, or SIZE_MAX. */
static size_t lzf_literals(const unsigned char *in, size_t from, size_t to, unsigned char *out,
                           size_t op, size_t cap)
{
    while (from < to) {
        size_t run = to - from < LZF_MAX_LIT ? to - from : LZF_MAX_LIT;
        if (op + 1 + run > cap)
            return SIZE_MAX;
        out[op++] = (unsigned char)(run - 1);
        memcpy(out + op, in + from, run);
        op += run, from += run;
    }
    return op;
}

static unsigned lzf_hash(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    return (v * 2654435761u) >> (32 - LZF_HLOG);
}

size_t sc__lzf_compress(const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    uint32_t *tab = calloc((size_t)1 << LZF_HLOG, sizeof *tab); /* position + 1 */
    size_t ip = 0, lit = 0, op = 0;
    if (!tab)
        return 0;
    while (op != SIZE_MAX && ip + 2 < n) {
        unsigned h = lzf_hash(in + ip);
        size_t ref = tab[h];
        tab[h] = (uint32_t)(ip + 1);
        if (!ref || ip - (ref - 1) > LZF_MAX_OFF || memcmp(in + ref - 1, in + ip, 3)) {
            ip++;
            continue;
        }
        size_t r = ref - 1, len = 3, max = n - ip < LZF_MAX_LEN ? n - ip : LZF_MAX_LEN;
        while (len < max && in[r + len] == in[ip + len])
            len++;
        op = lzf_literals(in, lit, ip, out, op, cap);
        size_t l = len - 2, off = ip - r - 1;
        if (op == SIZE_MAX || op + 3 > cap) {
            op = SIZE_MAX;
            break;
        }
        out[op++] = (unsigned char)((l < 7 ? l : 7) << 5 | off >> 8);
        if (l >= 7)
            out[op++] = (unsigned char)(l - 7);
        out[op++] = (unsigned char)(off & 0xff);
        ip += len, lit = ip;
    }
    if (op != SIZE_MAX)
        op = lzf_literals(in, lit, n, out, op, cap);
    free(tab);
    return op == SIZE_MAX ? 0 : op;
}

int sc__lzf_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap,
                       size_t *got)
{
    size_t ip = 0, op = 0;
    while (ip < n) {
        unsigned c = in[ip++];
        if (c < 32) {
            size_t run = c + 1;
            if (run > n - ip || run > cap - op)
                return -1;
            memcpy(out + op, in + ip, run);
            ip += run, op += run;
            continue;
        }
        size_t len = c >> 5;
        if (len == 7) {
            if (ip >= n)
                return -1;
            len += in[ip++];
        }
        if (ip >= n)
            return -1;
        size_t dist = ((size_t)(c & 31) << 8) + in[ip++] + 1;
        len += 2;
        if (dist > op || len > cap - op)
            return -1;
        for (size_t k = 0; k < len; k++, op++) /* may overlap itself */
            out[op] = out[op - dist];
    }
    *got = op;
    return 0;
}

size_t sc__chunk_bound(size_t n)
{
    return n + n / 8 + 4096; /* libdeflate's zlib bound for any n is below this */
}

/* One filter applied: from[*n] into to (bound bytes); 1 when skipped (kept in from). */
static int codec_apply(unsigned id, unsigned elem, int level, const unsigned char *from,
                       size_t *n, unsigned char *to, size_t bound)
{
    if (id == SC__FILTER_SHUFFLE) {
        sc__shuffle(from, to, *n, elem);
        return 0;
    }
    if (id == SC__FILTER_LZF) {
        size_t got = sc__lzf_compress(from, *n, to, *n);
        if (!got)
            return 1;
        *n = got;
        return 0;
    }
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    size_t got = c ? libdeflate_zlib_compress(c, from, *n, to, bound) : 0;
    libdeflate_free_compressor(c);
    if (!got)
        return -1;
    *n = got;
    return 0;
}

int sc__chunk_encode(const sc__pipeline *p, int level, const unsigned char *in, size_t n,
                     unsigned char *out, size_t *got, unsigned *mask, unsigned char *tmp)
{
    /* tmp holds n bytes: only the shuffle, which keeps the size, writes there. */
    const unsigned char *from = in;
    *mask = 0;
    for (int i = 0; i < p->n; i++) {
        unsigned char *to = p->id[i] == SC__FILTER_SHUFFLE ? tmp : out;
        if (to == from)
            to = to == tmp ? out : tmp;
        int r = codec_apply(p->id[i], p->elem, level, from, &n, to, sc__chunk_bound(n));
        if (r < 0)
            return -1;
        if (r > 0)
            *mask |= 1u << i;
        else
            from = to;
    }
    if (from != out)
        memcpy(out, from, n);
    *got = n;
    return 0;
}

/* One filter undone: from[n] into to[want]; *n becomes the bytes out. */
static int codec_undo(unsigned id, unsigned elem, const unsigned char *from, size_t *n,
                      unsigned char *to, size_t want)
{
    size_t got = 0;
    if (id == SC__FILTER_SHUFFLE) {
        if (*n != want)
            return -1;
        sc__unshuffle(from, to, want, elem);
        return 0;
    }
    if (id == SC__FILTER_LZF) {
        if (sc__lzf_decompress(from, *n, to, want, &got) != 0)
            return -1;
        *n = got;
        return 0;
    }
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return -1;
    enum libdeflate_result r = libdeflate_zlib_decompress(d, from, *n, to, want, &got);
    libdeflate_free_decompressor(d);
    *n = got;
    return r == LIBDEFLATE_SUCCESS ? 0 : -1;
}

int sc__chunk_decode(const sc__pipeline *p, unsigned mask, const unsigned char *in, size_t n,
                     unsigned char *out, size_t want, unsigned char *tmp, const char *what,
                     sc_error *err)
{
    for (int i = 0; i < p->n; i++) /* shuffling single bytes moves nothing */
        if (p->id[i] == SC__FILTER_SHUFFLE && p->elem <= 1)
            mask |= 1u << i;
    /* Undone last filter first, alternating between out and tmp, ending in out. */
    int steps = 0;
    for (int i = 0; i < p->n; i++)
        steps += !(mask >> i & 1);
    const unsigned char *from = in;
    unsigned char *to = steps % 2 ? out : tmp;
    for (int i = p->n - 1; i >= 0; i--) {
        if (mask >> i & 1)
            continue;
        if (codec_undo(p->id[i], p->elem, from, &n, to, want) != 0)
            return sc__seterr(err, SC_EFORMAT, "%s: a damaged chunk (filter %u does not decode "
                              "it to %zu bytes)", what, p->id[i], want);
        from = to;
        to = to == out ? tmp : out;
    }
    if (!steps)
        memcpy(out, in, n < want ? n : want);
    if (n != want)
        return sc__seterr(err, SC_EFORMAT, "%s: a damaged chunk (%zu bytes decoded, %zu "
                          "expected)", what, n, want);
    return SC_OK;
}
