/*
 * shardcache/formats.h - the files shardcache writes for other programs
 * to read: the audit trail of delivered samples (SC_AUDIT_DIR, read by
 * `shardcache verify`) and the names of a trace's stages (SC_TRACE, read
 * by `shardcache trace`).  Constants only: no MPI, no HDF5.
 */
#ifndef SHARDCACHE_FORMATS_H
#define SHARDCACHE_FORMATS_H

#include <stdint.h>

/*
 * The audit trail (SC_AUDIT_DIR): per rank, audit-r<rank>.bin holds a
 * header of three native uint64 (SC_AUDIT_MAGIC, rank, world size), then
 * one (epoch, sample id | flags) pair per sample delivered, dropped by
 * the remainder policy, skipped as bad (SC_AUDIT_SKIPPED, with
 * SC_AUDIT_LISTED when the skip list named it), or delivered in a skipped
 * sample's place (SC_AUDIT_REPLACEMENT: not a duplicate).  Readers that
 * predate the skip flags see only the first two.  `shardcache verify` reads it.
 */
#define SC_AUDIT_MAGIC UINT64_C(0x3154494455414353) /* "SCAUDIT1" */
#define SC_AUDIT_PADDED (UINT64_C(1) << 63)         /* a padding repeat */
#define SC_AUDIT_DROPPED (UINT64_C(1) << 62)        /* left out by the remainder policy */
#define SC_AUDIT_SKIPPED (UINT64_C(1) << 61)        /* a bad sample left out (SC_BAD_SAMPLE=skip) */
#define SC_AUDIT_LISTED (UINT64_C(1) << 60)         /* with SKIPPED: because the skip list has it */
#define SC_AUDIT_REPLACEMENT (UINT64_C(1) << 59)    /* delivered in a skipped sample's place */
#define SC_AUDIT_FLAGS (SC_AUDIT_PADDED | SC_AUDIT_DROPPED | SC_AUDIT_SKIPPED | \
                        SC_AUDIT_LISTED | SC_AUDIT_REPLACEMENT)

/*
 * The stages a trace records (SC_TRACE, docs/tracing.md), in the order
 * `shardcache trace summary` prints them: X(id, name), the name being the
 * event's name in the trace file.  Append only.
 */
#define SC_TRACE_STAGE_LIST(X)                                                \
    X(PLAN_WAIT, "plan wait")                                                 \
    X(PLAN_COMPUTE, "plan compute")                                           \
    X(SOURCE_READ, "source read")                                             \
    X(CACHE_READ, "cache read")                                               \
    X(CACHE_WRITE, "cache write")                                             \
    X(CHECKSUM, "checksum")                                                   \
    X(ASSEMBLY, "shuffle/assembly")                                           \
    X(RING_WAIT, "pinned-buffer wait")                                        \
    X(H2D, "host-to-device copy")                                             \
    X(CONSUMER_WAIT, "consumer wait")                                         \
    X(COMPUTE, "consumer compute")                                            \
    X(VERIFY, "epoch verification")                                           \
    X(PEER_RECV, "peer transfer")

#endif /* SHARDCACHE_FORMATS_H */
