/*
 * plan_codec.c - the plan's wire format.
 *
 * Little-endian, fixed header, then per-unit sample and shard counts, then
 * the concatenated home shard lists as uint32_t, then the cuts, 24 bytes
 * each (layout in docs/plan-format.md).
 * The hash covers every byte after the hash field, so a decoder that has
 * checked it has checked everything; the structural checks that follow are
 * there so that a hash collision or a buggy encoder still cannot hand the
 * loader a plan with a shard owned twice.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "formats.h"
#include "hash.h"
#include "plan_state.h"

#define HASH_SEED UINT64_C(0x706c616e2d763031) /* "plan-v01" */

/* Byte offsets in the fixed header (docs/plan-format.md). */
enum {
    W_MAGIC = 0, W_VERSION = 4, W_HEADER_BYTES = 6, W_LEN = 8,
    W_HASH = 16, W_HASHED_FROM = 24, /* the hash covers bytes [24, len) */
    W_FINGERPRINT = 24, W_EPOCH = 32, W_SEED = 40, W_NSHARDS = 48, W_BATCH = 56,
    W_TOTAL = 64, W_BATCHES = 72, W_DROPPED = 80, W_PADDED = 88, W_MOVED = 96,
    W_EXCHANGE = 104, W_WORLD = 112, W_MODE = 116, W_REMAINDER = 117, W_ZERO = 118,
    W_PARTITIONS = 120, W_CUTS = 124,
};
#define CUT_BYTES 24

_Static_assert(W_CUTS + 4 == SC__PLAN_HEADER_BYTES, "the offsets end where the header does");

/* The header's 64-bit counts: one table for the encoder and the decoder. */
static const struct {
    unsigned off;
    size_t member; /* offsetof(sc_plan_info, ...) */
} plan_codec_u64[] = {
    {W_FINGERPRINT, offsetof(sc_plan_info, fingerprint)},
    {W_EPOCH, offsetof(sc_plan_info, epoch)},
    {W_SEED, offsetof(sc_plan_info, seed)},
    {W_NSHARDS, offsetof(sc_plan_info, nshards)},
    {W_BATCH, offsetof(sc_plan_info, batch_size)},
    {W_TOTAL, offsetof(sc_plan_info, total_samples)},
    {W_BATCHES, offsetof(sc_plan_info, batches_per_rank)},
    {W_DROPPED, offsetof(sc_plan_info, dropped)},
    {W_PADDED, offsetof(sc_plan_info, padded)},
    {W_MOVED, offsetof(sc_plan_info, moved)},
};
#define PLAN_CODEC_NU64 (sizeof plan_codec_u64 / sizeof plan_codec_u64[0])

static uint64_t *plan_codec_member(sc_plan_info *in, size_t i)
{
    return (uint64_t *)((char *)in + plan_codec_u64[i].member);
}

size_t sc__plan_wire_bytes(uint32_t units, uint64_t nshards, uint64_t ncuts)
{
    uint64_t body;
    if (__builtin_mul_overflow(nshards, (uint64_t)4, &body) ||
        __builtin_add_overflow(body, (uint64_t)units * 16, &body) ||
        ncuts > SC__PLAN_MAX_CUTS(units) ||
        __builtin_add_overflow(body, ncuts * CUT_BYTES, &body) ||
        __builtin_add_overflow(body, (uint64_t)SC__PLAN_HEADER_BYTES, &body) ||
        body > SIZE_MAX)
        return 0;
    return (size_t)body;
}

