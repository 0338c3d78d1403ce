/*
 * plan_codec.c - the plan's wire format.
 *
 * Little-endian, fixed header, then per-rank sample and shard counts, then
 * the concatenated shard lists as uint32_t (layout in docs/plan-format.md).
 * The hash covers every byte after the hash field, so a decoder that has
 * checked it has checked everything; the structural checks that follow are
 * there so that a hash collision or a buggy encoder still cannot hand the
 * loader a plan with a shard owned twice.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "plan.h"

#define HASH_SEED UINT64_C(0x706c616e2d763031) /* "plan-v01" */
#define HASH_OFFSET 16 /* the hash covers bytes [24, len) */
#define HASHED_FROM 24

size_t sc__plan_wire_bytes(uint32_t world_size, uint64_t nshards)
{
    uint64_t body;
    if (__builtin_mul_overflow(nshards, (uint64_t)4, &body) ||
        __builtin_add_overflow(body, (uint64_t)world_size * 16, &body) ||
        __builtin_add_overflow(body, (uint64_t)SC__PLAN_HEADER_BYTES, &body) ||
        body > SIZE_MAX)
        return 0;
    return (size_t)body;
}

int sc__plan_seal(sc_plan *p, sc_error *err)
{
    const sc_plan_info *in = &p->info;
    uint32_t R = in->world_size;
    size_t len = sc__plan_wire_bytes(R, in->nshards);
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

    memcpy(w, SC__PLAN_MAGIC, 4);
    w[4] = SC__PLAN_VERSION & 0xff;
    w[5] = SC__PLAN_VERSION >> 8;
    w[6] = SC__PLAN_HEADER_BYTES & 0xff;
    w[7] = SC__PLAN_HEADER_BYTES >> 8;
    sc__put_u64(w + 8, len);
    sc__put_u64(w + 24, in->fingerprint);
    sc__put_u64(w + 32, in->epoch);
    sc__put_u64(w + 40, in->seed);
    sc__put_u64(w + 48, in->nshards);
    sc__put_u64(w + 56, in->batch_size);
    sc__put_u64(w + 64, in->total_samples);
    sc__put_u64(w + 72, in->batches_per_rank);
    sc__put_u64(w + 80, in->dropped);
    sc__put_u64(w + 88, in->padded);
    sc__put_u64(w + 96, in->moved);
    sc__put_u64(w + 104, sc__double_bits(in->exchange));
    sc__put_u32(w + 112, R);
    w[116] = (unsigned char)in->mode;
    w[117] = (unsigned char)in->remainder;
    w[118] = w[119] = 0;

    unsigned char *q = w + SC__PLAN_HEADER_BYTES;
    for (uint32_t r = 0; r < R; r++, q += 16) {
        sc__put_u64(q, p->rank_samples[r]);
        sc__put_u64(q + 8, p->rank_off[r + 1] - p->rank_off[r]);
    }
    for (uint64_t i = 0; i < in->nshards; i++, q += 4)
        sc__put_u32(q, p->order[i]);

    p->info.hash = sc__xxh64(w + HASHED_FROM, len - HASHED_FROM, HASH_SEED);
    sc__put_u64(w + HASH_OFFSET, p->info.hash);
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

/* The structural checks; the caller has already checked length and hash. */
static int decode_body(const unsigned char *w, size_t len, sc_plan **out,
                       sc_error *err)
{
    uint64_t nshards = sc__get_u64(w + 48);
    uint32_t R = sc__get_u32(w + 112);
    unsigned long long e = (unsigned long long)sc__get_u64(w + 32);
    sc_plan *p = NULL;
    unsigned char *seen = NULL;
    int rc;

    if (R == 0 || nshards == 0 || nshards < R || nshards > SC__PLAN_MAX_SHARDS ||
        sc__plan_wire_bytes(R, nshards) != len)
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu: %llu shards on %u ranks does "
                          "not fit its %zu bytes",
                          e, (unsigned long long)nshards, R, len);
    if (w[116] > SC_SHUFFLE_STICKY || w[117] > SC_REMAINDER_PAD || w[118] ||
        w[119])
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu: unknown mode %u or remainder %u",
                          e, w[116], w[117]);
    if ((rc = sc__plan_alloc(R, nshards, &p, err)) != SC_OK)
        return rc;

    sc_plan_info *in = &p->info;
    in->fingerprint = sc__get_u64(w + 24);
    in->epoch = e;
    in->seed = sc__get_u64(w + 40);
    in->batch_size = sc__get_u64(w + 56);
    in->total_samples = sc__get_u64(w + 64);
    in->batches_per_rank = sc__get_u64(w + 72);
    in->dropped = sc__get_u64(w + 80);
    in->padded = sc__get_u64(w + 88);
    in->moved = sc__get_u64(w + 96);
    in->exchange = sc__bits_double(sc__get_u64(w + 104));
    in->mode = (sc_shuffle_mode)w[116];
    in->remainder = (sc_remainder)w[117];
    in->hash = sc__get_u64(w + HASH_OFFSET);
    in->bytes = len;

    const unsigned char *q = w + SC__PLAN_HEADER_BYTES;
    uint64_t off = 0, sum = 0, lo = UINT64_MAX, hi = 0;
    p->rank_off[0] = 0;
    for (uint32_t r = 0; r < R; r++, q += 16) {
        uint64_t samples = sc__get_u64(q), cnt = sc__get_u64(q + 8);
        if (cnt > nshards - off || __builtin_add_overflow(sum, samples, &sum)) {
            rc = sc__seterr(err, SC_EFORMAT,
                            "plan for epoch %llu: rank %u's counts overflow",
                            e, r);
            goto fail;
        }
        off += cnt;
        p->rank_off[r + 1] = off;
        p->rank_samples[r] = samples;
        lo = samples < lo ? samples : lo;
        hi = samples > hi ? samples : hi;
    }
    in->min_rank_samples = lo;
    in->max_rank_samples = hi;
    if (off != nshards || sum != in->total_samples) {
        rc = sc__seterr(err, SC_EFORMAT,
                        "plan for epoch %llu: ranks list %llu shards and %llu "
                        "samples, the header says %llu and %llu",
                        e, (unsigned long long)off, (unsigned long long)sum,
                        (unsigned long long)nshards,
                        (unsigned long long)in->total_samples);
        goto fail;
    }
    if (!(seen = calloc(nshards, 1))) {
        rc = sc__seterr(err, SC_ENOMEM, "no memory to decode the plan");
        goto fail;
    }
    for (uint64_t i = 0; i < nshards; i++, q += 4) {
        uint32_t s = sc__get_u32(q);
        if (s >= nshards || seen[s]++) {
            rc = sc__seterr(err, SC_EFORMAT,
                            "plan for epoch %llu: shard %u is out of range or "
                            "owned twice",
                            e, s);
            goto fail;
        }
        p->order[i] = s;
    }
    free(seen);
    seen = NULL;
    sc__plan_fill_owner(p);

    if (!(p->wire = malloc(len))) {
        rc = sc__seterr(err, SC_ENOMEM, "no memory to decode the plan");
        goto fail;
    }
    memcpy(p->wire, w, len);
    p->wire_len = len;
    *out = p;
    return SC_OK;

