/*
 * stream_impl.h - what the stream's two halves share: the epoch's work
 * (ep), the ring's slots and the stream itself.  stream.c schedules the
 * producers (prepare, load, pick, retire, the caller's side); batch.c
 * assembles a batch into a slot (put, decode, augment, copy to the
 * device).  Private to the pipeline: nothing outside stream.c and batch.c
 * includes it.
 */
#ifndef SC_STREAM_IMPL_H
#define SC_STREAM_IMPL_H

#include <pthread.h>

#include "cache.h"
#include "mem.h"
#include "image.h"
#include "stream.h"

#define FIELD_ALIGN 256 /* each field of a ring slot starts on this boundary */

enum { SH_WAIT, SH_LOADING, SH_LOADED, SH_FREED };
enum { SL_FREE, SL_BUILDING, SL_READY, SL_HELD };
enum { PREP_NO, PREP_BUSY, PREP_DONE };

typedef struct ep {
    struct ep *next;
    uint64_t epoch, seq0, nb, want, m;
    int prep;
    /* shards in load order */
    uint32_t *shards;
    uint64_t nsh;
    uint64_t *start;         /* [nsh + 1]: first position of each shard */
    unsigned char *state;    /* [nsh] SH_* */
    uint64_t *refs;          /* [nsh] sample copies still to be built from it */
    /* A shard in memory is a mapped cache entry (a warm hit: no copy) or a
     * heap buffer holding its fields one after another (read from the source). */
    sc__mapping *map;        /* [nsh] */
    unsigned char **buf;     /* [nsh] */
    uint64_t *cap;           /* [nsh] bytes allocated for buf[i] (a pooled one may be larger) */
    const unsigned char **fp; /* [nsh * nfields] where each field of each shard is */
    uint64_t next_load, loaded_prefix;
    /* the delivered order: position q of the epoch reads src_shard[q], src_off[q] */
    uint32_t *src_shard, *src_off;
    sc__sched sched;         /* the ids, slot by slot, and the drops */
    uint64_t *need;          /* [nb]: highest shard index batch b reads */
    uint64_t next_build;
    sc__stream_counts counts;
} ep;

/*
 * A shard read from the source whose cache entry is owed (sc__cache_read's
 * *owed): the stream's cache writer (stream_fill.c) writes it off the
 * producers' path, from the bytes the builders read.  While its epoch holds
 * the shard, e and i name it and the write holds one of its refs; once the
 * epoch is done with it, the fill owns its buffer (e NULL, buf and cap).
 */
typedef struct sc__fill {
    struct sc__fill *next;
    ep *e;
    uint64_t i, shard, bytes, epoch;
    unsigned char *buf;
    uint64_t cap;
    void *fp[SC_MAX_FIELDS];
    int writing;
} sc__fill;

typedef struct rslot {
    int state;
    uint64_t seq, epoch, index, padded;
    uint64_t *ids;           /* as delivered: a replacement's own id in its slot */
    unsigned char *replaced; /* [B]: 0, or SC_REPLACED_* (sc_batch.replaced) */
    uint64_t *stands_for;    /* [B]: where replaced, the skipped sample's id */
    uint64_t nreplaced;
    uint64_t retired; /* its batch's first samples whose shards the build already let go */
    unsigned char *host;
    unsigned char *dev;
    const uint64_t *offs[SC_MAX_FIELDS]; /* a variable-length field's offsets in host; else NULL */
    void *event;    /* after the slot's copy to the device */
    void *consumed; /* after its consumer's last read (recorded at release) */
} rslot;

struct sc__stream {
    sc_dataset *ds;
    sc_cache *cache;
    sc__stream_opts o;
    int nfields;
    uint64_t fsb[SC_MAX_FIELDS];  /* a delivered sample's bytes (variable-length: the most) */
    uint64_t foff[SC_MAX_FIELDS]; /* field offset within a ring slot */
    uint64_t fval[SC_MAX_FIELDS]; /* its values' (after a variable-length field's offsets) */
    int vlen[SC_MAX_FIELDS];      /* 1: delivered as offsets and values */
    sc__crop crop[SC_MAX_FIELDS]; /* width 0: not decoded; else the decode's output */
    uint64_t slot_bytes;
    sc__copy_fn copy; /* samples into the ring: sc__copy_nt where it outgrows the cache */

