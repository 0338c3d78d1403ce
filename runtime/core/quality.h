/*
 * quality.h - the counts behind sc_plan_quality (quality.c) that the
 * stream's epoch summary reports too: one definition of "distinct shards
 * per batch" for both.
 */
#ifndef SC_QUALITY_H
#define SC_QUALITY_H

#include <stdint.h>

/*
 * The distinct values among keys[0..n), counted with `seen` (one byte per
 * possible value) as scratch: all zero on entry, all zero again on return.
 * With a batch's shards as keys: the shards the batch draws from.
 */
uint64_t sc__quality_distinct(const uint32_t *keys, uint64_t n, unsigned char *seen);

#endif /* SC_QUALITY_H */
