/*
 * io.h - whole transfers at an offset: pread() and pwrite() until every
 * byte has moved.  One loop for the source's direct reads, the vlen
 * headers, the saved manifest and the cache's entries, so that EINTR, a
 * short transfer and a file that ends early are handled alike everywhere.
 *
 * And the same through O_DIRECT, for the cold epoch: a buffered read or
 * write puts every byte in a page-cache page, fresh memory whose first
 * touch on a virtual machine that hands freed memory back to its host
 * costs more than the transfer (docs/benchmarks.md, "Streaming").  A
 * direct transfer moves the bytes between the device and the caller's
 * memory (pre-faulted, reused buffers) and no page-cache page is made.
 */
#ifndef SC_IO_H
#define SC_IO_H

#include <stdint.h>

/*
 * All of n bytes at off into buf (EINTR and short reads resumed): NULL, or
 * why not in words (strerror's, or "the file ends early").  The caller
 * names the file.
 */
const char *sc__io_pread(int fd, void *buf, uint64_t n, uint64_t off);

/* All of n bytes of buf at off, as sc__io_pread reads them. */
const char *sc__io_pwrite(int fd, const void *buf, uint64_t n, uint64_t off);

/*
 * O_DIRECT's alignment of offsets, lengths and memory here: the page,
 * which every Linux block device's logical block divides and which spares
 * ext4 its serialized sub-block path.
 */
#define SC__IO_ALIGN 4096u

/* Each thread's bounce buffer for what is not aligned (mem.h's per-thread buffers). */
#define SC__IO_BOUNCE ((size_t)4 << 20)

/*
 * The file open at fd opened again (a new open file, its own flags) with
 * O_DIRECT and `flags` (O_RDONLY or O_WRONLY): a descriptor, or -1 with
 * errno (EINVAL: the filesystem refuses O_DIRECT, as tmpfs did before
 * Linux 6.6; in testing builds, always with SC_FAULT=io-no-direct).
 */
int sc__io_open_direct(int fd, int flags);

/*
 * sc__io_pread's contract, from the file open at fd (buffered) and dfd
 * (O_DIRECT, or -1): direct, in aligned pieces, unless dfd is -1 or every
 * page of the range is in the page cache already (memory is faster than
 * the device).  The unaligned head and tail of the range and memory not
 * aligned like the file come through this thread's bounce buffer; buf
 * aligned like off (buf % SC__IO_ALIGN == off % SC__IO_ALIGN) is read
 * into in place.  A filesystem that refuses an aligned direct read
 * (EINVAL) is read buffered.
 */
const char *sc__io_pread_direct(int fd, int dfd, void *buf, uint64_t n, uint64_t off);

/*
 * sc__io_pwrite's contract through dfd (O_DIRECT, or -1: all through fd):
 * the whole aligned pages of the range direct (from buf in place when it
 * is aligned like off, else through the bounce buffer), the partial pages
 * at either end through fd, so that no byte outside the range is written.
 */
const char *sc__io_pwrite_direct(int fd, int dfd, const void *buf, uint64_t n, uint64_t off);

/* Whether every page of [off, off + n) of the file open at fd is in the page cache. */
int sc__io_cached(int fd, uint64_t n, uint64_t off);

#endif /* SC_IO_H */
