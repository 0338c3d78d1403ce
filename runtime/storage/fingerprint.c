/*
 * fingerprint.c - the bytes a source's fingerprint hashes (see fingerprint.h).
 */
#include "fingerprint.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

void sc__fp_put(sc__fp *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void sc__fp_u64(sc__fp *b, uint64_t v)
{
    unsigned char le[8];
    sc__put_u64(le, v);
    sc__fp_put(b, le, 8);
}

void sc__fp_str(sc__fp *b, const char *s)
{
    sc__fp_u64(b, strlen(s));
    sc__fp_put(b, s, strlen(s));
}

void sc__fp_field(sc__fp *b, const sc__field *f)
{
    sc__fp_str(b, f->name);
    sc__fp_u64(b, (uint64_t)f->dtype);
    sc__fp_u64(b, (uint64_t)f->ndims);
    for (int d = 0; d < f->ndims; d++)
        sc__fp_u64(b, f->dims[d]);
    if (f->no_axis) /* (flags added later: fingerprints without them stay as they were) */
        sc__fp_u64(b, UINT64_MAX);
    if (f->vlen)
        sc__fp_u64(b, UINT64_MAX - 1);
}

void sc__fp_stamp(const struct stat *st, uint64_t *stamp)
{
    stamp[0] = (uint64_t)st->st_size;
    stamp[1] = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
    stamp[2] = (uint64_t)st->st_ino;
    stamp[3] = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;
}

int sc__fp_file(sc__fp *b, const char *path, uint64_t *stamp, sc_error *err)
{
    struct stat st;
    char real[PATH_MAX];
    if (stat(path, &st) != 0)
        return sc__seterr(err, SC_EIO, "source file '%s': %s", path, strerror(errno));
    uint64_t now[SC__STAMP_WORDS];
    sc__fp_stamp(&st, now);
    sc__fp_str(b, realpath(path, real) ? real : path);
    for (int i = 0; i < SC__STAMP_WORDS; i++)
        sc__fp_u64(b, now[i]);
    if (stamp)
        memcpy(stamp, now, sizeof now);
    return SC_OK;
}


uint64_t sc__fp_hash(const sc__fp *b)
{
    return sc__xxh64(b->p, b->len, 0);
}
