#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void sc__log(int threshold, int level, int rank, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (level > threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line, so lines from threads do not interleave. */
    fprintf(stderr, "shardcache[rank %d]: %s\n", rank, line);
}
