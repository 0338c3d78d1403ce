/*
 * tring.h - trace rings: recording what a thread spends its time on.
 *
 * Every thread that records owns one ring of fixed size (one writer, no
 * lock): recording an event is a clock read and a few stores, and when the
 * ring is full the event is dropped and counted, never waited for.  One
 * other thread drains a ring (pipeline/trace.c writes the events into the
 * rank's trace file).  This is the half of tracing that any layer may call
 * (the cache records its reads with it); the file, the job-wide clock and
 * the list of rings are the pipeline's.  With tracing off every call takes
 * a NULL ring and returns at once.  Nothing here may block a recording
 * thread or call MPI.
 */
#ifndef SC_TRING_H
#define SC_TRING_H

#include <stdint.h>

#include "clock.h"
#include "shardcache/formats.h"

/* The stages (SC_TRACE_STAGE_LIST in shardcache/formats.h: the file's names). */
typedef enum sc__stage {
#define SC__STAGE_ENUM(id, name) SC__ST_##id,
    SC_TRACE_STAGE_LIST(SC__STAGE_ENUM)
#undef SC__STAGE_ENUM
    SC__ST_COUNT
} sc__stage;

const char *sc__tring_stage_name(sc__stage st);

/* Counters (Chrome "C" events). */
typedef enum sc__counter {
    SC__CT_RING,     /* batches built and waiting for the consumer */
    SC__CT_HIT_RATE, /* this epoch's cache hit rate, % */
    SC__CT_SHARDS,   /* this epoch's distinct shards per batch, mean */
} sc__counter;

/* What a ring holds: a span of a stage, a counter's value, an epoch's end. */
typedef enum sc__event_kind { SC__EV_SPAN, SC__EV_COUNTER, SC__EV_EPOCH_END } sc__event_kind;

typedef struct sc__event {
    uint64_t t0, t1, epoch, bytes;
    int64_t shard, batch;
    double value;
    uint16_t kind, what; /* sc__event_kind, then a stage or a counter */
} sc__event;

typedef struct sc__tring sc__tring;

/* What a lower layer (the cache) needs to record a span for its caller. */
typedef struct sc__tctx {
    sc__tring *ring; /* the calling thread's, or NULL */
    uint64_t epoch;
} sc__tctx;

/* A ring of `cap` events for thread `tid` named `name`; NULL if no memory. */
sc__tring *sc__tring_new(uint64_t cap, int tid, const char *name);
void sc__tring_free(sc__tring *r);
int sc__tring_tid(const sc__tring *r);
const char *sc__tring_name(const sc__tring *r);
uint64_t sc__tring_dropped(const sc__tring *r);

/* sc__clock_ns() (base/clock.h), or 0 with a NULL ring (no clock read). */
uint64_t sc__tring_now(const sc__tring *r);

/* One stage, [t0, t1) in sc__tring_now units.  -1: no shard / batch. */
void sc__tring_span(sc__tring *r, sc__stage st, uint64_t t0, uint64_t t1, uint64_t epoch,
                    int64_t shard, int64_t batch, uint64_t bytes);
void sc__tring_counter(sc__tring *r, sc__counter c, uint64_t t, double value);
/* An instant: epoch `epoch` ended on this rank. */
void sc__tring_epoch_end(sc__tring *r, uint64_t t, uint64_t epoch);

/*
 * Test-only (SC_FAULT=slow:STAGE, testing builds, tracing on): sleeps 2 ms
 * when `st` is a slow stage.  The list is read once, when the ring is made,
 * so the hot path costs one test.
 */
void sc__tring_slow(const sc__tring *r, sc__stage st);

/*
 * The draining thread's side: hands every event recorded so far to `fn`,
 * oldest first, and frees their slots.  Returns how many.
 */
typedef void (*sc__event_fn)(void *arg, const sc__tring *r, const sc__event *e);
uint64_t sc__tring_drain(sc__tring *r, sc__event_fn fn, void *arg);

#endif /* SC_TRING_H */
