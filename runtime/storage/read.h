/*
 * read.h - a shard's bytes from the source: one hyperslab per field for
 * layout A (compressed chunks decoded outside the HDF5 lock: chunks.c),
 * a run of files for layout B (read with pread when a field lies in its
 * file as delivered), then the shard transform.  sc_dataset_read_shard
 * (shardcache/dataset.h) is the entry; it never caches, retries or
 * guesses: a file that changed since the open is an error naming it.
 */
#ifndef SC_READ_H
#define SC_READ_H

#include "dataset_impl.h"

/*
 * The first delivered field of a shard's bytes (bufs[i], as read back from
 * a cache entry or a peer) whose variable-length offsets are not the ones
 * learned at open, or -1: an entry made before the source was rewritten
 * (while a job ran: its fingerprint is its open's) must not steer copies
 * by its own offsets.
 */
int sc__read_vlen_disagrees(const sc_dataset *ds, uint64_t shard, const void *const *bufs);

/*
 * Where each delivered field of `shard` should start in its buffer, as an
 * offset modulo SC__IO_ALIGN (io.h): its first byte's in the source file
 * when it is read from there by offset (a direct read then lands in place,
 * not through the bounce buffer), else 0.  Into skew[ds->nfields].
 */
void sc__read_skews(const sc_dataset *ds, uint64_t shard, uint64_t *skew);

#endif /* SC_READ_H */
