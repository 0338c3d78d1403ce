/*
 * skiplist.h - SC_SKIP_LIST: samples known bad (`shardcache scan --decode`
 * finds them), skipped and replaced without being decoded.  The reader
 * owns the format (base/formats.h, SC__SKIPLIST_MAGIC) and holds a list to
 * the dataset it was made for: its fingerprint and its sample count.
 */
#ifndef SC_SKIPLIST_H
#define SC_SKIPLIST_H

#include <stdint.h>

#include "error.h"

typedef struct sc__skiplist {
    uint64_t n;
    uint64_t *ids;    /* [n], ascending, distinct */
    char **reasons;   /* [n], by ids' order: the line's reason, "" when it gave none */
} sc__skiplist;

/*
 * Reads `path` for a dataset of `nsamples` samples whose fingerprint is
 * `fingerprint`: a list made for another dataset, a line that is not an
 * id (nor a comment), or an id out of range is refused (SC_EINVAL) naming
 * the file and the line.  An id listed twice keeps its first reason.
 */
int sc__skiplist_load(const char *path, uint64_t fingerprint, uint64_t nsamples,
                      sc__skiplist *out, sc_error *err);

/* The entry of `id` (its index in ids), or -1 when the list (may be NULL) has none. */
int64_t sc__skiplist_find(const sc__skiplist *l, uint64_t id);

void sc__skiplist_free(sc__skiplist *l);

#endif /* SC_SKIPLIST_H */
