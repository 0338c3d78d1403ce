/*
 * entry.c - a cache entry's name and header bytes (see entry.h).
 */
#include "entry.h"

#include <stdio.h>
#include <string.h>

#include "formats.h"
#include "hash.h"

#define H_FIELDS_AT 48
#define H_HASH_AT (H_FIELDS_AT + 16 * SC_MAX_FIELDS)
#define H_JOB_AT (H_HASH_AT + 8) /* job token, then a hash of the header's hash and it */

void sc__entry_encode(const sc__entry *h, unsigned char *b)
{
    memset(b, 0, SC__ENTRY_BYTES);
    memcpy(b, SC__ENTRY_MAGIC, 8);
    sc__put_u64(b + 8, SC__ENTRY_BYTES);
    sc__put_u64(b + 16, h->shard);
    sc__put_u64(b + 24, h->fingerprint);
    sc__put_u64(b + 32, h->checksum);
    sc__put_u64(b + 40, h->nfields);
    for (int i = 0; i < SC_MAX_FIELDS; i++) {
        sc__put_u64(b + H_FIELDS_AT + 16 * i, h->off[i]);
        sc__put_u64(b + H_FIELDS_AT + 16 * i + 8, h->bytes[i]);
    }
    sc__put_u64(b + H_HASH_AT, sc__xxh64(b, H_HASH_AT, SC__ENTRY_SEED));
    sc__put_u64(b + H_JOB_AT, h->job);
    sc__put_u64(b + H_JOB_AT + 8, sc__xxh64(b + H_HASH_AT, 16, SC__ENTRY_SEED));
}

int sc__entry_decode(const unsigned char *b, sc__entry *h)
{
    if (memcmp(b, SC__ENTRY_MAGIC, 8) != 0 || sc__get_u64(b + 8) != SC__ENTRY_BYTES ||
        sc__get_u64(b + H_HASH_AT) != sc__xxh64(b, H_HASH_AT, SC__ENTRY_SEED))
        return -1;
    h->shard = sc__get_u64(b + 16);
    h->fingerprint = sc__get_u64(b + 24);
    h->checksum = sc__get_u64(b + 32);
    h->nfields = sc__get_u64(b + 40);
    for (int i = 0; i < SC_MAX_FIELDS; i++) {
        h->off[i] = sc__get_u64(b + H_FIELDS_AT + 16 * i);
        h->bytes[i] = sc__get_u64(b + H_FIELDS_AT + 16 * i + 8);
    }
    h->job = sc__get_u64(b + H_JOB_AT + 8) == sc__xxh64(b + H_HASH_AT, 16, SC__ENTRY_SEED)
                 ? sc__get_u64(b + H_JOB_AT)
                 : 0;
    return h->nfields <= SC_MAX_FIELDS ? 0 : -1;
}

void sc__entry_name(uint64_t shard, char *out, size_t n)
{
    snprintf(out, n, "s%llu.h5", (unsigned long long)shard);
}

int sc__entry_name_parse(const char *name, uint64_t *shard)
{
    unsigned long long v;
    char tail[16] = "";
    int n = sscanf(name, "s%llu.h5%15s", &v, tail);
    if (n < 1)
        return 0;
    *shard = v;
    return n == 2 ? 2 : 1;
}
