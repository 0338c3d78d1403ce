/*
 * libFuzzer target: sc__entry_decode() (a cache entry's header, read from
 * a node-local file anyone on the node might have damaged) on arbitrary
 * bytes must never crash or read past its 512 bytes; a header it accepts
 * has at most SC_MAX_FIELDS fields and re-encodes to bytes that decode to
 * the same header.  Random bytes rarely carry a good hash, so the input is
 * also read as a header's fields, which must survive encode and decode,
 * and whose encoding must be refused once one bit of its hashed part flips.
 */
#include <stdlib.h>
#include <string.h>

#include "entry.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void entry_round_trip(const sc__entry *h)
{
    unsigned char b[SC__ENTRY_BYTES];
    sc__entry back;
    sc__entry_encode(h, b);
    memset(&back, 0xa5, sizeof back);
    if (sc__entry_decode(b, &back) != 0 || memcmp(&back, h, sizeof back) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    unsigned char b[SC__ENTRY_BYTES] = {0};
    memcpy(b, data, size < sizeof b ? size : sizeof b);
    sc__entry h;
    if (sc__entry_decode(b, &h) == 0) {
        if (h.nfields > SC_MAX_FIELDS)
            abort();
        entry_round_trip(&h);
    }
    /* The input's bytes as a header's fields. */
    sc__entry f;
    memset(&f, 0, sizeof f);
    memcpy(&f, data, size < sizeof f ? size : sizeof f);
    f.nfields %= SC_MAX_FIELDS + 1;
    entry_round_trip(&f);
    if (size > 0) {
        unsigned char enc[SC__ENTRY_BYTES];
        sc__entry_encode(&f, enc);
        size_t bit = data[0] % (8 * (48 + 16 * SC_MAX_FIELDS)); /* a bit of the hashed part */
        enc[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (sc__entry_decode(enc, &h) == 0)
            abort(); /* one flipped bit must not pass the header's hash */
    }
    return 0;
}