int sc__plan_seal(sc_plan *p, sc_error *err)
{
    const sc_plan_info *in = &p->info;
    uint32_t R = in->world_size, U = p->units;
    size_t len = sc__plan_wire_bytes(U, in->nshards, in->cuts);
    unsigned char *w;

    if (len == 0)
        return sc__seterr(err, SC_EOVERFLOW, "epoch %llu: plan too large",
                          (unsigned long long)in->epoch);
    free(p->wire);
    p->wire = w = malloc(len);
    p->wire_len = len;
    p->info.bytes = len;
    if (!w)
        return sc__seterr(err, SC_ENOMEM,
                          "epoch %llu: no memory for the %zu-byte plan message",
                          (unsigned long long)in->epoch, len);

    memcpy(w + W_MAGIC, SC__PLAN_MAGIC, 4);
    w[W_VERSION] = SC__PLAN_VERSION & 0xff;
    w[W_VERSION + 1] = SC__PLAN_VERSION >> 8;
    w[W_HEADER_BYTES] = SC__PLAN_HEADER_BYTES & 0xff;
    w[W_HEADER_BYTES + 1] = SC__PLAN_HEADER_BYTES >> 8;
    sc__put_u64(w + W_LEN, len);
    for (size_t i = 0; i < PLAN_CODEC_NU64; i++)
        sc__put_u64(w + plan_codec_u64[i].off, *plan_codec_member(&p->info, i));
    sc__put_u64(w + W_EXCHANGE, sc__double_bits(in->exchange));
    sc__put_u32(w + W_WORLD, R);
    w[W_MODE] = (unsigned char)in->mode;
    w[W_REMAINDER] = (unsigned char)in->remainder;
    w[W_ZERO] = w[W_ZERO + 1] = 0;
    sc__put_u32(w + W_PARTITIONS, (uint32_t)in->partitions);
    sc__put_u32(w + W_CUTS, (uint32_t)in->cuts);

    unsigned char *q = w + SC__PLAN_HEADER_BYTES;
    for (uint32_t u = 0; u < U; u++, q += 16) {
        sc__put_u64(q, p->unit_samples[u]);
        sc__put_u64(q + 8, p->unit_off[u + 1] - p->unit_off[u]);
    }
    for (uint64_t i = 0; i < in->nshards; i++, q += 4)
        sc__put_u32(q, p->order[i]);
    for (uint64_t i = 0; i < in->cuts; i++, q += CUT_BYTES) {
        sc__put_u32(q, p->cuts[i].shard);
        sc__put_u32(q + 4, p->cuts[i].to);
        sc__put_u64(q + 8, p->cuts[i].lo);
        sc__put_u64(q + 16, p->cuts[i].hi);
    }

    p->info.hash = sc__xxh64(w + W_HASHED_FROM, len - W_HASHED_FROM, HASH_SEED);
    sc__put_u64(w + W_HASH, p->info.hash);
    return SC_OK;
}

int sc_plan_encode(const sc_plan *plan, void **buf, size_t *len, sc_error *err)
{
    if (!plan || !buf || !len)
        return sc__seterr(err, SC_EINVAL, "sc_plan_encode: NULL argument");
    *buf = malloc(plan->wire_len);
    if (!*buf)
        return sc__seterr(err, SC_ENOMEM, "no memory for a %zu-byte plan",
                          plan->wire_len);
    memcpy(*buf, plan->wire, plan->wire_len);
    *len = plan->wire_len;
    return SC_OK;
}

/* Sizes and enums that must hold before anything is allocated from them. */
static int plan_codec_check_shape(const unsigned char *w, size_t len,
                                  sc_error *err)
{
    uint64_t nshards = sc__get_u64(w + W_NSHARDS);
    uint32_t R = sc__get_u32(w + W_WORLD), P = sc__get_u32(w + W_PARTITIONS);
    uint32_t U = P ? P : R, ncuts = sc__get_u32(w + W_CUTS);
    unsigned long long e = (unsigned long long)sc__get_u64(w + W_EPOCH);

    uint64_t B = sc__get_u64(w + W_BATCH), G = 0;
    if (R == 0 || U % R || nshards == 0 || nshards < U || nshards > SC__PLAN_MAX_SHARDS ||
        sc__plan_wire_bytes(U, nshards, ncuts) != len || B == 0 ||
        __builtin_mul_overflow(B, (uint64_t)R, &G) || G % U)
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu: %llu shards and %u cuts on %u ranks (%u "
                          "partitions) do not fit its %zu bytes",
                          e, (unsigned long long)nshards, ncuts, R, P, len);
    if (w[W_MODE] > SC_SHUFFLE_STICKY || w[W_REMAINDER] > SC_REMAINDER_PAD || w[W_ZERO] ||
        w[W_ZERO + 1])
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu: unknown mode %u or remainder %u",
                          e, w[W_MODE], w[W_REMAINDER]);
    return SC_OK;
}