    pthread_mutex_t mu;
    pthread_cond_t work, ready;
    ep *head, *tail, *retired;
    uint64_t next_seq, take, held, resident;
    rslot *ring;
    pthread_t *threads;
    int nthreads, named, stop, failed;
    sc_error err;
    /*
     * A failed build belongs to its batch: batches before it are still
     * built and handed out, and the error stops the stream only when its
     * batch is due (so an error in the next epoch's first batch, built
     * ahead, surfaces in that epoch).  UINT64_MAX: none.
     */
    uint64_t fail_seq, fail_id; /* fail_id: the sample that did not decode, or UINT64_MAX */
    sc_error fail_err;
    uint64_t failed_id;         /* the stream's stop was fail_id's: the sample, or UINT64_MAX */
    /*
     * Shard buffers freed by builders, kept for the next loads: a fresh
     * malloc of a shard-sized block is an mmap whose every page faults on
     * first touch, which costs more than the copy into it (bench/stream).
     * The pool holds what mem_bytes leaves beside the shards held
     * (resident): the two together stay within the bound, but for the
     * slack of a held shard's buffer over its bytes (up to an eighth of
     * the largest shard: stream_buf_need), resident where a larger shard
     * filled the buffer before.
     */
    sc__pool pool;
    uint64_t buf_top; /* the largest shard's buffer (stream_buf_need) */
    /*
     * What threads let go of under the mutex (shards' cache mappings, and
     * buffers the pool does not keep), freed by the same thread once it has
     * dropped the mutex (sc__stream_bury): an munmap interrupts every core
     * to flush its TLB, and the consumer's release waited through them.
     */
    struct sc__gone {
        sc__mapping map; /* a mapping, or */
        void *buf;       /* a buffer */
        uint64_t bytes;  /* counted in resident until freed */
    } *gone;
    size_t ngone, capgone;
    uint64_t gone_bytes; /* let go and not yet freed, by any thread */
    /*
     * The cache writer (stream_fill.c): owed entries in read order, the
     * one being written first, and their shard bytes.
     */
    sc__fill *fills;
    uint64_t fill_bytes;
    pthread_cond_t fill_cv;
    pthread_t writer;
    int has_writer, closing;
};

/*
 * The slot layout (s->fsb, foff, fval, vlen, crop, slot_bytes) for batches
 * of B: each field's batch, aligned; a variable-length one's B + 1
 * offsets, then room for B of its largest sample.
 */
int sc__batch_layout(sc__stream *s, uint64_t B, sc_error *err);

/*
 * Batch b of epoch e into `slot` (mutex not held): every sample put,
 * decoded or copied, the user's augmentation run, and the slot copied to
 * the device when one is in use; traced into tr.  `jp` is the calling
 * producer's JPEG decoder, made at its first image.  A sample in the skip
 * list, or (SC_BAD_SAMPLE=skip) one that does not decode, is replaced by
 * another of its shard (slot->replaced); on a failure *bad_id is the
 * sample whose image did not decode (UINT64_MAX: another cause).
 */
int sc__batch_build(sc__stream *s, ep *e, uint64_t b, rslot *slot, sc__tring *tr,
                    sc__image **jp, uint64_t *bad_id, sc_error *err);

/* The ring slot in `state` (and, but for a free one, of batch seq), or NULL.  Mutex held. */
rslot *sc__stream_slot_with(const sc__stream *s, int state, uint64_t seq);

/*
 * A mapping (m, cleared) or a buffer (buf) to be freed by sc__stream_bury,
 * its `bytes` counted in resident until then; freed at once, under the
 * mutex, where the list cannot grow.  Mutex held; the thread that lets go
 * buries before it drops the mutex or waits on a condition.
 */
void sc__stream_let_go(sc__stream *s, sc__mapping *m, void *buf, uint64_t bytes);

