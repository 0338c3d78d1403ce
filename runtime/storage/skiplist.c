/*
 * skiplist.c - the skip list's reader (skiplist.h; the format is in
 * base/formats.h): a line at a time, each refusal naming the file and the
 * line, then the ids sorted for a binary search per delivered sample.
 */
#include "skiplist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "vec.h"

typedef struct entry {
    uint64_t id, line;
    char *reason;
} entry;

typedef struct reader {
    const char *path;
    uint64_t fingerprint, nsamples, line;
    entry *e;
    size_t n, cap;
} reader;

/* "# fingerprint <16 lowercase hex>": held to the dataset's. */
static int skiplist_fingerprint(reader *r, const char *v, sc_error *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long fp = strtoull(v, &end, 16);
    int hex = strlen(v) == 16 && strspn(v, "0123456789abcdef") == 16;
    if (!hex || errno || *end)
        return sc__seterr(err, SC_EINVAL, "skip list '%s', line %llu: '# fingerprint %s' is "
                          "not 16 lowercase hex digits", r->path,
                          (unsigned long long)r->line, v);
    if (fp != r->fingerprint)
        return sc__seterr(err, SC_EINVAL, "skip list '%s', line %llu: made for the dataset "
                          "of fingerprint %016llx, but the open dataset's is %016llx (a list "
                          "for another dataset, or the dataset changed since its scan)",
                          r->path, (unsigned long long)r->line, fp,
                          (unsigned long long)r->fingerprint);
    return SC_OK;
}

/* "<id>[\t<reason>]" */
static int skiplist_entry(reader *r, char *s, sc_error *err)
{
    char *tab = strchr(s, '\t'), *end = NULL;
    if (tab)
        *tab = '\0';
    errno = 0;
    unsigned long long id = strtoull(s, &end, 10);
    if (!*s || strspn(s, "0123456789") != strlen(s) || errno)
        return sc__seterr(err, SC_EINVAL, "skip list '%s', line %llu: '%s' is not a sample "
                          "id (a decimal number, then optionally a tab and the reason)",
                          r->path, (unsigned long long)r->line, s);
    if (id >= r->nsamples)
        return sc__seterr(err, SC_EINVAL, "skip list '%s', line %llu: sample %llu is out of "
                          "range: the dataset holds %llu samples", r->path,
                          (unsigned long long)r->line, id, (unsigned long long)r->nsamples);
    entry *grown = sc__vec_grow(r->e, &r->cap, r->n + 1, sizeof *r->e);
    char *reason = strdup(tab ? tab + 1 : "");
    if (!grown || !reason) {
        free(reason);
        if (grown)
            r->e = grown;
        return sc__seterr(err, SC_ENOMEM, "skip list '%s': no memory", r->path);
    }
    r->e = grown;
    r->e[r->n++] = (entry){id, r->line, reason};
    return SC_OK;
}

static int skiplist_line(reader *r, char *s, sc_error *err)
{
    size_t len = strlen(s);
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        s[--len] = '\0';
    if (r->line == 1)
        return strcmp(s, SC__SKIPLIST_MAGIC) == 0
                   ? SC_OK
                   : sc__seterr(err, SC_EINVAL, "skip list '%s', line 1: not a skip list "
                                "(its first line must be '%s')", r->path, SC__SKIPLIST_MAGIC);
    if (!strncmp(s, "# fingerprint ", 14))
        return skiplist_fingerprint(r, s + 14, err);
    if (s[0] == '#' || s[strspn(s, " \t")] == '\0')
        return SC_OK; /* "# source", other comments, blank lines */
    return skiplist_entry(r, s, err);
}

static int skiplist_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->id != y->id)
        return (x->id > y->id) - (x->id < y->id);
    return (x->line > y->line) - (x->line < y->line);
}

/* Sorted, each id once (its first line's reason), into out. */
static int skiplist_finish(reader *r, sc__skiplist *out, sc_error *err)
{
    qsort(r->e, r->n, sizeof *r->e, skiplist_cmp);
    out->ids = malloc(sizeof *out->ids * (r->n + 1));
    out->reasons = malloc(sizeof *out->reasons * (r->n + 1));
    if (!out->ids || !out->reasons)
        return sc__seterr(err, SC_ENOMEM, "skip list '%s': no memory", r->path);
    for (size_t i = 0; i < r->n; i++) {
        if (out->n && out->ids[out->n - 1] == r->e[i].id) {
            free(r->e[i].reason);
        } else {
            out->ids[out->n] = r->e[i].id;
            out->reasons[out->n++] = r->e[i].reason;
        }
        r->e[i].reason = NULL;
    }
    return SC_OK;
}

int sc__skiplist_load(const char *path, uint64_t fingerprint, uint64_t nsamples,
                      sc__skiplist *out, sc_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f)
        return sc__seterr(err, SC_EIO, "skip list '%s': %s", path, strerror(errno));
    reader r = {path, fingerprint, nsamples, 0, NULL, 0, 0};
    char *buf = NULL;
    size_t cap = 0;
    int rc = SC_OK;
    while (rc == SC_OK && getline(&buf, &cap, f) >= 0) {
        r.line++;
        rc = skiplist_line(&r, buf, err);
    }
    if (rc == SC_OK && ferror(f))
        rc = sc__seterr(err, SC_EIO, "skip list '%s': read error after line %llu", path,
                        (unsigned long long)r.line);
    if (rc == SC_OK && r.line == 0)
        rc = sc__seterr(err, SC_EINVAL, "skip list '%s', line 1: the file is empty (its "
                        "first line must be '%s')", path, SC__SKIPLIST_MAGIC);
    free(buf);
    fclose(f);
    if (rc == SC_OK)
        rc = skiplist_finish(&r, out, err);
    for (size_t i = 0; i < r.n; i++)
        free(r.e[i].reason);
    free(r.e);
    if (rc != SC_OK)
        sc__skiplist_free(out);
    return rc;
}

int64_t sc__skiplist_find(const sc__skiplist *l, uint64_t id)
{
    if (!l || !l->n)
        return -1;
    uint64_t lo = 0, hi = l->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (l->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->ids[lo] == id ? (int64_t)lo : -1;
}

void sc__skiplist_free(sc__skiplist *l)
{
    if (!l)
        return;
    for (uint64_t i = 0; l->reasons && i < l->n; i++)
        free(l->reasons[i]);
    free(l->ids);
    free(l->reasons);
    memset(l, 0, sizeof *l);
}
