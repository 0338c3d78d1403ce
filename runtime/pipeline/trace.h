/*
 * trace.h - producer/consumer tracing: where every stage's time goes, per
 * thread, so that a starving GPU can be traced to its cause.
 *
 * Every thread that records owns one ring (base/tring.h: recording is
 * a clock read and a few stores, never a wait).  The loader's thread
 * drains every ring into this rank's Chrome Trace Event file (one event
 * per line) when an epoch begins and at close, so memory
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

#include <mpi.h>

#include "error.h"
#include "tring.h"

typedef struct sc__trace sc__trace;

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

/* Drains every ring into the file (the loader's thread only). */
int sc__trace_flush(sc__trace *t, sc_error *err);

/* Flushes, finishes the file (rank info: clock offset, dropped events), frees. */
int sc__trace_close(sc__trace *t, sc_error *err);

#endif /* SC_TRACE_H */
