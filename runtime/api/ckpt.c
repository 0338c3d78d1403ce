/*
 * ckpt.c - the checkpoint record's bytes.
 *
 * Little-endian words.  A plain record (version 4) is 16 of them: magic,
 * version, then epoch, consumed, rank, world, seed, mode (SC_PARTITIONS in
 * its high 32 bits), exchange (IEEE bits), remainder, batch, window,
 * fingerprint, shards, batches per rank, and XXH64 of the fifteen before
 * it.  A resliced record (version 5) has
 * the same first fifteen, then world0, batches0, run, padded, dropped,
 * npieces, two words a piece (q << 40 | start, end), and XXH64 of all
 * before it.
 */
#include "ckpt.h"

#include "error.h"
#include "formats.h" /* the magic and versions */
#include "hash.h"

#define CKPT_SEED UINT64_C(0x636b7074)
#define CKPT_HEAD_WORDS 21 /* a resliced record's words before its pieces */

_Static_assert(SC__CKPT_HEAD_BYTES == 8 * CKPT_HEAD_WORDS + 8, "the head is its words and hash");

size_t sc__ckpt_size(const sc__ckpt *c)
{
    return c->resliced ? SC__CKPT_HEAD_BYTES + SC__CKPT_PIECE_BYTES * (size_t)c->npieces
                       : SC__CKPT_BYTES;
}

/* The words both kinds share, after magic and version; n of them. */
static int ckpt_fields(sc__ckpt *c, uint64_t *f[CKPT_HEAD_WORDS - 2])
{
    uint64_t *all[CKPT_HEAD_WORDS - 2] = {
        &c->epoch,       &c->consumed,  &c->rank,     &c->world,   &c->seed,
        &c->mode,        &c->exchange_bits, &c->remainder, &c->batch, &c->window,
        &c->fingerprint, &c->nshards,   &c->batches,  &c->world0,  &c->batches0,
        &c->run,         &c->padded,    &c->dropped,  &c->npieces};
    for (int i = 0; i < CKPT_HEAD_WORDS - 2; i++)
        f[i] = all[i];
    return c->resliced ? CKPT_HEAD_WORDS - 2 : 13;
}

void sc__ckpt_encode(const sc__ckpt *c, const sc__piece *pieces, unsigned char *out)
{
    sc__ckpt copy = *c;
    copy.mode = (c->mode & UINT32_MAX) | c->partitions << 32;
    uint64_t *f[CKPT_HEAD_WORDS - 2];
    int n = ckpt_fields(&copy, f);
    sc__put_u64(out, SC__CKPT_MAGIC);
    sc__put_u64(out + 8, c->resliced ? SC__CKPT_VERSION_RESLICED : SC__CKPT_VERSION_PLAIN);
    for (int i = 0; i < n; i++)
        sc__put_u64(out + 16 + 8 * i, *f[i]);
    unsigned char *p = out + 16 + 8 * n;
    for (uint64_t i = 0; c->resliced && i < c->npieces; i++, p += SC__CKPT_PIECE_BYTES) {
        sc__put_u64(p, pieces[i].q << 40 | pieces[i].start);
        sc__put_u64(p + 8, pieces[i].end);
    }
    size_t body = sc__ckpt_size(c) - 8;
    sc__put_u64(out + body, sc__xxh64(out, body, CKPT_SEED));
}

sc__piece sc__ckpt_piece(const sc__ckpt *c, uint64_t i)
{
    const unsigned char *p = c->raw + 8 * CKPT_HEAD_WORDS + SC__CKPT_PIECE_BYTES * i;
    uint64_t w = sc__get_u64(p);
    sc__piece x = {w >> 40, w & (SC__CKPT_MAX_POS - 1), sc__get_u64(p + 8)};
    return x;
}

