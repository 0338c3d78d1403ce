/*
 * stream_hold.c - what a stream holds, shared by its scheduling (stream.c)
 * and its batch assembly (batch.c), so that neither calls the other back:
 * the ring's slots, and the shards a built batch lets go.
 */
#include "stream_impl.h"

#include <errno.h>
#include <pthread.h>

#include "invariant.h"
#include "source.h"

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

/* What the bound leaves the pool beside the shards held (mutex held). */
uint64_t sc__stream_room(const sc__stream *s)
{
    return s->resident < s->o.mem_bytes ? s->o.mem_bytes - s->resident : 0;
}

void sc__stream_retire(sc__stream *s, ep *e, uint64_t q0, uint64_t q1)
{
    SC__ASSERT(sc__stream_held(s));
    int freed = 0;
    for (uint64_t q = q0; q < q1; q++) {
        uint32_t i = e->src_shard[q];
        if (--e->refs[i] != 0)
            continue;
        freed = 1;
        uint64_t bytes = sc__shard_bytes(s->ds, e->shards[i]);
        s->resident -= bytes;
        if (e->map[i].base)
            sc__cache_unmap(&e->map[i]);
        else /* pooled while shards and pool stay within the bound (and its spare byte) */
            sc__pool_put(&s->pool, e->buf[i], e->cap[i], sc__stream_room(s) + e->cap[i] - bytes);
        e->buf[i] = NULL;
        e->state[i] = SH_FREED;
    }
    if (freed)
        pthread_cond_broadcast(&s->work);
}
