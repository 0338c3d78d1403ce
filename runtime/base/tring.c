/*
 * tring.c - per-thread event rings.
 *
 * A ring is single-producer/single-consumer: the recording thread alone
 * advances `head` (release), the draining thread alone advances `tail`
 * (release); each reads the other's index with acquire, so a slot is never
 * read before it is written nor overwritten before it is read.
 */
#include "tring.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fault.h"

struct sc__tring {
    _Atomic uint64_t head, tail, dropped;
    uint64_t cap;
    uint64_t slow; /* testing builds: stages SC_FAULT=slow:STAGE slows, a bit each */
    int tid;
    char name[48];
    sc__event ev[];
};

static const char *const tring_stage_names[] = {
#define SC__STAGE_NAME(id, name) name,
    SC_TRACE_STAGE_LIST(SC__STAGE_NAME)
#undef SC__STAGE_NAME
};

const char *sc__tring_stage_name(sc__stage st)
{
    return st < SC__ST_COUNT ? tring_stage_names[st] : "?";
}

/* The stages SC_FAULT=slow:STAGE names (ids in lower case: slow:cache_read). */
static uint64_t tring_slow_stages(void)
{
    uint64_t mask = 0;
#ifdef SC_TESTING
    static const char *const ids[] = {
#define SC__STAGE_ID(id, name) #id,
        SC_TRACE_STAGE_LIST(SC__STAGE_ID)
#undef SC__STAGE_ID
    };
    for (int st = 0; st < SC__ST_COUNT; st++) {
        char want[64];
        int n = snprintf(want, sizeof want, "slow:%s", ids[st]);
        for (int i = 5; i < n; i++)
            want[i] = (char)(want[i] >= 'A' && want[i] <= 'Z' ? want[i] - 'A' + 'a' : want[i]);
        if (sc__fault(want))
            mask |= UINT64_C(1) << st;
    }
#endif
    return mask;
}

sc__tring *sc__tring_new(uint64_t cap, int tid, const char *name)
{
    cap = cap ? cap : 1;
    sc__tring *r = calloc(1, sizeof *r + sizeof(sc__event) * cap);
    if (!r)
        return NULL;
    r->cap = cap;
    r->tid = tid;
    r->slow = tring_slow_stages();
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

void sc__tring_free(sc__tring *r)
{
    free(r);
}

int sc__tring_tid(const sc__tring *r)
{
    return r->tid;
}

const char *sc__tring_name(const sc__tring *r)
{
    return r->name;
}

uint64_t sc__tring_dropped(const sc__tring *r)
{
    return atomic_load_explicit(&((sc__tring *)r)->dropped, memory_order_relaxed);
}

uint64_t sc__tring_now(const sc__tring *r)
{
    return r ? sc__clock_ns() : 0;
}

/* The next free slot, or NULL (counted as dropped) when the ring is full. */
static sc__event *tring_slot(sc__tring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tl = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (h - tl >= r->cap) {
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    return &r->ev[h % r->cap];
}

static void tring_publish(sc__tring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

void sc__tring_span(sc__tring *r, sc__stage st, uint64_t t0, uint64_t t1, uint64_t epoch,
                    int64_t shard, int64_t batch, uint64_t bytes)
{
    sc__event *e = r ? tring_slot(r) : NULL;
    if (!e)
        return;
    *e = (sc__event){t0, t1, epoch, bytes, shard, batch, 0.0, SC__EV_SPAN, (uint16_t)st};
    tring_publish(r);
}

void sc__tring_counter(sc__tring *r, sc__counter c, uint64_t t, double value)
{
    sc__event *e = r ? tring_slot(r) : NULL;
    if (!e)
        return;
    *e = (sc__event){t, t, 0, 0, -1, -1, value, SC__EV_COUNTER, (uint16_t)c};
    tring_publish(r);
}

void sc__tring_epoch_end(sc__tring *r, uint64_t t, uint64_t epoch)
{
    sc__event *e = r ? tring_slot(r) : NULL;
    if (!e)
        return;
    *e = (sc__event){t, t, epoch, 0, -1, -1, 0.0, SC__EV_EPOCH_END, 0};
    tring_publish(r);
}

void sc__tring_slow(const sc__tring *r, sc__stage st)
{
#ifdef SC_TESTING
    if (r && (r->slow >> st) & 1)
        usleep(2000);
#else
    (void)r;
    (void)st;
#endif
}

uint64_t sc__tring_drain(sc__tring *r, sc__event_fn fn, void *arg)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tl = atomic_load_explicit(&r->tail, memory_order_relaxed), n = h - tl;
    for (; tl < h; tl++)
        fn(arg, r, &r->ev[tl % r->cap]);
    atomic_store_explicit(&r->tail, tl, memory_order_release);
    return n;
}
