/*
 * io.c - pread()/pwrite() until done, buffered or direct (see io.h).
 */
#define _GNU_SOURCE
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "mem.h"

/* One call moves at most 1 GiB: Linux moves less than 2 GiB a call anyway. */
#define IO_STEP (1u << 30)
/*
 * The bounce buffer: big enough that one read keeps the device's queue
 * busy (the block layer splits it into requests in flight together),
 * small enough to stay in the CPU's cache for the copy after it.
 */
#define IO_BOUNCE SC__IO_BOUNCE
#define IO_A ((uint64_t)SC__IO_ALIGN)
#define IO_DOWN(x) ((x) & ~(IO_A - 1))
#define IO_UP(x) IO_DOWN((x) + IO_A - 1)

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

int sc__io_open_direct(int fd, int flags)
{
    if (sc__fault("io-no-direct")) { /* test hook: a filesystem that refuses it */
        errno = EINVAL;
        return -1;
    }
    char at[64];
    snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
    return open(at, flags | O_DIRECT | O_CLOEXEC);
}

/* EINVAL from an aligned direct transfer: this file's filesystem will not. */
static const char io_refused[] = "direct I/O refused";

/*
 * Aligned [at, at + len) of dfd into the aligned b, of which the first
 * `need` bytes must exist (the rest may lie past the file's end: a direct
 * read there comes back short, at the end).
 */
static const char *io_direct_in(int dfd, unsigned char *b, uint64_t len, uint64_t at,
                                uint64_t need)
{
    uint64_t got = 0;
    while (got < need) {
        size_t step = len - got > IO_STEP ? IO_STEP : (size_t)(len - got);
        ssize_t r = pread(dfd, b + got, step, (off_t)(at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EINVAL ? io_refused : strerror(errno);
        got += (uint64_t)r;
        if (r == 0 || (got % IO_A && got < need))
            return "the file ends early";
        if (got % IO_A) /* the end of the file */
            break;
    }
    return NULL;
}

/* [off, off + n) through the bounce buffer, in aligned pieces. */
static const char *io_bounce_in(int dfd, unsigned char *buf, uint64_t n, uint64_t off)
{
    unsigned char *b = sc__thread_buffer(SC__TB_BOUNCE, IO_BOUNCE);
    if (!b)
        return "no memory for a bounce buffer";
    const char *why = NULL;
    for (uint64_t at = IO_DOWN(off); !why && at < off + n; at += IO_BOUNCE) {
        uint64_t len = IO_UP(off + n) - at < IO_BOUNCE ? IO_UP(off + n) - at : IO_BOUNCE;
        uint64_t lo = at > off ? at : off, hi = at + len < off + n ? at + len : off + n;
        why = io_direct_in(dfd, b, len, at, hi - at);
        if (!why)
            memcpy(buf + (lo - off), b + (lo - at), hi - lo);
    }
    return why;
}

/* Direct, buf aligned like off: the partial pages at the ends bounced, the rest in place. */
static const char *io_direct_read(int dfd, unsigned char *buf, uint64_t n, uint64_t off)
{
    if (((uintptr_t)buf - off) % IO_A)
        return io_bounce_in(dfd, buf, n, off);
    uint64_t m0 = IO_UP(off), m1 = IO_DOWN(off + n);
    if (m1 <= m0) /* within one or two pages */
        return io_bounce_in(dfd, buf, n, off);
    const char *why = m0 > off ? io_bounce_in(dfd, buf, m0 - off, off) : NULL;
    if (!why)
        why = io_direct_in(dfd, buf + (m0 - off), m1 - m0, m0, m1 - m0);
    if (!why && off + n > m1)
        why = io_bounce_in(dfd, buf + (m1 - off), off + n - m1, m1);
    return why;
}

const char *sc__io_pread_direct(int fd, int dfd, void *buf, uint64_t n, uint64_t off)
{
    if (dfd < 0 || n == 0 || sc__io_cached(fd, n, off))
        return sc__io_pread(fd, buf, n, off);
    const char *why = io_direct_read(dfd, buf, n, off);
    return why == io_refused ? sc__io_pread(fd, buf, n, off) : why;
}

/*
 * Aligned [at, at + len) of buf (aligned like at, or copied through the
 * bounce buffer) to dfd.  io_refused: the caller writes it buffered.
 */
static const char *io_direct_out(int dfd, const unsigned char *buf, uint64_t len, uint64_t at)
{
    int bounce = ((uintptr_t)buf - at) % IO_A != 0;
    unsigned char *b = bounce ? sc__thread_buffer(SC__TB_BOUNCE, IO_BOUNCE) : NULL;
    if (bounce && !b)
        return io_refused;
    for (uint64_t done = 0; done < len;) {
        uint64_t most = bounce ? IO_BOUNCE : IO_STEP;
        size_t step = (size_t)(len - done < most ? len - done : most);
        if (bounce)
            memcpy(b, buf + done, step);
        ssize_t r = pwrite(dfd, bounce ? b : buf + done, step, (off_t)(at + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EINVAL ? io_refused : strerror(errno);
        if (r == 0)
            return "nothing was written";
        if (r % IO_A) /* mid-page: no direct write can follow it */
            return io_refused;
        done += (uint64_t)r;
    }
    return NULL;
}

const char *sc__io_pwrite_direct(int fd, int dfd, const void *buf, uint64_t n, uint64_t off)
{
    const unsigned char *p = buf;
    uint64_t m0 = IO_UP(off), m1 = IO_DOWN(off + n);
    if (dfd < 0 || m1 <= m0)
        return sc__io_pwrite(fd, buf, n, off);
    const char *why = io_direct_out(dfd, p + (m0 - off), m1 - m0, m0);
    if (why == io_refused)
        return sc__io_pwrite(fd, buf, n, off);
    if (!why && m0 > off)
        why = sc__io_pwrite(fd, p, m0 - off, off);
    if (!why && off + n > m1)
        why = sc__io_pwrite(fd, p + (m1 - off), off + n - m1, m1);
    return why;
}

int sc__io_cached(int fd, uint64_t n, uint64_t off)
{
    enum { PAGES = 4096 }; /* asked a piece at a time: the answer's vector on the stack */
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096, at = off & ~(page - 1);
    unsigned char vec[PAGES];
    while (at < off + n) {
        uint64_t len = off + n - at < PAGES * page ? off + n - at : PAGES * page;
        void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, (off_t)at);
        if (p == MAP_FAILED)
            return 0;
        int in = mincore(p, (size_t)len, vec) == 0;
        for (uint64_t k = 0; in && k < (len + page - 1) / page; k++)
            in = vec[k] & 1;
        munmap(p, (size_t)len);
        if (!in)
            return 0;
        at += len;
    }
    return 1;
}
