/*
 * libFuzzer target: sc__ckpt_decode() (the records sc_loader_resume reads)
 * on arbitrary bytes must never crash or read out of bounds; a refusal says
 * why, with the status it returns; a record it accepts re-encodes to the
 * very bytes it came from, which decode to the same record.  Random bytes
 * rarely carry a good hash, so the input's first 104 bytes are also read as
 * a record's thirteen fields, which must survive encode and decode, and
 * whose encoding must be refused once any one bit of it is flipped.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "hash.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void round_trip(const sc__ckpt *c, const unsigned char *bytes)
{
    unsigned char again[SC__CKPT_BYTES];
    sc__ckpt back;
    sc_error err;
    sc__ckpt_encode(c, again);
    if (bytes && memcmp(again, bytes, SC__CKPT_BYTES) != 0)
        abort(); /* accepted bytes are exactly the encoding of what they decode to */
    memset(&back, 0xa5, sizeof back);
    if (sc__ckpt_decode(again, sizeof again, 0, &back, &err) != SC_OK ||
        memcmp(&back, c, sizeof back) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    sc__ckpt c;
    sc_error err = SC_ERROR_INIT;
    int rc = sc__ckpt_decode(size ? data : NULL, size, 7, &c, &err);
    if (rc != SC_OK) {
        if ((rc != SC_EFORMAT && rc != SC_EVERSION) || err.code != rc || err.msg[0] == '\0' ||
            !strstr(err.msg, "checkpoint 7"))
            abort(); /* a refusal names the blob and says why */
    } else {
        if (size != SC__CKPT_BYTES)
            abort();
        round_trip(&c, data);
    }

    /* Any thirteen words are a record: it travels, and is checked. */
    if (size < 13 * 8)
        return 0;
    uint64_t *f[13] = {&c.epoch, &c.consumed, &c.rank, &c.world, &c.seed,
                       &c.mode, &c.exchange_bits, &c.remainder, &c.batch,
                       &c.window, &c.fingerprint, &c.nshards, &c.batches};
    for (int i = 0; i < 13; i++)
        *f[i] = sc__get_u64(data + 8 * i);
    round_trip(&c, NULL);
    if (size > 13 * 8) {
        unsigned char rec[SC__CKPT_BYTES];
        sc__ckpt_encode(&c, rec);
        size_t bit = (data[13 * 8] | (size > 13 * 8 + 1 ? data[13 * 8 + 1] << 8 : 0)) %
                     (8 * SC__CKPT_BYTES);
        rec[bit / 8] ^= (unsigned char)(1u << bit % 8);
        if (sc__ckpt_decode(rec, sizeof rec, 0, &c, &err) == SC_OK)
            abort(); /* one flipped bit: a damaged record, never another record */
    }
    return 0;
}
