/*
 * mem.h - buffers of megabytes that fault in 2 MiB at a time.
 */
#ifndef SC_MEM_H
#define SC_MEM_H

#include <stddef.h>

/*
 * At least `bytes` for a shard, a chunk or a batch, aligned to a page;
 * from 2 MiB on, aligned to 2 MiB and advised as transparent huge pages.
 * Freed with free(); NULL when out of memory.
 */
void *sc__big_alloc(size_t bytes);

#endif
