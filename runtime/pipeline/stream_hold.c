/*
 * stream_hold.c - what a stream holds, shared by its scheduling (stream.c)
 * and its batch assembly (batch.c), so that neither calls the other back:
 * the ring's slots, and the shards a built batch lets go.
 */
#include "stream_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "invariant.h"
#include "io.h"
#include "source.h"
#include "vec.h"

int sc__stream_held(sc__stream *s)
{
    int rc = pthread_mutex_lock(&s->mu);
    if (rc == 0) /* it was not held here: the assertion fails */
        pthread_mutex_unlock(&s->mu);
    return rc == EDEADLK;
}

/*
 * A slot in `state` (with SL_FREE: any; else the one of batch `seq`), or
 * NULL.  Slots are not reused in ring order: a batch whose buffers the
 * caller still holds (the Python package holds one while a tensor made
 * from it lives) keeps its slot, and the others go on cycling.
 */
rslot *sc__stream_slot_with(const sc__stream *s, int state, uint64_t seq)
{
    for (uint64_t i = 0; i < s->o.depth; i++) {
        rslot *r = &s->ring[i];
        if (r->state == state && (state == SL_FREE || r->seq == seq))
            return r;
    }
    return NULL;
}

void sc__stream_let_go(sc__stream *s, sc__mapping *m, void *buf, uint64_t bytes)
{
    SC__ASSERT(sc__stream_held(s));
    if (!buf && !(m && m->base))
        return;
    struct sc__gone *g = sc__vec_grow(s->gone, &s->capgone, s->ngone + 1, sizeof *g);
    if (!g) { /* no room to defer it: freed now, under the mutex */
        sc__cache_unmap(m);
        free(buf);
        return;
    }
    s->gone = g;
    g[s->ngone].map = m ? *m : (sc__mapping){0};
    g[s->ngone].buf = buf;
    g[s->ngone++].bytes = bytes;
    s->resident += bytes; /* still held, against the bound, until buried */
    s->gone_bytes += bytes;
    if (m)
        memset(m, 0, sizeof *m);
}

void sc__stream_bury(sc__stream *s)
{
    SC__ASSERT(sc__stream_held(s));
    if (!s->ngone)
        return;
    struct sc__gone *g = s->gone;
    size_t n = s->ngone, cap = s->capgone;
    s->gone = NULL, s->ngone = s->capgone = 0;
    uint64_t bytes = 0;
    pthread_mutex_unlock(&s->mu);
    for (size_t k = 0; k < n; k++) {
        sc__cache_unmap(&g[k].map);
        free(g[k].buf);
        bytes += g[k].bytes;
    }
    pthread_mutex_lock(&s->mu);
    s->resident -= bytes;
    s->gone_bytes -= bytes;
    pthread_cond_broadcast(&s->work); /* the room may let a load go on */
    if (!s->gone) /* the list's memory kept for the next */
        s->gone = g, s->capgone = cap;
    else
        free(g);
}

/* What the bound leaves the pool beside the shards held (mutex held). */
static uint64_t stream_room(const sc__stream *s)
{
    return s->resident < s->o.mem_bytes ? s->o.mem_bytes - s->resident : 0;
}

uint64_t sc__stream_buf_pad(const sc__stream *s)
{
    return 1 + (uint64_t)s->nfields * SC__IO_ALIGN;
}

uint64_t sc__stream_pool_limit(const sc__stream *s, size_t n)
{
    return stream_room(s) + sc__stream_buf_pad(s) * n;
}

int sc__stream_pool_fits(const sc__stream *s, uint64_t cap)
{
    return s->pool.bytes + cap <= sc__stream_pool_limit(s, s->pool.n + 1);
}

void *sc__stream_pool_put(sc__stream *s, void *buf, uint64_t cap)
{
    SC__ASSERT(sc__stream_held(s));
    return sc__pool_put(&s->pool, buf, cap, sc__stream_pool_limit(s, s->pool.n + 1));
}

void sc__stream_drop_buf(sc__stream *s, void *buf, uint64_t cap, uint64_t bytes)
{
    s->resident -= bytes;
    sc__stream_let_go(s, NULL, sc__stream_pool_put(s, buf, cap), bytes);
}

int sc__stream_unref(sc__stream *s, ep *e, uint64_t i)
{
    SC__ASSERT(sc__stream_held(s));
    if (--e->refs[i] != 0)
        return 0;
    uint64_t bytes = sc__shard_bytes(s->ds, e->shards[i]);
    if (e->map[i].base) {
        s->resident -= bytes;
        sc__stream_let_go(s, &e->map[i], NULL, bytes);
    } else {
        sc__stream_drop_buf(s, e->buf[i], e->cap[i], bytes);
    }
    e->buf[i] = NULL;
    e->state[i] = SH_FREED;
    return 1;
}

void sc__stream_retire(sc__stream *s, ep *e, uint64_t q0, uint64_t q1)
{
    SC__ASSERT(sc__stream_held(s));
    int freed = 0;
    for (uint64_t q = q0; q < q1; q++)
        freed |= sc__stream_unref(s, e, e->src_shard[q]);
    if (freed)
        pthread_cond_broadcast(&s->work);
}
