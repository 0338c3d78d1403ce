/*
 * vec.c - growable arrays (see vec.h).
 */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>

#define VEC_MIN 16 /* elements of a first allocation */

void *sc__vec_grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (p && need <= *cap)
        return p;
    size_t c = *cap <= SIZE_MAX / 2 ? 2 * *cap : SIZE_MAX;
    if (c < need)
        c = need;
    if (c < VEC_MIN)
        c = VEC_MIN;
    if (!size || c > SIZE_MAX / size)
        return NULL;
    void *g = realloc(p, c * size);
    if (g)
        *cap = c;
    return g;
}