/* The length a record of this version needs; SC_OK or why not. */
static int ckpt_check_length(const unsigned char *b, size_t len, int which, uint64_t version,
                             sc_error *err)
{
    if (version == SC__CKPT_VERSION_PLAIN)
        return len == SC__CKPT_BYTES
                   ? SC_OK
                   : sc__seterr(err, SC_EFORMAT, "checkpoint %d: %zu bytes, a plain record has "
                                "%d", which, len, SC__CKPT_BYTES);
    if (len < SC__CKPT_HEAD_BYTES)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: %zu bytes, a resliced record has "
                          "at least %d", which, len, SC__CKPT_HEAD_BYTES);
    uint64_t np = sc__get_u64(b + 8 * (CKPT_HEAD_WORDS - 1));
    if (np > SC__CKPT_MAX_PIECES || len != SC__CKPT_HEAD_BYTES + SC__CKPT_PIECE_BYTES * np)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: %zu bytes for %llu pieces (at most "
                          "%d): not a shardcache checkpoint", which, len,
                          (unsigned long long)np, (int)SC__CKPT_MAX_PIECES);
    return SC_OK;
}

/* A resliced record's pieces are ranges of the plan's ranks' positions. */
static int ckpt_check_pieces(const sc__ckpt *c, int which, sc_error *err)
{
    if (c->world0 < 1 || c->world0 > SC__CKPT_MAX_WORLD)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: an epoch planned for %llu ranks",
                          which, (unsigned long long)c->world0);
    for (uint64_t i = 0; i < c->npieces; i++) {
        sc__piece x = sc__ckpt_piece(c, i);
        if (x.q >= c->world0 || x.start >= x.end || x.end > SC__CKPT_MAX_POS)
            return sc__seterr(err, SC_EFORMAT, "checkpoint %d: piece %llu (rank %llu, "
                              "[%llu, %llu)) is not a range of the plan's %llu ranks' samples",
                              which, (unsigned long long)i, (unsigned long long)x.q,
                              (unsigned long long)x.start, (unsigned long long)x.end,
                              (unsigned long long)c->world0);
    }
    return SC_OK;
}

int sc__ckpt_decode(const void *buf, size_t len, int which, sc__ckpt *out, sc_error *err)
{
    const unsigned char *b = buf;
    if (!buf || len < 16 || sc__get_u64(b) != SC__CKPT_MAGIC)
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: %zu bytes, not a shardcache "
                          "checkpoint", which, buf ? len : 0);
    uint64_t version = sc__get_u64(b + 8);
    if (version >= 2 && version <= SC__CKPT_VERSION_WHOLE_SHARDS)
        return sc__seterr(err, SC_EVERSION,
                          "checkpoint %d: version %llu, written by a shardcache whose plans "
                          "dropped and padded whole shards (plan format 2); this build cuts the "
                          "remainder at sample granularity (plan format 3), so it cannot "
                          "continue that epoch: begin the next epoch without resuming, or "
                          "finish this one with the version that wrote it",
                          which, (unsigned long long)version);
    if (version != SC__CKPT_VERSION_PLAIN && version != SC__CKPT_VERSION_RESLICED)
        return sc__seterr(err, SC_EVERSION, "checkpoint %d: version %llu, this build reads %d "
                          "and %d", which, (unsigned long long)version, SC__CKPT_VERSION_PLAIN,
                          SC__CKPT_VERSION_RESLICED);
    int rc = ckpt_check_length(b, len, which, version, err);
    if (rc != SC_OK)
        return rc;
    if (sc__get_u64(b + len - 8) != sc__xxh64(b, len - 8, CKPT_SEED))
        return sc__seterr(err, SC_EFORMAT, "checkpoint %d: damaged (its hash does not match)",
                          which);
    sc__ckpt c = {.resliced = version == SC__CKPT_VERSION_RESLICED, .raw = b, .nraw = len};
    uint64_t *f[CKPT_HEAD_WORDS - 2];
    int n = ckpt_fields(&c, f);
    for (int i = 0; i < n; i++)
        *f[i] = sc__get_u64(b + 16 + 8 * i);
    c.partitions = c.mode >> 32;
    c.mode &= UINT32_MAX;
    if (c.resliced && (rc = ckpt_check_pieces(&c, which, err)) != SC_OK)
        return rc;
    *out = c;
    return SC_OK;
}
