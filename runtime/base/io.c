/*
 * io.c - pread()/pwrite() until done (see io.h).
 */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* One call moves at most 1 GiB: Linux moves less than 2 GiB a call anyway. */
#define IO_STEP (1u << 30)

static const char *io_loop(int fd, unsigned char *buf, uint64_t n, uint64_t off, int write)
{
    while (n > 0) {
        size_t step = n > IO_STEP ? IO_STEP : (size_t)n;
        ssize_t got = write ? pwrite(fd, buf, step, (off_t)off)
                            : pread(fd, buf, step, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return strerror(errno);
        if (got == 0)
            return write ? "nothing was written" : "the file ends early";
        buf += got;
        off += (uint64_t)got;
        n -= (uint64_t)got;
    }
    return NULL;
}

const char *sc__io_pread(int fd, void *buf, uint64_t n, uint64_t off)
{
    return io_loop(fd, buf, n, off, 0);
}

const char *sc__io_pwrite(int fd, const void *buf, uint64_t n, uint64_t off)
{
    return io_loop(fd, (unsigned char *)buf, n, off, 1);
}
