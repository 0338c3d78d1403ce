/*
 * field.c - a field's description: in the public API's terms, in words,
 * compared, checked (see field.h).
 */
#include "field.h"

#include <stdio.h>
#include <string.h>

void sc__field_info(const sc__field *f, sc_field_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", f->name);
    snprintf(out->dtype, sizeof out->dtype, "%s", sc__dtype_name(f->dtype));
    out->ndims = f->ndims;
    memcpy(out->dims, f->dims, sizeof out->dims);
    out->sample_bytes = f->sample_bytes;
    out->vlen = (uint64_t)f->vlen;
}

void sc__field_words(const sc__field *f, char *buf, size_t n)
{
    int used = snprintf(buf, n, f->vlen    ? "variable-length %s sequences"
                                : f->ndims ? "%s samples of "
                                           : "%s scalars",
                        sc__dtype_name(f->dtype));
    for (int d = 0; d < f->ndims && used > 0 && (size_t)used < n; d++)
        used += snprintf(buf + used, n - (size_t)used, "%s%llu", d ? " x " : "",
                         (unsigned long long)f->dims[d]);
}

int sc__field_same(const sc__field *a, const sc__field *b)
{
    return a->dtype == b->dtype && a->ndims == b->ndims && a->no_axis == b->no_axis &&
           a->vlen == b->vlen &&
           memcmp(a->dims, b->dims, sizeof a->dims) == 0;
}

int sc__field_sane(const sc__field *f)
{
    uint64_t bytes = sc__dtype_size(f->dtype);
    if (f->dtype == SC__DT_INVALID || !bytes || f->ndims < 0 || f->ndims > SC_MAX_DIMS ||
        (f->no_axis != 0 && f->no_axis != 1) ||
        !memchr(f->name, '\0', sizeof f->name))
        return 0;
    if (f->vlen)
        return f->vlen == 1 && f->ndims == 0 && f->sample_bytes % bytes == 0;
    for (int d = 0; d < f->ndims; d++)
        if (!f->dims[d] || __builtin_mul_overflow(bytes, f->dims[d], &bytes))
            return 0;
    return bytes == f->sample_bytes;
}

int sc__field_named(const char *name, const char *want, size_t len)
{
    name += name[0] == '/';
    if (len && want[0] == '/')
        want++, len--;
    return strlen(name) == len && !memcmp(name, want, len);
}
