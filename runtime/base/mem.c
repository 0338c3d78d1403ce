/*
 * mem.c - buffers of megabytes that fault in 2 MiB at a time.
 *
 * A shard buffer is fresh anonymous memory in the first epoch (glibc
 * serves a block this size with mmap), and its first touch faults 4 KiB
 * at a time.  Under a hypervisor each fault is a trip out of the guest:
 * on our CI machines the cold epoch spent more time in the fault path
 * than in reading, and a shard's checksum stalled on the TLB after it
 * (perf: pread 42% of the CPU time, two thirds of it faulting; 0.25 GB/s
 * against 5.8 GB/s for reading the file).  Huge pages fault once per
 * 2 MiB and need 512 times fewer TLB entries: the same epoch ran at 2 GB/s
 * (docs/benchmarks.md, "Streaming").  The kernel's default THP mode,
 * "madvise", honours the advice; "never" ignores it and nothing is lost.
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
    long page = sysconf(_SC_PAGESIZE);
    size_t align = bytes < HUGE_BYTES ? (page > 0 ? (size_t)page : 4096) : HUGE_BYTES;
    if (bytes > SIZE_MAX - HUGE_BYTES)
        return NULL;
    size_t whole = (bytes + align - 1) & ~(align - 1);
    void *p = NULL;
    if (posix_memalign(&p, align, whole ? whole : align) != 0)
        return NULL;
    if (align < HUGE_BYTES)
        return p;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, whole, MADV_HUGEPAGE); /* advice: a kernel without THP just says no */
#endif
    return p;
}
