/*
 * trace.h - producer/consumer tracing: where every stage's time goes, per
 * thread, so that a starving GPU can be traced to its cause.
 *
 * Every thread that records owns one ring of fixed size (one writer, no
 * lock): recording an event is a clock read and a few stores, and when the
 * ring is full the event is dropped and counted, never waited for.  The
 * loader's thread drains every ring into this rank's Chrome Trace Event
 * file (one event per line) when an epoch begins and at close, so memory
 * stays bounded in a job of any length and a crashed rank's file holds
 * every epoch it began.  Timestamps are one job-wide clock: this rank's
 * CLOCK_MONOTONIC plus its offset to rank 0's, measured at open.
 *
 * With tracing off every call takes a NULL ring and returns at once.  This
 * module must never call MPI except in sc__trace_open, and must never
 * block a recording thread.
 */
#ifndef SC_TRACE_H
#define SC_TRACE_H

#include <stdint.h>

#include "shardcache.h"

/* The stages (SC_TRACE_STAGE_LIST in shardcache.h: the file format's names). */
typedef enum sc__stage {
#define SC__STAGE_ENUM(id, name) SC__ST_##id,
    SC_TRACE_STAGE_LIST(SC__STAGE_ENUM)
#undef SC__STAGE_ENUM
    SC__ST_COUNT
} sc__stage;

const char *sc__stage_name(sc__stage st);

/* Counters (Chrome "C" events). */
typedef enum sc__counter {
    SC__CT_RING,     /* batches built and waiting for the consumer */
    SC__CT_HIT_RATE, /* this epoch's cache hit rate, % */
} sc__counter;

typedef struct sc__trace sc__trace;
typedef struct sc__tring sc__tring;

/* What a lower layer (the cache) needs to record a span for its caller. */
typedef struct sc__tctx {
    sc__tring *ring; /* the calling thread's, or NULL */
    uint64_t epoch;
} sc__tctx;

/*
 * Collective over comm.  `prefix` empty: tracing off (*out = NULL), which
 * must then be so on every rank: SC_TRACE set on some ranks only is an
 * SC_EINVAL on all.  On, each rank writes `<prefix>.rank<R>.json` and
 * measures its clock offset to rank 0 by ping-pong; its error bound (half
 * the best round trip) is written into the file.
 */
int sc__trace_open(MPI_Comm comm, const char *prefix, uint64_t ring_events,
                   sc__trace **out, sc_error *err);

/*
 * A ring for the calling thread, named in the file ("producer 2"), or NULL
 * when tracing is off (or out of memory: that thread is then not traced,
 * and the file says so).  Threadsafe.
 */
sc__tring *sc__trace_ring(sc__trace *t, const char *thread_name);

/* Nanoseconds on the local monotonic clock; 0 with a NULL ring (no read). */
uint64_t sc__trace_now(const sc__tring *r);

/* One stage, [t0, t1) in sc__trace_now units.  -1: no shard / batch. */
void sc__trace_span(sc__tring *r, sc__stage st, uint64_t t0, uint64_t t1, uint64_t epoch,
                    int64_t shard, int64_t batch, uint64_t bytes);
void sc__trace_counter(sc__tring *r, sc__counter c, uint64_t t, double value);
/* An instant: epoch `epoch` ended on this rank. */
void sc__trace_epoch_end(sc__tring *r, uint64_t t, uint64_t epoch);

/* Test-only (SC_FAULT=slow:STAGE): sleeps 2 ms when `st` is the slow stage. */
void sc__trace_slow(sc__stage st);

/* Drains every ring into the file (the loader's thread only). */
int sc__trace_flush(sc__trace *t, sc_error *err);

/* Flushes, finishes the file (rank info: clock offset, dropped events), frees. */
int sc__trace_close(sc__trace *t, sc_error *err);

#endif /* SC_TRACE_H */