static void plan_codec_read_header(const unsigned char *w, size_t len,
                                   sc_plan_info *in)
{
    for (size_t i = 0; i < PLAN_CODEC_NU64; i++)
        *plan_codec_member(in, i) = sc__get_u64(w + plan_codec_u64[i].off);
    in->exchange = sc__bits_double(sc__get_u64(w + W_EXCHANGE));
    in->mode = (sc_shuffle_mode)w[W_MODE];
    in->remainder = (sc_remainder)w[W_REMAINDER];
    in->hash = sc__get_u64(w + W_HASH);
    in->bytes = len;
    in->world_size = sc__get_u32(w + W_WORLD);
    in->partitions = sc__get_u32(w + W_PARTITIONS);
    in->cuts = sc__get_u32(w + W_CUTS);
}

/* Per-unit sample and shard counts; they must add up to the header's. */
static int plan_codec_read_units(const unsigned char *w, sc_plan *p, sc_error *err)
{
    sc_plan_info *in = &p->info;
    unsigned long long e = (unsigned long long)in->epoch;
    const unsigned char *q = w + SC__PLAN_HEADER_BYTES;
    uint64_t off = 0, sum = 0;

    p->unit_off[0] = 0;
    for (uint32_t u = 0; u < p->units; u++, q += 16) {
        uint64_t samples = sc__get_u64(q), cnt = sc__get_u64(q + 8);
        if (cnt > in->nshards - off || __builtin_add_overflow(sum, samples, &sum))
            return sc__seterr(err, SC_EFORMAT, "plan for epoch %llu: unit %u's counts overflow",
                              e, u);
        off += cnt;
        p->unit_off[u + 1] = off;
        p->unit_samples[u] = samples;
    }
    /* Served samples add up to the total, less drop's extra: at most the total. */
    if (off != in->nshards || sum > in->total_samples)
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu: units list %llu shards and %llu samples, the "
                          "header says %llu and %llu",
                          e, (unsigned long long)off, (unsigned long long)sum,
                          (unsigned long long)in->nshards,
                          (unsigned long long)in->total_samples);
    sc__plan_rank_extremes(p);
    return SC_OK;
}

/* The cuts: shards and units in range, ranges non-empty, from home elsewhere. */
static int plan_codec_read_cuts(const unsigned char *w, sc_plan *p, sc_error *err)
{
    const unsigned char *q = w + SC__PLAN_HEADER_BYTES + (size_t)16 * p->units +
                             (size_t)4 * p->info.nshards;
    for (uint64_t i = 0; i < p->info.cuts; i++, q += CUT_BYTES) {
        sc__cut c = {sc__get_u32(q), 0, sc__get_u32(q + 4), sc__get_u64(q + 8),
                     sc__get_u64(q + 16)};
        if (c.shard >= p->info.nshards || c.to >= p->units || c.lo >= c.hi ||
            (c.from = p->owner[c.shard]) == c.to)
            return sc__seterr(err, SC_EFORMAT,
                              "plan for epoch %llu: cut %llu (shard %u to unit %u, [%llu, "
                              "%llu)) is not a range of a shard sent from its home",
                              (unsigned long long)p->info.epoch, (unsigned long long)i,
                              c.shard, c.to, (unsigned long long)c.lo,
                              (unsigned long long)c.hi);
        p->cuts[i] = c;
    }
    sc__plan_index_cuts(p);
    for (uint64_t i = 1; i < p->info.cuts; i++)
        if (p->by_shard[i].shard == p->by_shard[i - 1].shard &&
            p->by_shard[i].lo < p->by_shard[i - 1].hi)
            return sc__seterr(err, SC_EFORMAT, "plan for epoch %llu: shard %u is cut twice "
                              "over the same samples", (unsigned long long)p->info.epoch,
                              p->by_shard[i].shard);
    return SC_OK;
}

/* The concatenated shard lists: every shard in range and owned once. */
static int plan_codec_read_shards(const unsigned char *w, sc_plan *p,
                                  sc_error *err)
{
    uint64_t nshards = p->info.nshards;
    const unsigned char *q = w + SC__PLAN_HEADER_BYTES + (size_t)16 * p->units;
    int rc = SC_OK;

    unsigned char *seen = calloc(nshards, 1);
    if (!seen)
        return sc__seterr(err, SC_ENOMEM, "no memory to decode the plan");
    for (uint64_t i = 0; i < nshards && rc == SC_OK; i++, q += 4) {
        uint32_t s = sc__get_u32(q);
        if (s >= nshards || seen[s]++)
            rc = sc__seterr(err, SC_EFORMAT,
                            "plan for epoch %llu: shard %u is out of range or "
                            "owned twice",
                            (unsigned long long)p->info.epoch, s);
        else
            p->order[i] = s;
    }
    free(seen);
    return rc;
}

