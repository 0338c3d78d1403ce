/*
 * ckpt.c - the checkpoint record's bytes.
 *
 * The record is 16 little-endian words: magic, version, then epoch,
 * consumed, rank, world, seed, mode, exchange (IEEE bits), remainder,
 * batch, window, fingerprint, shards, batches per rank, and XXH64 of the
 * fifteen before it.
 */
#include "ckpt.h"

#include "error.h"
#include "hash.h"

#define CKPT_MAGIC UINT64_C(0x31305450434b4353) /* "SCCKPT01" */
/* 2: plans spread each rank's share and windows may be auto (resolved). */
#define CKPT_VERSION 2
#define CKPT_SEED UINT64_C(0x636b7074)

void sc__ckpt_encode(const sc__ckpt *c, unsigned char out[SC__CKPT_BYTES])
{
    const uint64_t w[15] = {CKPT_MAGIC,   CKPT_VERSION,     c->epoch,  c->consumed,
                            c->rank,      c->world,         c->seed,   c->mode,
                            c->exchange_bits, c->remainder, c->batch,  c->window,
                            c->fingerprint, c->nshards,     c->batches};
    for (int i = 0; i < 15; i++)
        sc__put_u64(out + 8 * i, w[i]);
    sc__put_u64(out + 120, sc__xxh64(out, 120, CKPT_SEED));
}

int sc__ckpt_decode(const void *buf, size_t len, int which, sc__ckpt *out, sc_error *err)
{
    const unsigned char *b = buf;
    if (!buf || len != SC__CKPT_BYTES)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: %zu bytes, not a shardcache "
                          "checkpoint (%d bytes)", which, buf ? len : 0, SC__CKPT_BYTES);
    if (sc__get_u64(b) != CKPT_MAGIC)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: not a shardcache checkpoint", which);
    if (sc__get_u64(b + 8) != CKPT_VERSION)
        return sc__seterr(err, SC_EVERSION, "checkpoint %d: version %llu, this build reads %d",
                          which, (unsigned long long)sc__get_u64(b + 8), CKPT_VERSION);
    if (sc__get_u64(b + 120) != sc__xxh64(b, 120, CKPT_SEED))
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: damaged (its hash does not match)",
                          which);
    uint64_t *f[13] = {&out->epoch, &out->consumed, &out->rank, &out->world, &out->seed,
                       &out->mode, &out->exchange_bits, &out->remainder, &out->batch,
                       &out->window, &out->fingerprint, &out->nshards, &out->batches};
    for (int i = 0; i < 13; i++)
        *f[i] = sc__get_u64(b + 16 + 8 * i);
    return SC_OK;
}

