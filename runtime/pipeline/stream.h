/*
 * stream.h - the pipeline from this rank's shards to batches in memory.
 *
 * Producer threads read the rank's shards (through the cache) in the
 * order of its schedule (plan order, samples shuffled within a window
 * across shards), and assemble batches, one contiguous buffer per field,
 * into a ring of staging slots (pinned with CUDA), copying each to the
 * device ring when a GPU is in use.
 * Epochs are queued: as soon as an epoch's schedule is pushed its shards are
 * loaded behind the current epoch's, and producers build its first batch
 * as soon as the previous epoch's last one is built.  Nothing is allocated
 * per batch.  This module must never call MPI (the loader does, from the
 * caller's thread), and it must never hand out a batch that a failed read
 * touched: the first error stops the producers and is returned by every
 * later sc__stream_next (an error building a batch, once the batches
 * before it have been handed out).
 */
#ifndef SC_STREAM_H
#define SC_STREAM_H

#include "device.h"
#include "resample.h"
#include "schedule.h"
#include "skiplist.h"
#include "shardcache.h"
#include "trace.h"

typedef struct sc__stream sc__stream;

typedef struct sc__stream_opts {
    int producers;       /* >= 1 */
    uint64_t depth;      /* ring slots, >= 1, or SC_PREFETCH_AUTO (resolved at open) */
    uint64_t least;      /* SC_PREFETCH_AUTO's floor (sc__config_depth) */
    uint64_t fill_most;  /* shard buffers filled into the pool at open, at most */
    uint64_t batch_size; /* samples per batch */
    uint64_t mem_bytes;  /* soft bound on shard bytes held in memory */
    uint64_t seed;       /* the job's seed: augmentation and replacements draw from it */
    int rank;            /* whose schedules are pushed */
    sc__dev *dev;        /* memory and copies */
    int device;          /* -1: batches stay in host memory */
    sc__trace *trace;    /* NULL: not traced */
    const sc_transform *tf; /* its augment runs on every sample built; NULL: none */
    void (*idle)(void *);   /* called on the consumer's thread every ms it waits; NULL: none */
    void *idle_arg;
    /* Per field, width 0: delivered as cached; else a variable-length uint8 field's
       JPEGs decoded every delivery into 3 x height x width uint8 (stream_decode). */
    sc__crop crop[SC_MAX_FIELDS];
    int skip_bad;              /* SC_BAD_SAMPLE=skip: a sample that does not decode is replaced */
    const sc__skiplist *skip;  /* SC_SKIP_LIST's samples, replaced undecoded; NULL: none */
    int log_level;             /* SC_LOG: for the skips it names */
    int fill_all;              /* SC_CACHE_WRITES=all: no owed entry is skipped (stream_fill.c) */
} sc__stream_opts;

/*
 * What one epoch did on this rank, for sc_epoch_report.  Every shard loaded
 * counts its bytes once, by origin: from_cache + from_peers + from_source
 * are the bytes loaded (a peer's fill is a hit whose bytes came from
 * another node, counted in from_peers at its first read).
 */
typedef struct sc__stream_counts {
    uint64_t hits, misses, bytes_from_source, bytes_from_cache, bytes_from_peers;
    uint64_t batch_shards, full_batches; /* distinct shards summed over full real batches */
    /*
     * The memory bound as it held: the most bytes of shards and pooled
     * buffers the stream held at once (all queued epochs') while this
     * epoch was queued, and the shard bytes read when its first batch
     * could be built (what a cold epoch's first batch waited for).
     */
    uint64_t held_peak, first_bytes;
    /* misses the cache was to keep, not written: its writer was behind (stream_fill.c) */
    uint64_t writes_skipped;
    /* loads into a fresh buffer, not a pooled one: fresh pages faulted in on the read */
    uint64_t fresh_bufs;
} sc__stream_counts;

int sc__stream_open(sc_dataset *ds, sc_cache *cache, const sc__stream_opts *o,
                    sc__stream **out, sc_error *err);
/*
 * The ring's slots, o->depth or what SC_PREFETCH_AUTO resolved to
 * (sc__config_depth), and each slot's bytes.
 */
uint64_t sc__stream_ring(const sc__stream *s, uint64_t *slot_bytes);
/* 1 where samples go into the ring past the CPU's cache (sc__copy_nt), 0 by memcpy. */
int sc__stream_copies_past_cache(const sc__stream *s);

/*
 * Queues an epoch by its schedule (core/schedule: the loader computes it
 * and orders its shards, sc__sched_order, as the cache's Belady must know
 * the order they are read in); its batches follow the previous epoch's.
 * Takes the schedule's arrays (*sched is emptied).
 */
int sc__stream_push(sc__stream *s, uint64_t epoch, sc__sched *sched, sc_error *err);

/*
 * The next batch in sequence (the caller knows each epoch's batch count),
 * waiting for it if it is not built yet; *waited is the time spent waiting.
 * Asking while every ring slot is held is the caller's mistake: SC_EINVAL,
 * and the stream goes on (sc__stream_status stays SC_OK).
 */
int sc__stream_next(sc__stream *s, sc_batch *b, double *waited, sc_error *err);

/* Batches built and not yet taken (for the trace's ring counter). */
uint64_t sc__stream_ready(sc__stream *s);

/* SC_OK, or the error that stopped the producers (sticky). */
int sc__stream_status(sc__stream *s);
/* The sample whose image did not decode that stopped the stream, or UINT64_MAX. */
uint64_t sc__stream_failed_sample(sc__stream *s);
/*
 * Gives a batch's slot back; a device slot's next copy waits on the GPU for
 * the work queued on `stream` (the consumer's; NULL: the legacy stream).
 */
int sc__stream_release(sc__stream *s, const sc_batch *b, void *stream, sc_error *err);

/*
 * A held host batch's memory handed to the caller: the slot gets new memory
 * and is free again, the batch keeps its addresses (b->offsets now points
 * into *out, which owns it all: sc__stream_detached_free).  SC_ENOTSUP for
 * a ring with a device (its memory is the device's).
 */
int sc__stream_detach(sc__stream *s, sc_batch *b, void **out, sc_error *err);
void sc__stream_detached_free(void *d);

/*
 * The caller has taken every batch of `epoch` (the oldest queued): returns
 * the ids the remainder policy dropped (valid until the next call) and the
 * epoch's counts, and retires the epoch.
 */
int sc__stream_finish_epoch(sc__stream *s, uint64_t epoch, const uint64_t **dropped,
                            uint64_t *ndropped, sc__stream_counts *counts,
                            sc_error *err);

/* The counts of the epoch sc__stream_finish_epoch retired last: SC_OK, or SC_EINVAL if none. */
int sc__stream_last_counts(sc__stream *s, sc__stream_counts *out);

/* Stops and joins the producers, frees everything; safe at any point. */
void sc__stream_close(sc__stream *s);

#endif /* SC_STREAM_H */