/* The bytes decoded are the plan's canonical form: keep them, never re-encode. */
static int plan_codec_keep_wire(sc_plan *p, const unsigned char *w, size_t len,
                                sc_error *err)
{
    if (!(p->wire = malloc(len)))
        return sc__seterr(err, SC_ENOMEM, "no memory to decode the plan");
    memcpy(p->wire, w, len);
    p->wire_len = len;
    return SC_OK;
}

/* The structural checks; the caller has already checked length and hash. */
static int plan_codec_decode_body(const unsigned char *w, size_t len,
                                  sc_plan **out, sc_error *err)
{
    sc_plan *p = NULL;
    int rc;

    if ((rc = plan_codec_check_shape(w, len, err)) != SC_OK)
        return rc;
    uint32_t R = sc__get_u32(w + W_WORLD), P = sc__get_u32(w + W_PARTITIONS);
    if ((rc = sc__plan_alloc(R, P ? P : R, sc__get_u64(w + W_NSHARDS), &p, err)) != SC_OK)
        return rc;
    plan_codec_read_header(w, len, &p->info);
    p->unit_batch = p->info.batch_size * R / p->units;
    if ((rc = plan_codec_read_units(w, p, err)) == SC_OK &&
        (rc = plan_codec_read_shards(w, p, err)) == SC_OK &&
        (sc__plan_fill_owner(p), rc = plan_codec_read_cuts(w, p, err)) == SC_OK &&
        (rc = plan_codec_keep_wire(p, w, len, err)) == SC_OK) {
        *out = p;
    } else {
        sc_plan_free(p);
    }
    return rc;
}

int sc_plan_decode(const void *buf, size_t len, sc_plan **out, sc_error *err)
{
    const unsigned char *w = buf;

    if (!out)
        return sc__seterr(err, SC_EINVAL, "sc_plan_decode: NULL output");
    *out = NULL;
    if (!buf && len)
        return sc__seterr(err, SC_EINVAL, "sc_plan_decode: NULL buffer");
    if (len < W_LEN || memcmp(w + W_MAGIC, SC__PLAN_MAGIC, 4) != 0)
        return sc__seterr(err, SC_EFORMAT,
                          "not a shardcache plan (%zu bytes, no SCPL magic)",
                          len);
    unsigned version = w[W_VERSION] | (unsigned)w[W_VERSION + 1] << 8;
    unsigned hdr = w[W_HEADER_BYTES] | (unsigned)w[W_HEADER_BYTES + 1] << 8;
    if (version != SC__PLAN_VERSION)
        return sc__seterr(err, SC_EVERSION,
                          "plan format version %u; this build reads version %u%s",
                          version, SC__PLAN_VERSION,
                          version < SC__PLAN_VERSION
                              ? " (plans before version 3 dropped and padded whole shards)"
                              : "");
    if (hdr != SC__PLAN_HEADER_BYTES || len < SC__PLAN_HEADER_BYTES)
        return sc__seterr(err, SC_EFORMAT,
                          "plan truncated or malformed: %zu bytes, header of "
                          "%u bytes",
                          len, hdr);
    uint64_t want = sc__get_u64(w + W_LEN);
    if (want != len)
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu is %s: the header says %llu "
                          "bytes, got %zu",
                          (unsigned long long)sc__get_u64(w + W_EPOCH),
                          want > len ? "truncated" : "followed by extra bytes",
                          (unsigned long long)want, len);
    uint64_t hash = sc__xxh64(w + W_HASHED_FROM, len - W_HASHED_FROM, HASH_SEED);
    if (hash != sc__get_u64(w + W_HASH))
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu is corrupted: hash %016llx, "
                          "the header says %016llx",
                          (unsigned long long)sc__get_u64(w + W_EPOCH),
                          (unsigned long long)hash,
                          (unsigned long long)sc__get_u64(w + W_HASH));
    return plan_codec_decode_body(w, len, out, err);
}
