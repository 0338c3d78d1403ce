/*
 * formats.h - every format shardcache persists or sends, its magic and its
 * version, in one place (as Darshan's darshan-log-format.h keeps its logs'):
 * what each is, what each version meant, and where its writer and reader
 * live.  Bump a version here when the bytes change; the reader refuses
 * what it cannot read, naming both versions.  Constants only, for every
 * layer.  The formats other programs read are public and stay in
 * include/shardcache/formats.h (the audit trail, the trace's stage names).
 */
#ifndef SC_FORMATS_H
#define SC_FORMATS_H

#include <stdint.h>

#include "shardcache/formats.h"

/*
 * The checkpoint record (SC_CHECKPOINT; docs/reliability.md): what a rank
 * has consumed of an epoch, little-endian words.  Writer and reader:
 * api/ckpt.c (sc__ckpt_encode, sc__ckpt_decode), fuzzed alone
 * (tests/fuzz/fuzz_ckpt_decode.c); api/resume.c and api/loader_resume.c
 * use it.  Versions: 2 and 3 were records of whole-shard plans, whose
 * schedules this build no longer computes (refused, saying so); 4 (plain),
 * plans cut at sample granularity (plan format 3) and partitions; 5
 * (resliced), a rank of an epoch dealt out again names what it has left.
 */
#define SC__CKPT_MAGIC UINT64_C(0x31305450434b4353) /* "SCCKPT01" */
#define SC__CKPT_VERSION_WHOLE_SHARDS 3            /* the last of whole-shard plans */
#define SC__CKPT_VERSION_PLAIN 4
#define SC__CKPT_VERSION_RESLICED 5

/*
 * A cache entry's header, in the HDF5 user block of its file (docs/cache.md):
 * where each field's bytes lie, so warm reads need no HDF5.  Bytes:
 * storage/entry.c (fuzzed alone, tests/fuzz/fuzz_entry_decode.c); the file:
 * storage/entry_io.c.  The version is the magic's last character, and the
 * header's length (SC__ENTRY_BYTES) is its second word: an entry that does
 * not decode is repaired, never served.
 */
#define SC__ENTRY_MAGIC "SCENTRY1"
/* The seed of its header's hashes and of the data checksum it records. */
#define SC__ENTRY_SEED UINT64_C(0x7363616368653031) /* "scache01" */

/*
 * A layout-B directory's saved scan, .shardcache-manifest (docs/cache.md):
 * the container (magic, format word, key, length, blob, hash) is
 * storage/manifest.c's; the blob, the scan's bytes as rank 0 sends them to
 * the other ranks, is storage/scan.c's, whose format word is this version
 * << 32 | the build's size of the field descriptions.  Versions: 3 carries
 * float16, bool and strings; 4, each file's stamp and fields' offsets; 6,
 * the stamp's inode and change time; 7, made by a scan that checks every
 * file's filters and refuses a field named twice.  Bump it when sc__field
 * or sc__dtype changes (storage/field.h), which types "every field" takes,
 * or what a scan refuses.
 */
#define SC__MANIFEST_MAGIC "SCMANIF1"
#define SC__SCAN_VERSION 7

/*
 * The plan's wire format (docs/plan-format.md): a 128-byte header, then
 * the arrays.  Writer and reader: core/plan_codec.c (sc_plan_encode,
 * sc_plan_decode; fuzzed, tests/fuzz/fuzz_plan_decode.c).  Version 3: the
 * remainder cut at sample granularity, and partitions.  Its version is a
 * 16-bit word.
 */
#define SC__PLAN_MAGIC "SCPL"
#define SC__PLAN_VERSION 3

/*
 * A cache directory (docs/cache.md): its name,
 * shardcache-<16 hex fingerprint>-l<local rank>[-p<pid>.XXXXXX], its lock
 * file and its entries' names are storage/cachedir.h's and entry.h's.  Its
 * note of the source, a file named "source": the source's real path on one
 * line, then its stamp, four decimal numbers (size, mtime in s, inode,
 * change time in ns) on the next; a note from before inodes and change
 * times were kept has size and mtime only, and is judged by them.  No
 * version word: the count of numbers tells.  Writer:
 * sc__cachedir_note_source, reader: cachedir_read_source
 * (storage/cachedir.c), what `shardcache cache list` and `cache gc` show.
 */

/*
 * A skip list (SC_SKIP_LIST; docs/reliability.md): text, its first line
 * exactly this magic; then optional "# source <path>" and "# fingerprint
 * <16 lowercase hex digits>" lines (the dataset's fingerprint, which the
 * reader holds the open dataset to); other '#' lines and blank lines are
 * ignored; every other line is a global sample id (decimal), then
 * optionally a TAB and the reason (the rest of the line).  Reader, the
 * format's one owner: storage/skiplist.c; writer: `shardcache scan
 * --decode`.  The version is the magic's last word.
 */
#define SC__SKIPLIST_MAGIC "# shardcache skip list 1"

/*
 * The audit trail (SC_AUDIT_DIR), public: SC_AUDIT_MAGIC and its flags in
 * include/shardcache/formats.h.  Writer: mpi/ledger.c, each rank's
 * audit-r<rank>.bin; reader: `shardcache verify` (tools/cmd_verify.c).  Its
 * version is the magic's last character ("SCAUDIT1").
 *
 * The trace (SC_TRACE, docs/tracing.md): Chrome's JSON trace format, one
 * file per rank, written by pipeline/trace.c and read by `shardcache trace`
 * (tools/cmd_trace_model.c).  No version word: readers ignore what they do
 * not know, and the stages' names (SC_TRACE_STAGE_LIST, public) are
 * append only.
 */

#endif
