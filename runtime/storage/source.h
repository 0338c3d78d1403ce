/*
 * source.h - opening the source dataset.
 *
 * An open source is its description (dataset_impl.h: layout, fields,
 * shards, the fingerprint that keys plans and caches), filled in by the
 * opening steps below, whose parts are files of their own: the fields
 * (fields.c), the fingerprint's bytes (fingerprint.c), layout B's scan
 * as bytes (scan.c); shards are read by read.c.  None of them caches,
 * retries or guesses: a file that is missing, foreign, truncated or
 * inconsistent is an error naming the file and the field, and the caller
 * decides what to do.
 */
#ifndef SC_SOURCE_H
#define SC_SOURCE_H

#include <mpi.h>

#include "dataset_impl.h"
#include "fields.h"
#include "read.h"

/*
 * Opening, in the steps that mpi/node.c's sc_dataset_open runs on every
 * rank: new (checks the settings, finds the source), scan (the layout,
 * fields and shards: every rank for layout A; for layout B on several
 * ranks, rank 0 alone), the manifest that rank 0 then sends the others,
 * and finish (shard offsets, then the fields made final: SC_DECODE, the
 * transform's outputs, SC_AUGMENT).  No step sends a message of its own
 * (layout A's file may be opened collectively through MPI-IO);
 * sc_dataset_close frees what any step made.
 */
int sc__dataset_new(MPI_Comm comm, const sc_config *cfg, sc_dataset **out, sc_error *err);
int sc__dataset_scan(sc_dataset *ds, const sc_config *cfg, sc_error *err);
/* After the scan: layout B on several ranks, whose rank 0 sends a manifest. */
int sc__dataset_shared(const sc_dataset *ds);
/* Rank 0's status `rc` (with its message) and, when SC_OK, what it scanned. */
int sc__dataset_manifest(const sc_dataset *ds, int rc, const char *msg, void **buf,
                         size_t *len);
/* The manifest on another rank: rank 0's error, or its scan. */
int sc__dataset_take_manifest(sc_dataset *ds, const void *buf, size_t len, sc_error *err);
int sc__dataset_finish(sc_dataset *ds, const sc_config *cfg, sc_error *err);

/*
 * What this rank sees of the source, for the ranks to compare: layout A's
 * fingerprint (each rank stats the file), layout B's first, middle and last
 * files' stamps as stat'ed here (rank 0's scan stamped the files for every
 * rank; three stats, not 10^5).
 */
uint64_t sc__dataset_view(const sc_dataset *ds);

/*
 * Where field f's bytes (n samples) lie in dataset d's file exactly as
 * shardcache delivers them, for a read without HDF5 (read.c): contiguous,
 * allocated and whole, in the file itself (not external), in this
 * machine's byte order; else UINT64_MAX.  The caller holds the HDF5 lock.
 */
uint64_t sc__source_raw_offset(int64_t d, const sc__field *f, uint64_t n); /* d: a hid_t */

/* Plan parameters for this dataset and config (sc__config_plan_params of its shards). */
int sc__dataset_plan_params(const sc_dataset *ds, const sc_config *cfg, uint32_t world_size,
                            uint64_t epoch, sc_plan_params *out);

#endif /* SC_SOURCE_H */
