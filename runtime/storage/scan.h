/*
 * scan.h - a layout-B scan as bytes: what rank 0 sends the other ranks
 * (mpi/node.c broadcasts it) and what a directory keeps beside its files
 * (manifest.c stores it), so that a job opens each of 10^5 files once, or
 * not at all when the saved scan still describes them.  The bytes are one
 * build's (its sc__field and byte order): SC__SCAN_VERSION (base/formats.h)
 * says when a saved one is another build's.
 */
#ifndef SC_SCAN_H
#define SC_SCAN_H

#include <stddef.h>

#include "dataset_impl.h"

/* Rank 0's status `rc` (with its message) and, when SC_OK, what it scanned; *buf malloc'd. */
int sc__scan_encode(const sc_dataset *ds, int rc, const char *msg, void **buf, size_t *len);

/* The bytes on another rank: rank 0's error, or its scan into ds (a malformed one sizes none). */
int sc__scan_decode(sc_dataset *ds, const void *buf, size_t len, sc_error *err);

/* The key a saved scan is kept under: files[len], every file's real path and stamp. */
uint64_t sc__scan_key(const void *files, size_t len);

/*
 * Layout B from a directory: the scan saved beside its files when it still
 * describes them (their key: ds->manifest_key), and then the decoder's
 * notes for the first file.  One that does not fit is named, with why
 * (rank 0), and the caller scans the files.  The HDF5 lock is held.
 */
int sc__scan_reuse(sc_dataset *ds, const sc_config *cfg, sc_error *err);

/* One more file at the end of ds->files (*cap its room, grown by doubling). */
int sc__scan_add_file(sc_dataset *ds, size_t *cap, const char *path, sc_error *err);

/* Frees what a scan (or its bytes, taken) allocated: the files and their arrays, the offsets. */
void sc__scan_free(sc_dataset *ds);

/*
 * Layout B from a directory: saves what the open learned from its files
 * (their fields and sample counts) as DIR/.shardcache-manifest, which
 * the next opens use instead of opening every file, as long as no file
 * was added, removed, moved, resized or modified since the open that
 * saves it, and they ask for the same fields (SC_FIELDS: the same words,
 * or the names of the fields it found).  Rank 0 calls it (the rank that
 * scanned the files; any other gets SC_EINVAL); `shardcache stage` and
 * `make-dataset --layout B` do.  SC_EINVAL for any other source.
 */
int sc__scan_save(const sc_dataset *ds, sc_error *err);

#endif /* SC_SCAN_H */
