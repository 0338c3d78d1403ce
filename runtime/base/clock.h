/*
 * clock.h - the process clock: one monotonic clock every layer reads, for
 * trace spans (base/tring), the job clock's offsets (pipeline/trace),
 * timeouts and pauses (cache, peer, stream, loader).  It never goes back
 * and means nothing across processes: the job clock in pipeline/trace
 * relates ranks' clocks.
 */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <stdint.h>

/* Nanoseconds on the process clock (CLOCK_MONOTONIC). */
uint64_t sc__clock_ns(void);

/* Seconds on the process clock, for timeouts and waits. */
static inline double sc__clock_s(void)
{
    return 1e-9 * (double)sc__clock_ns();
}

#endif
