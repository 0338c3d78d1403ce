/*
 * libFuzzer target: sc__ckpt_decode() (the records sc_loader_resume reads)
 * on arbitrary bytes must never crash or read out of bounds; a refusal says
 * why, with the status it returns; a record it accepts, plain or resliced,
 * re-encodes to the very bytes it came from, which decode to the same
 * record.  Random bytes rarely carry a good hash, so the input's first 152
 * bytes are also read as a record's nineteen fields (the mode word's high
 * half its partitions, as records store them; its first byte: plain
 * or resliced, its second: how many pieces, from the bytes after), which
 * must survive encode and decode, and whose encoding must be refused once
 * any one bit of it is flipped.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "hash.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

enum { NFIELDS = 19 };

static uint64_t *fields(sc__ckpt *c, int i)
{
    uint64_t *f[NFIELDS] = {&c->epoch,   &c->consumed,    &c->rank,      &c->world,
                            &c->seed,    &c->mode,        &c->exchange_bits, &c->remainder,
                            &c->batch,   &c->window,      &c->fingerprint, &c->nshards,
                            &c->batches, &c->world0,      &c->batches0,  &c->run,
                            &c->padded,  &c->dropped,     &c->npieces};
    return f[i];
}

/* Two records with the same fields and pieces. */
static int same(sc__ckpt *a, const sc__piece *pa, sc__ckpt *b)
{
    if (a->resliced != b->resliced || a->partitions != b->partitions)
        return 0;
    for (int i = 0; i < NFIELDS; i++)
        if (*fields(a, i) != *fields(b, i))
            return 0;
    for (uint64_t i = 0; a->resliced && i < a->npieces; i++) {
        sc__piece x = sc__ckpt_piece(b, i);
        if (x.q != pa[i].q || x.start != pa[i].start || x.end != pa[i].end)
            return 0;
    }
    return 1;
}

static void round_trip(sc__ckpt *c, const sc__piece *pieces, const unsigned char *bytes)
{
    unsigned char again[SC__CKPT_MAX_BYTES];
    sc__ckpt back;
    sc_error err;
    size_t n = sc__ckpt_size(c);
    sc__ckpt_encode(c, pieces, again);
    if (bytes && memcmp(again, bytes, n) != 0)
        abort(); /* accepted bytes are exactly the encoding of what they decode to */
    memset(&back, 0xa5, sizeof back);
    if (sc__ckpt_decode(again, n, 0, &back, &err) != SC_OK || !same(c, pieces, &back))
        abort();
}

/* A record's pieces, as decoded: the round trip re-encodes them. */
static void pieces_of(const sc__ckpt *c, sc__piece *out)
{
    for (uint64_t i = 0; c->resliced && i < c->npieces; i++)
        out[i] = sc__ckpt_piece(c, i);
}

/* The input's words as a record with valid pieces; 0 if too short. */
static int made_up(const unsigned char *data, size_t size, sc__ckpt *c, sc__piece *pieces)
{
    if (size < NFIELDS * 8)
        return 0;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NFIELDS; i++)
        *fields(c, i) = sc__get_u64(data + 8 * i);
    c->resliced = data[0] & 1;
    c->partitions = c->mode >> 32; /* the mode word's high half, as records hold them */
    c->mode &= UINT32_MAX;
    if (!c->resliced) {
        for (int i = 13; i < NFIELDS; i++)
            *fields(c, i) = 0;
        return 1;
    }
    c->world0 = 1 + c->world0 % SC__CKPT_MAX_WORLD;
    size_t room = (size - NFIELDS * 8) / 16;
    c->npieces = data[1] % (SC__CKPT_MAX_PIECES + 1);
    c->npieces = c->npieces < room ? c->npieces : room;
    for (uint64_t i = 0; i < c->npieces; i++) {
        const unsigned char *p = data + NFIELDS * 8 + 16 * i;
        uint64_t a = sc__get_u64(p) % (SC__CKPT_MAX_POS - 1), b = sc__get_u64(p + 8);
        pieces[i].q = b % c->world0;
        pieces[i].start = a;
        pieces[i].end = a + 1 + b % (SC__CKPT_MAX_POS - a);
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    sc__ckpt c;
    sc__piece pieces[SC__CKPT_MAX_PIECES];
    sc_error err = SC_ERROR_INIT;
    int rc = sc__ckpt_decode(size ? data : NULL, size, 7, &c, &err);
    if (rc != SC_OK) {
        if ((rc != SC_EFORMAT && rc != SC_EVERSION) || err.code != rc || err.msg[0] == '\0' ||
            !strstr(err.msg, "checkpoint 7"))
            abort(); /* a refusal names the blob and says why */
    } else {
        if (size != sc__ckpt_size(&c) || size > SC__CKPT_MAX_BYTES)
            abort();
        pieces_of(&c, pieces);
        round_trip(&c, pieces, data);
    }

    /* Any nineteen words are a record: it travels, and is checked. */
    if (!made_up(data, size, &c, pieces))
        return 0;
    round_trip(&c, pieces, NULL);
    unsigned char rec[SC__CKPT_MAX_BYTES];
    size_t n = sc__ckpt_size(&c);
    sc__ckpt_encode(&c, pieces, rec);
    size_t bit = (data[2] | data[3] << 8 | (size_t)data[4] << 16) % (8 * n);
    rec[bit / 8] ^= (unsigned char)(1u << bit % 8);
    if (sc__ckpt_decode(rec, n, 0, &c, &err) == SC_OK)
        abort(); /* one flipped bit: a damaged record, never another record */
    return 0;
}