/*
 * Frees what was let go, with the mutex dropped meanwhile, and tells the
 * producers of the room.  Mutex held on entry and return.
 */
void sc__stream_bury(sc__stream *s);

/*
 * Whether this thread holds s->mu, for SC__ASSERT: debug builds make the
 * mutex error-checking, and its owner locking it again is refused.
 */
int sc__stream_held(sc__stream *s);

/*
 * Epoch e's slots [q0, q1) are built: each one's shard let go (pooled, or
 * to be freed by the caller's sc__stream_bury) once no slot still to be
 * built copies from it, and the producers told when one was, as the room
 * may let a load go on.  Mutex held.
 */
void sc__stream_retire(sc__stream *s, ep *e, uint64_t q0, uint64_t q1);

/*
 * One of shard i's refs (a sample copy still to be built, or its owed
 * entry's write) is done: at the last, the shard is let go (pooled, or to
 * be freed by the caller's sc__stream_bury).  Mutex held; 1 when let go.
 */
int sc__stream_unref(sc__stream *s, ep *e, uint64_t i);

/* A shard buffer of cap bytes the stream is done with, `bytes` of it counted held. */
void sc__stream_drop_buf(sc__stream *s, void *buf, uint64_t cap, uint64_t bytes);
/*
 * A shard buffer's bytes beyond its shard's for direct reads: a page at
 * most ahead of each field, so that it lands in place, and one byte.
 */
uint64_t sc__stream_buf_pad(const sc__stream *s);
/*
 * buf (cap bytes) into the pool (mutex held), or back to the caller where
 * the bound leaves no room: shards and pool within the bound, a pooled
 * buffer counted by its capacity less its pad.  Counted whole, a window
 * at the bound (where the stream keeps it) left no room for a buffer its
 * shard had just let go, by the pad alone: it was freed and the next load
 * faulted a fresh one in (6-44 an epoch in test_window's cases).
 */
void *sc__stream_pool_put(sc__stream *s, void *buf, uint64_t cap);
/* 1 where the pool has room for a buffer of cap bytes (the rule above). */
int sc__stream_pool_fits(const sc__stream *s, uint64_t cap);
/* The most a pool of n buffers may hold, pads and all (the rule above). */
uint64_t sc__stream_pool_limit(const sc__stream *s, size_t n);

/*
 * The cache writer.  sc__fill_start starts its thread (a stream with a
 * cache).  sc__fill_room, as a load is picked (mutex held): 1 when a miss
 * of `bytes` may be owed to it, 0 when the writer is too far behind (the
 * miss is not kept: SC_CACHE_WRITES=behind), -1 when there is no writer or
 * it is stopping.  sc__fill_owe hands it shard i of e, just loaded, whose
 * entry the cache is owed (mutex held): 1, or 0 when it is stopping (or
 * out of memory), and the caller withdraws the reservation.  sc__fill_help: a
 * producer writes the oldest owed entry itself where they hold more than a
 * quarter of the bound (mutex held, dropped meanwhile): 1 when it did.
 * sc__fill_epoch_done gives the fills of e its buffers, as e is freed
 * (mutex held).  sc__fill_stop, on a close, writes what is owed (a job's
 * last entries are not lost) and ends the thread; a stream stopped by an
 * error withdraws what is owed instead.
 */
int sc__fill_start(sc__stream *s, sc_error *err);
int sc__fill_room(const sc__stream *s, uint64_t bytes);
int sc__fill_owe(sc__stream *s, ep *e, uint64_t i);
int sc__fill_help(sc__stream *s, sc__tring *tr);
void sc__fill_epoch_done(sc__stream *s, ep *e);
void sc__fill_stop(sc__stream *s);

/*
 * A build lets go of the shards of the samples it has put every this many
 * bytes, not only at its end: a batch of large samples (MLPerf's unet3d:
 * 7 of 147 MB) held all its shards through the copy, and the next batch's
 * loads, which need that room, waited for it: reads and copies took turns.
 * Smaller samples take the mutex once per this many bytes.
 */
#define SC__RETIRE_BYTES ((uint64_t)4 << 20)

#endif /* SC_STREAM_IMPL_H */
