/*
 * vec.c - growable arrays (see vec.h).
 */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

int sc__vec_reserve(sc__vec *v, size_t more)
{
    if (more > SIZE_MAX - v->n)
        return -1;
    void *g = sc__vec_grow(v->p, &v->cap, v->n + more, v->size);
    if (!g)
        return -1;
    v->p = g;
    return 0;
}

void *sc__vec_push(sc__vec *v, const void *elem)
{
    if (sc__vec_reserve(v, 1))
        return NULL;
    void *at = (char *)v->p + v->n++ * v->size;
    if (elem)
        memcpy(at, elem, v->size);
    return at;
}

void sc__vec_free(sc__vec *v)
{
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}