fail:
    free(seen);
    sc_plan_free(p);
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
    if (len < 8 || memcmp(w, SC__PLAN_MAGIC, 4) != 0)
        return sc__seterr(err, SC_EFORMAT,
                          "not a shardcache plan (%zu bytes, no SCPL magic)",
                          len);
    unsigned version = w[4] | (unsigned)w[5] << 8;
    unsigned hdr = w[6] | (unsigned)w[7] << 8;
    if (version != SC__PLAN_VERSION)
        return sc__seterr(err, SC_EVERSION,
                          "plan format version %u; this build reads version %u",
                          version, SC__PLAN_VERSION);
    if (hdr != SC__PLAN_HEADER_BYTES || len < SC__PLAN_HEADER_BYTES)
        return sc__seterr(err, SC_EFORMAT,
                          "plan truncated or malformed: %zu bytes, header of "
                          "%u bytes",
                          len, hdr);
    uint64_t want = sc__get_u64(w + 8);
    if (want != len)
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu is %s: the header says %llu "
                          "bytes, got %zu",
                          (unsigned long long)sc__get_u64(w + 32),
                          want > len ? "truncated" : "followed by extra bytes",
                          (unsigned long long)want, len);
    uint64_t hash = sc__xxh64(w + HASHED_FROM, len - HASHED_FROM, HASH_SEED);
    if (hash != sc__get_u64(w + HASH_OFFSET))
        return sc__seterr(err, SC_EFORMAT,
                          "plan for epoch %llu is corrupted: hash %016llx, "
                          "the header says %016llx",
                          (unsigned long long)sc__get_u64(w + 32),
                          (unsigned long long)hash,
                          (unsigned long long)sc__get_u64(w + HASH_OFFSET));
    return decode_body(w, len, out, err);
}
