/*
 * stream_fill.c - the stream's cache writer: the entries of shards read
 * from the source, written by a thread of their own while the producers
 * read on and the builders copy from the same bytes.
 *
 * A producer that wrote each entry before the shard was used read half as
 * fast as its source allowed where writing cost as much as reading: a cold
 * epoch over a cache on a tmpfs ran at a third of the same epoch without
 * one (docs/benchmarks.md, "Cache writes off the read path").  The writer takes
 * entries in read order and never holds the producers back: when what it
 * owes would pass a quarter of the memory bound, a new entry is not kept
 * (the epoch summary counts it, cache_writes_skipped), and a later epoch
 * that reads the shard again may keep it then; with SC_CACHE_WRITES=all,
 * or a transform's output, the producers write in its place instead.
 */
#include "stream_impl.h"

#include <stdlib.h>
#include <unistd.h>

#include "fault.h"
#include "invariant.h"
#include "source.h"
#include "trace.h"
#include "yield.h"

/*
 * Whether the writer is behind: with `bytes` more, what it owes would pass
 * a quarter of the memory bound (one entry is always owed, whatever its size).
 */
static int fill_behind(const sc__stream *s, uint64_t bytes)
{
    return s->fills && s->fill_bytes + bytes > s->o.mem_bytes / 4;
}

/*
 * Whether every entry owed is written (SC_CACHE_WRITES=all), or may be
 * skipped.  Entries of transformed shards are always written: skipping one
 * would run the transform (a decode-once) again, not only the read.
 */
static int fill_every(const sc__stream *s)
{
    return s->o.fill_all || s->ds->tf;
}

/* The first fill not yet being written, or NULL (mutex held). */
static sc__fill *fill_next(sc__stream *s)
{
    sc__fill *f = s->fills;
    while (f && f->writing)
        f = f->next;
    return f;
}

/* f written (or withdrawn): out of the list, its hold on the shard let go (mutex held). */
static void fill_done(sc__stream *s, sc__fill *f)
{
    sc__fill **p = &s->fills;
    while (*p != f)
        p = &(*p)->next;
    *p = f->next;
    s->fill_bytes -= f->bytes;
    if (f->e)
        sc__stream_unref(s, f->e, f->i);
    else
        sc__stream_drop_buf(s, f->buf, f->cap, f->bytes);
    free(f);
    pthread_cond_broadcast(&s->work);
}

/* Writes f, with the mutex dropped meanwhile (held on entry and return). */
static void fill_write(sc__stream *s, sc__fill *f, sc__tring *tr)
{
    f->writing = 1;
    sc__tctx tc = {tr, f->epoch};
    pthread_mutex_unlock(&s->mu);
    if (sc__fault("cache-writer-slow")) /* test hook: a cache slower to write than to read */
        usleep(20 * 1000);
    sc__cache_keep(s->cache, f->shard, f->fp, &tc);
    pthread_mutex_lock(&s->mu);
    fill_done(s, f);
    sc__stream_bury(s);
}

static void *fill_writer(void *arg)
{
    sc__stream *s = arg;
    sc__tring *tr = sc__trace_ring(s->o.trace, "cache writer");
    (void)sc__yield_to_caller(); /* as the producers: never preempts the training thread */
    pthread_mutex_lock(&s->mu);
    for (sc__fill *f; !s->stop;)
        if ((f = fill_next(s)))
            fill_write(s, f, tr);
        else
            pthread_cond_wait(&s->fill_cv, &s->mu);
    /* Stopping: what is still owed is withdrawn, waking any reader waiting for it. */
    for (sc__fill *f; (f = fill_next(s));) {
        sc__cache_unreserve(s->cache, f->shard);
        fill_done(s, f);
    }
    sc__stream_bury(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sc__fill_help(sc__stream *s, sc__tring *tr)
{
    SC__ASSERT(sc__stream_held(s));
    sc__fill *f = fill_every(s) && !s->stop && fill_behind(s, 0) ? fill_next(s) : NULL;
    if (f)
        fill_write(s, f, tr);
    return f != NULL;
}

int sc__fill_start(sc__stream *s, sc_error *err)
{
    if (!s->cache)
        return SC_OK;
    if (pthread_create(&s->writer, NULL, fill_writer, s) != 0)
        return sc__seterr(err, SC_ENOMEM, "rank %d: cannot start the cache writer thread",
                          s->o.rank);
    s->has_writer = 1;
    return SC_OK;
}

int sc__fill_room(const sc__stream *s, uint64_t bytes)
{
    if (!s->has_writer || s->stop || s->closing)
        return -1;
    return fill_every(s) || !fill_behind(s, bytes);
}

int sc__fill_owe(sc__stream *s, ep *e, uint64_t i)
{
    SC__ASSERT(sc__stream_held(s));
    uint64_t bytes = sc__shard_bytes(s->ds, e->shards[i]);
    if (!s->has_writer || s->stop || s->closing)
        return 0;
    sc__fill *f = calloc(1, sizeof *f);
    if (!f)
        return 0;
    *f = (sc__fill){NULL, e, i, e->shards[i], bytes, e->epoch, NULL, 0, {0}, 0};
    for (int k = 0; k < s->nfields; k++)
        f->fp[k] = (void *)e->fp[i * (uint64_t)s->nfields + k];
    sc__fill **p = &s->fills;
    while (*p)
        p = &(*p)->next;
    *p = f;
    s->fill_bytes += bytes;
    e->refs[i]++;
    pthread_cond_signal(&s->fill_cv);
    return 1;
}

void sc__fill_epoch_done(sc__stream *s, ep *e)
{
    SC__ASSERT(sc__stream_held(s));
    for (sc__fill *f = s->fills; f; f = f->next)
        if (f->e == e) {
            f->buf = e->buf[f->i], f->cap = e->cap[f->i];
            e->buf[f->i] = NULL;
            f->e = NULL;
        }
}

void sc__fill_stop(sc__stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = 1; /* nothing more is owed: entries read from here on are not kept */
    while (s->fills && !s->stop)
        pthread_cond_wait(&s->work, &s->mu); /* fill_done broadcasts */
    s->stop = 1;
    int writer = s->has_writer;
    s->has_writer = 0;
    pthread_cond_broadcast(&s->fill_cv);
    pthread_mutex_unlock(&s->mu);
    if (writer)
        pthread_join(s->writer, NULL);
}
