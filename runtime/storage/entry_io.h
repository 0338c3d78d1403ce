/*
 * entry_io.h - a cache entry's file, written and read back (entry_io.c):
 * the bytes and their layout on disk, below the cache's policy (cache.c:
 * the index, admission, when an entry's checksum is computed, repairs).
 */
#ifndef SC_ENTRY_IO_H
#define SC_ENTRY_IO_H

#include <sys/stat.h>

#include "cacheplace.h"
#include "entry.h"
#include "error.h"
#include "source.h"

/*
 * Writes shard's entry into pl's directory: a temporary file (made here,
 * 0600 and exclusive, and held: every write and the rename are checked to
 * reach it), the fields in bufs, the header carrying `sum` and `job` (the
 * complete mark), then the rename into place.  On failure the temporary
 * is removed and err names the entry.
 */
int sc__entry_io_write(const sc__cache_place *pl, const sc_dataset *ds, uint64_t shard,
                    void *const *bufs, uint64_t sum, uint64_t job, sc_error *err);

/*
 * Reads shard's entry from directory dirfd (never through a link): its
 * header into *h, its file's identity into *st, *foreign when another
 * user owns it; the fields pread into bufs, or, with m, mapped read-only
 * (a foreign entry copied into memory of m's own: its owner could
 * truncate it under a mapping).  NULL when it reads back whole for this
 * dataset and shard (its checksum is the caller's to check), else why
 * not; m may then hold memory for sc__cache_unmap.
 */
const char *sc__entry_io_read(int dirfd, const sc_dataset *ds, uint64_t shard, void *const *bufs,
                           sc__mapping *m, sc__entry *h, struct stat *st, int *foreign);

#endif /* SC_ENTRY_IO_H */
