/*
 * entry.h - a cache entry's name in its directory and its header: their
 * bytes, encoded and decoded without HDF5 or I/O, so that the decoder is
 * fuzzed alone (tests/fuzz/fuzz_entry_decode.c).  A header that does not
 * decode is not a complete entry: the cache repairs it, never serves it.
 * Writing and reading an entry's file is entry_io.c's.
 */
#ifndef SC_ENTRY_H
#define SC_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache/base.h"

/*
 * An entry's header lives in the HDF5 user block (the first 512 bytes,
 * which HDF5 reserves and never touches), written after the HDF5 file is
 * closed: it is the "complete" mark.  It records where each field's raw
 * bytes are, so a warm read is open + two preads, with no HDF5 call and no
 * HDF5 lock; the entry stays a valid HDF5 file that h5dump can read.
 * Layout, little-endian: magic "SCENTRY1", shard, fingerprint, checksum,
 * nfields, then (offset, bytes) per field, then XXH64 of all that.
 */
#define SC__ENTRY_BYTES 512 /* the HDF5 user block the header fills */

/*
 * An entry's bytes on disk beside its fields' `bytes`: the user block and
 * HDF5's metadata (measured: 2,048 bytes for two fields, about 512 more a
 * field), in whole blocks of 4 KiB.  A 20 KiB shard takes 24 KiB: the
 * cache's bound, counted in shard bytes, left a small filesystem full.
 */
#define SC__ENTRY_DISK(bytes, nfields) \
    ((((bytes) + SC__ENTRY_BYTES + 1024 + 512 * (uint64_t)(nfields)) + 4095) / 4096 * 4096)

/*
 * An entry's header.  `job` is the token of the cache open (one per job:
 * every rank of the communicator shares it) whose process wrote the entry,
 * 0 if unknown (entries of earlier versions have none).  An entry written
 * in this job was checksummed from the source's bytes by a live rank of
 * it, so it is trusted as a rank trusts its own writes; entries of another
 * job (an earlier or a crashed one) are checked on their first read in a
 * process.  The token lies after the header's hash, with a hash of its
 * own, so headers without one still decode.
 */
typedef struct sc__entry {
    uint64_t shard, fingerprint, checksum, nfields;
    uint64_t off[SC_MAX_FIELDS], bytes[SC_MAX_FIELDS];
    uint64_t job;
} sc__entry;

/* Fills b[SC__ENTRY_BYTES]. */
void sc__entry_encode(const sc__entry *h, unsigned char *b);
/* 0, or -1 when b[SC__ENTRY_BYTES] is no whole, self-consistent header. */
int sc__entry_decode(const unsigned char *b, sc__entry *h);

/*
 * A cache entry mapped read-only: field[i] is the shard's field i.  An
 * entry another user wrote (a group member's) is read into memory of the
 * mapping's own instead (`copied`): its owner could truncate it under a
 * mapping.
 */
typedef struct sc__mapping {
    void *base;
    size_t len;
    int copied; /* base is malloc'd (freed by sc__cache_unmap), not mapped */
    int origin; /* the cache's SC__FROM_*: a peer's fill read the first time, or the cache */
    const unsigned char *field[SC_MAX_FIELDS];
} sc__mapping;

/* Shard's entry's name in its directory: s<shard>.h5. */
void sc__entry_name(uint64_t shard, char *out, size_t n);

/*
 * What a name in a cache directory is: 1 an entry (*shard filled), 2 what
 * a writer left behind (an entry's name with a tail: a temporary, *shard
 * filled), 0 not an entry's.
 */
int sc__entry_name_parse(const char *name, uint64_t *shard);

#endif /* SC_ENTRY_H */
