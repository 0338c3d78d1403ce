/*
 * io.h - whole transfers at an offset: pread() and pwrite() until every
 * byte has moved.  One loop for the source's direct reads, the vlen
 * headers, the saved manifest and the cache's entries, so that EINTR, a
 * short transfer and a file that ends early are handled alike everywhere.
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

#endif /* SC_IO_H */
