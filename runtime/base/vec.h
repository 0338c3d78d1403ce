/*
 * vec.h - growable arrays: one overflow-checked doubling for every array
 * that grows by appends (Redis's sds and SQLite's StrAccum serve theirs).
 *
 * Two forms.  sc__vec_grow() grows an array its owner keeps typed, with
 * its count and capacity beside it in the owner's struct (realloc's
 * contract: the old array stays valid when it fails).  sc__vec is an array
 * with its count and capacity, typed by its element size, for lists built
 * locally.  libc only: the command line compiles it too.
 */
#ifndef SC_VEC_H
#define SC_VEC_H

#include <stddef.h>

/*
 * Room for `need` elements of `size` bytes: p itself when *cap holds
 * them, else p reallocated to max(need, 2 * *cap, 16) elements, the new
 * capacity in *cap.  NULL when out of memory or when the bytes would
 * overflow a size_t: p and *cap are then unchanged and p is still the
 * caller's to free.
 */
void *sc__vec_grow(void *p, size_t *cap, size_t need, size_t size);

/* An array of n elements of `size` bytes in p (room for cap). */
typedef struct sc__vec {
    void *p;
    size_t n, cap, size;
} sc__vec;

/* An empty vector of `type`. */
#define SC__VEC_INIT(type) {.p = NULL, .n = 0, .cap = 0, .size = sizeof(type)}

/* Room for `more` elements past n: 0, or -1 (out of memory, overflow). */
int sc__vec_reserve(sc__vec *v, size_t more);
/* Appends a copy of *elem: the element's place, or NULL (out of memory). */
void *sc__vec_push(sc__vec *v, const void *elem);
/* Frees the elements; the vector is empty again, of the same type. */
void sc__vec_free(sc__vec *v);

#endif
