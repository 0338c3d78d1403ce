/*
 * manifest.h - a layout-B directory's scan, saved beside its files, so
 * that a job's rank 0 stats the files instead of opening each with HDF5.
 */
#ifndef SC_MANIFEST_H
#define SC_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define SC__MANIFEST_NAME ".shardcache-manifest"

/*
 * The blob saved for `dir` under `key` (the files as they are now) and
 * `format` (the writer's build), malloc'd, its length in *len; or NULL,
 * with *why saying in words why the saved one is not fit to use (NULL
 * when there is none).  *stale = 1 when it is whole, trusted and of this
 * format but saved under another key: then the blob comes back too, with
 * *why, to be read only for saying which files changed, never used.
 */
void *sc__manifest_load(const char *dir, uint64_t key, uint64_t format, size_t *len,
                        const char **why, int *stale);

/* Saves blob[len] for `dir` under key and format, atomically (rename). */
int sc__manifest_store(const char *dir, uint64_t key, uint64_t format, const void *blob,
                       size_t len, sc_error *err);

#endif /* SC_MANIFEST_H */
