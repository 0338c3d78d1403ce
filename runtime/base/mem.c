/*
 * mem.c - buffers of megabytes that fault in 2 MiB at a time.
 *
 * A shard buffer is fresh anonymous memory in the first epoch (glibc
 * serves the first blocks this size with mmap; once some are freed it
 * raises its threshold and serves later ones from the heap, fresh too
 * until touched), and its first touch faults 4 KiB at a time.  Under a hypervisor each fault is a trip out of the guest:
 * on our CI machines the cold epoch spent more time in the fault path
 * than in reading, and a shard's checksum stalled on the TLB after it
 * (perf: pread 42% of the CPU time, two thirds of it faulting; 0.25 GB/s
 * against 5.8 GB/s for reading the file).  Huge pages fault once per
 * 2 MiB and need 512 times fewer TLB entries: the same epoch ran at 2 GB/s
 * (docs/benchmarks.md, "Streaming").  The kernel's default THP mode,
 * "madvise", honours the advice; "never" ignores it and nothing is lost.
 * Only the buffer's whole 2 MiB pages are advised: a tail in a huge page
 * of its own would hold up to 2 MiB more than the bytes asked for, and
 * the loader counts the bytes against SC_STREAM_BYTES.
 */
#define _GNU_SOURCE
#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_BYTES ((size_t)2 << 20)

void *sc__big_alloc(size_t bytes)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    if (bytes > SIZE_MAX - HUGE_BYTES)
        return NULL;
    size_t len = bytes ? (bytes + page - 1) & ~(page - 1) : page;
    void *p = NULL;
    if (posix_memalign(&p, len < HUGE_BYTES ? page : HUGE_BYTES, len) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (len >= HUGE_BYTES) /* advice: a kernel without THP just says no */
        (void)madvise(p, len & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}
