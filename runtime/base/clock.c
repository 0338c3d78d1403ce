/*
 * clock.c - the process clock (see clock.h).
 */
#include "clock.h"

#include <time.h>

uint64_t sc__clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
