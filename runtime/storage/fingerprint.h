/*
 * fingerprint.h - the bytes a source's fingerprint hashes (its layout,
 * files with their stamps, fields, shard size, a transform's name,
 * version and outputs), written into a growable buffer; the scan's wire
 * format (scan.c) is written into the same buffer.  The fingerprint keys
 * plans and caches: what goes into it, in what order, must not change
 * without a reason, or every cache goes cold.
 */
#ifndef SC_FINGERPRINT_H
#define SC_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "error.h"
#include "field.h"

/*
 * A file's stamp: size, modification time (ns), inode and change time
 * (ns), from one stat.  The last two are what a rewrite cannot keep:
 * `cp -p` and `touch -r` set the size and mtime but move the change time,
 * `rsync -a` renames a new inode over the old.  chmod, chown and a new
 * hard link move the change time too: a stamp that changed without the
 * bytes costs a cold cache and a rescan, never wrong data.  No device
 * number: a network filesystem's differs between nodes, and every rank
 * must agree on the stamp (inode numbers and change times are the
 * server's on NFS, Lustre and GPFS).
 */
#define SC__STAMP_WORDS 4
#define SC__STAMP_BYTES (SC__STAMP_WORDS * sizeof(uint64_t))

/* Bytes appended in order; oom once an append found no memory (later ones do nothing). */
typedef struct sc__fingerprint {
    unsigned char *p;
    size_t len, cap;
    int oom;
} sc__fingerprint;

void sc__fingerprint_put(sc__fingerprint *b, const void *data, size_t n);
void sc__fingerprint_u64(sc__fingerprint *b, uint64_t v); /* little-endian */
void sc__fingerprint_str(sc__fingerprint *b, const char *s); /* its length, then its bytes */

/* A field's name, type and sample shape, as the fingerprint sees them. */
void sc__fingerprint_field(sc__fingerprint *b, const sc__field *f);

/* A file's stamp (SC__STAMP_WORDS) from its stat, as the fingerprint and a direct read take it. */
void sc__fingerprint_stamp(const struct stat *st, uint64_t *stamp);

/* Path (real) and stamp of one file; the stamp into stamp[SC__STAMP_WORDS] when asked. */
int sc__fingerprint_file(sc__fingerprint *b, const char *path, uint64_t *stamp, sc_error *err);

/* The hash of what b holds: the fingerprint. */
uint64_t sc__fingerprint_hash(const sc__fingerprint *b);

#endif /* SC_FINGERPRINT_H */
