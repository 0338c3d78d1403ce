/*
 * fingerprint.c - the bytes a source's fingerprint hashes (see fingerprint.h).
 */
#include "fingerprint.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "vec.h"

void sc__fingerprint_put(sc__fingerprint *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    unsigned char *p = sc__vec_grow(b->p, &b->cap, b->len + n, 1);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void sc__fingerprint_u64(sc__fingerprint *b, uint64_t v)
{
    unsigned char le[8];
    sc__put_u64(le, v);
    sc__fingerprint_put(b, le, 8);
}

void sc__fingerprint_str(sc__fingerprint *b, const char *s)
{
    sc__fingerprint_u64(b, strlen(s));
    sc__fingerprint_put(b, s, strlen(s));
}

void sc__fingerprint_field(sc__fingerprint *b, const sc__field *f)
{
    sc__fingerprint_str(b, f->name);
    sc__fingerprint_u64(b, (uint64_t)f->dtype);
    sc__fingerprint_u64(b, (uint64_t)f->ndims);
    for (int d = 0; d < f->ndims; d++)
        sc__fingerprint_u64(b, f->dims[d]);
    if (f->no_axis) /* (flags added later: fingerprints without them stay as they were) */
        sc__fingerprint_u64(b, UINT64_MAX);
    if (f->vlen)
        sc__fingerprint_u64(b, UINT64_MAX - 1);
}

void sc__fingerprint_stamp(const struct stat *st, uint64_t *stamp)
{
    stamp[0] = (uint64_t)st->st_size;
    stamp[1] = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
    stamp[2] = (uint64_t)st->st_ino;
    stamp[3] = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;
}

int sc__fingerprint_file(sc__fingerprint *b, const char *path, uint64_t *stamp, sc_error *err)
{
    struct stat st;
    char real[PATH_MAX];
    if (stat(path, &st) != 0)
        return sc__seterr(err, SC_EIO, "source file '%s': %s", path, strerror(errno));
    uint64_t now[SC__STAMP_WORDS];
    sc__fingerprint_stamp(&st, now);
    sc__fingerprint_str(b, realpath(path, real) ? real : path);
    for (int i = 0; i < SC__STAMP_WORDS; i++)
        sc__fingerprint_u64(b, now[i]);
    if (stamp)
        memcpy(stamp, now, sizeof now);
    return SC_OK;
}


uint64_t sc__fingerprint_hash(const sc__fingerprint *b)
{
    return sc__xxh64(b->p, b->len, 0);
}
