/*
 * vec.h - growable arrays: one overflow-checked doubling for every array
 * that grows by appends (Redis's sds and SQLite's StrAccum serve theirs).
 *
 * The array stays typed in its owner's struct, with its count and its
 * room beside it; sc__vec_grow() only makes the room (realloc's contract:
 * the old array stays valid when it fails).  libc only: the command line
 * compiles it too.
 */
#ifndef SC_VEC_H
#define SC_VEC_H

#include <stddef.h>
#include <stdint.h>

/* Callers count in uint64_t: a count that fits one fits a size_t. */
_Static_assert(SIZE_MAX >= UINT64_MAX, "shardcache needs a 64-bit size_t");

/*
 * Room for `need` elements of `size` bytes: p itself when *cap holds
 * them, else p reallocated to max(need, 2 * *cap, 16) elements, the new
 * capacity in *cap.  NULL when out of memory or when the bytes would
 * overflow a size_t: p and *cap are then unchanged and p is still the
 * caller's to free.
 */
void *sc__vec_grow(void *p, size_t *cap, size_t need, size_t size);

#endif
