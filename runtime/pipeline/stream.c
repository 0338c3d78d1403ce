/*
 * stream.c - producer threads, batch assembly, the ring.
 *
 * All state is guarded by one mutex, held only to pick and to retire work,
 * never across I/O or copies.  A producer takes, in order of preference:
 * preparing a queued epoch (its work, below), building the next batch in
 * sequence (when its shards are in memory and its ring slot is free), or
 * loading the next shard in order of first use (when it fits the memory
 * bound, or when the oldest unbuilt batch needs it, so that the bound can
 * never stall the pipeline).  Shards are loaded in that order, possibly by
 * several threads at once, and freed when the last batch that copies from
 * them is built.
 *
 * An epoch's slots come from its schedule (core/schedule: a pure function
 * of the plan and the settings, computed by the loader, which orders its
 * shards by first use and tells the cache the same order); here they
 * become work: the shards to load in that order, and per slot where to
 * copy from.  Padding repeats the last samples backwards, which are the
 * ones still in memory when the padding is built.  Assembling a batch into its slot is
 * batch.c's (stream_impl.h holds what the two share).
 */
#include "stream_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "config.h"
#include "error.h"
#include "hash.h"
#include "invariant.h"
#include "io.h"
#include "log.h"
#include "image.h"
#include "quality.h"
#include "source.h"
#include "vlen.h"
#include "yield.h"

/* ---- an epoch's work, from its schedule ---------------------------------------- */

static void stream_ep_free_work(ep *e)
{
    free(e->shards);
    free(e->start);
    free(e->state);
    free(e->refs);
    free(e->cap);
    free(e->fp);
    if (e->buf)
        for (uint64_t i = 0; i < e->nsh; i++)
            free(e->buf[i]);
    if (e->map)
        for (uint64_t i = 0; i < e->nsh; i++)
            sc__cache_unmap(&e->map[i]);
    free(e->buf);
    free(e->map);
    free(e->src_shard);
    free(e->src_off);
    free(e->need);
    e->shards = NULL, e->start = NULL, e->state = NULL, e->refs = NULL, e->cap = NULL;
    e->fp = NULL, e->map = NULL;
    e->buf = NULL, e->src_shard = NULL, e->src_off = NULL;
    e->need = NULL;
}

static void stream_ep_free(ep *e)
{
    if (!e)
        return;
    stream_ep_free_work(e);
    sc__sched_free(&e->sched);
    free(e);
}

/*
 * The distinct shards each full batch of real samples draws from, summed
 * (the epoch summary's shards_per_batch, counted as sc_plan_quality
 * counts them).
 */
static int stream_count_spread(ep *e, uint64_t B, sc_error *err)
{
    unsigned char *seen = calloc(e->nsh + 1, 1);
    if (!seen)
        return sc__seterr(err, SC_ENOMEM, "epoch %llu: no memory to count shards per batch",
                          (unsigned long long)e->epoch);
    for (uint64_t b = 0; (b + 1) * B <= e->m; b++, e->counts.full_batches++)
        e->counts.batch_shards += sc__quality_distinct(e->src_shard + b * B, B, seen);
    free(seen);
    return SC_OK;
}

/*
 * Turns an epoch's schedule into its work: the shards it reads, in order
 * of first use (the order they are loaded in, which the loader ordered for
 * the cache: sc__sched_order), and per slot the shard and offset to copy
 * from.
 */
static int stream_prepare(const sc__stream *s, ep *e, sc_error *err)
{
    const sc_dataset *ds = s->ds;
    uint64_t B = s->o.batch_size;
    sc__sched *sc = &e->sched;
    e->want = sc->nslots;
    e->m = sc->nreal;
    e->shards = sc->shards, e->src_shard = sc->slot_shard, e->nsh = sc->nshards;
    sc->shards = sc->slot_shard = NULL; /* the epoch's now */
    e->src_off = malloc(sizeof *e->src_off * (e->want + 1));
    e->need = calloc(e->nb + 1, sizeof *e->need);
    if (!e->src_off || !e->need)
        return sc__seterr(err, SC_ENOMEM, "rank %d: epoch %llu: no memory for the schedule",
                          s->o.rank, (unsigned long long)e->epoch);
    for (uint64_t q = 0; q < e->want; q++) {
        uint32_t i = e->src_shard[q];
        e->src_off[q] = (uint32_t)(sc->ids[q] - ds->shard_first[e->shards[i]]);
        if (i > e->need[q / B])
            e->need[q / B] = i;
    }
    e->start = malloc(sizeof *e->start * (e->nsh + 1));
    e->state = calloc(e->nsh + 1, 1);
    e->refs = calloc(e->nsh + 1, sizeof *e->refs);
    e->buf = calloc(e->nsh + 1, sizeof *e->buf);
    e->cap = calloc(e->nsh + 1, sizeof *e->cap);
    e->map = calloc(e->nsh + 1, sizeof *e->map);
    e->fp = calloc((e->nsh + 1) * (uint64_t)s->nfields, sizeof *e->fp);
    if (!e->start || !e->state || !e->refs || !e->buf || !e->cap || !e->map || !e->fp)
        return sc__seterr(err, SC_ENOMEM, "rank %d: epoch %llu: no memory for the schedule",
                          s->o.rank, (unsigned long long)e->epoch);
    e->start[0] = 0;
    for (uint64_t i = 0; i < e->nsh; i++)
        e->start[i + 1] = e->start[i] + ds->shard_sizes[e->shards[i]];
    for (uint64_t q = 0; q < e->want; q++)
        e->refs[e->src_shard[q]]++;
    for (uint64_t i = 0; i < e->nsh; i++)
        e->state[i] = SH_WAIT;
    return stream_count_spread(e, B, err);
}

/* ---- picking work (mutex held) ------------------------------------------------ */

/* Debug builds make the mutex error-checking: its owner locking it again
   is refused, which is how SC__ASSERT(sc__stream_held(s)) knows it holds it. */
static void stream_mutex_init(sc__stream *s)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
#ifndef NDEBUG
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
#endif
    pthread_mutex_init(&s->mu, &a);
    pthread_mutexattr_destroy(&a);
}

typedef enum { T_NONE, T_PREPARE, T_LOAD, T_BUILD } task_kind;

typedef struct task {
    task_kind kind;
    ep *e;
    uint64_t i; /* shard index (load) or batch (build) */
    rslot *slot;
    unsigned char *buf; /* load: a pooled buffer of cap bytes, or NULL */
    uint64_t cap;
    int fresh;          /* load: read into a fresh buffer, not a pooled one */
    int ring_full;      /* nothing picked: the next batch waits for a free slot */
    int owed;           /* load: the cache is owed the shard's entry (sc__cache_read) */
    int behind;         /* load: a miss is not kept, the cache writer behind */
} task;

static uint64_t stream_shard_bytes(const sc__stream *s, const ep *e, uint64_t i)
{
    return sc__shard_bytes(s->ds, e->shards[i]);
}

/*
 * The buffer shard i is read into: its bytes, a page ahead of each field
 * (sc__read_skews) and one byte.  Shards within an eighth of the largest
 * get the largest's, so that one pooled buffer serves each of them (a cut
 * file's pieces differ by a sample); the pages a shorter shard leaves are
 * never touched, so never resident.
 */
static uint64_t stream_buf_exact(const sc__stream *s, uint64_t shard)
{
    return sc__shard_bytes(s->ds, shard) + sc__stream_buf_pad(s);
}

/* A shard whose buffer would be within an eighth of the largest's gets the largest's. */
static int stream_buf_rounds_up(const sc__stream *s, uint64_t need)
{
    return need >= s->buf_top - s->buf_top / 8;
}

static uint64_t stream_buf_need(const sc__stream *s, const ep *e, uint64_t i)
{
    uint64_t need = stream_buf_exact(s, e->shards[i]);
    return stream_buf_rounds_up(s, need) ? s->buf_top : need;
}

/*
 * The largest shard's buffer; 1 where every shard gets it (stream_buf_need)
 * but perhaps the dataset's last, the remainder of a cut into equal sizes.
 */
static int stream_buf_top(sc__stream *s)
{
    uint64_t least = UINT64_MAX;
    for (uint64_t k = 0; k < s->ds->nshards; k++) {
        uint64_t need = stream_buf_exact(s, k);
        s->buf_top = need > s->buf_top ? need : s->buf_top;
        least = need < least && k + 1 < s->ds->nshards ? need : least;
    }
    return least == UINT64_MAX || stream_buf_rounds_up(s, least);
}

/*
 * The pool filled at open with buffers faulted in, as many as the bound
 * holds and the rank may hold at once (o->fill_most): the first epoch's
 * direct reads into fresh pages took 0.5-0.7 s a 26 MB shard where later
 * epochs' took 0.1-0.2 (12 ranks on 2 cores), and its batches waited for
 * them.  Only where every shard gets the largest's buffer (`uniform`): a
 * smaller shard in one counts its bytes, not the buffer's, so the loads it
 * let go on would allocate beyond the bound.  And only buffers of
 * SC__FILL_LEAST or more: the faults of smaller ones cost little, and many
 * would only lengthen the pool's scans.  Stops where memory runs short.
 */
#define SC__FILL_LEAST (UINT64_C(1) << 20)

static void stream_pool_fill(sc__stream *s, int uniform)
{
    if (!uniform || s->buf_top < SC__FILL_LEAST)
        return;
    pthread_mutex_lock(&s->mu);
    for (uint64_t k = 0; k < s->o.fill_most && sc__stream_pool_fits(s, s->buf_top); k++) {
        pthread_mutex_unlock(&s->mu);
        void *b = sc__big_alloc(s->buf_top);
        if (b && sc__big_prefault(b, s->buf_top) != 0)
            free(b), b = NULL;
        pthread_mutex_lock(&s->mu);
        if (!b || sc__stream_pool_put(s, b, s->buf_top)) {
            free(b);
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void stream_advance_prefix(ep *e)
{
    while (e->loaded_prefix < e->nsh && e->state[e->loaded_prefix] >= SH_LOADED)
        e->loaded_prefix++;
}

/* Every queued epoch's held_peak, after the stream took more memory (mutex held). */
static void stream_note_held(sc__stream *s)
{
    /* a pooled buffer counted as the bound counts it, less its pad (sc__stream_pool_put) */
    uint64_t held = s->resident + s->pool.bytes - sc__stream_buf_pad(s) * s->pool.n;
    for (ep *e = s->head; e; e = e->next)
        if (held > e->counts.held_peak)
            e->counts.held_peak = held;
}

/* Whether a batch is being built: it frees shards when done (mutex held). */
static int stream_building(const sc__stream *s)
{
    for (uint64_t i = 0; i < s->o.depth; i++)
        if (s->ring[i].state == SL_BUILDING)
            return 1;
    return 0;
}

/*
 * The queued epochs' next work: 1 with a preparation picked into t; else
 * 0, with the first epoch that has a batch to build and the first that
 * has a shard to load (either may be NULL).  Mutex held.
 */
static int stream_scan(sc__stream *s, task *t, ep **build, ep **load)
{
    *build = *load = NULL;
    for (ep *e = s->head; e; e = e->next) {
        if (e->prep == PREP_NO) {
            e->prep = PREP_BUSY;
            *t = (task){T_PREPARE, e, 0, NULL, NULL, 0, 0, 0, 0, 0};
            return 1;
        }
        if (e->prep != PREP_DONE)
            break; /* later epochs wait for this one's schedule */
        while (e->next_load < e->nsh && e->state[e->next_load] != SH_WAIT)
            e->next_load++;
        if (!*build && e->next_build < e->nb && e->seq0 + e->next_build < s->fail_seq)
            *build = e; /* none at or after a failed build */
        if (!*load && e->next_load < e->nsh)
            *load = e;
        if (*build && *load)
            break;
    }
    return 0;
}

/* Batch build->next_build into a free slot, if its shards are in: 1 when picked. */
static int stream_pick_build(sc__stream *s, ep *build, task *t)
{
    uint64_t b = build->next_build;
    rslot *slot = sc__stream_slot_with(s, SL_FREE, 0);
    /* Its shards are in, no slot is free: the ring is full (traced as such). */
    t->ring_full = build->loaded_prefix > build->need[b] && !slot;
    t->e = build;
    t->i = b;
    if (build->loaded_prefix <= build->need[b] || !slot)
        return 0;
    if (b == 0) /* what the epoch's first batch waited for */
        build->counts.first_bytes =
            build->counts.bytes_from_source + build->counts.bytes_from_cache;
    build->next_build++;
    slot->state = SL_BUILDING;
    slot->seq = build->seq0 + b; /* batches are picked in seq order */
    *t = (task){T_BUILD, build, b, slot, NULL, 0, 0, 0, 0, 0};
    return 1;
}

/* Shard load->next_load, if the bound lets it load now: 1 when picked. */
static int stream_pick_load(sc__stream *s, ep *load, const ep *build, task *t)
{
    /*
     * Until an epoch's first batch is built, the loads past its shards are
     * one beside each other producer at most: its first batch waits for its
     * own window, not for a read-ahead that the other producers ran up
     * while one read a shard it needs (seen once the cache writes left the
     * loads, which made some loads much shorter than others).
     */
    if (load == build && build->next_build == 0 &&
        load->next_load >= build->need[0] + (uint64_t)s->o.producers)
        return 0;
    uint64_t i = load->next_load, bytes = stream_shard_bytes(s, load, i);
    int must = load == build && i <= build->need[build->next_build];
    /*
     * A shard the next batch needs that the bound cannot hold waits for
     * the builds in flight, the frees under way and the cache entries
     * being written, which make room; with none, it loads over the
     * bound (a batch whose shards alone exceed it: the open warned).
     */
    int fits = s->resident == 0 || s->resident + bytes <= s->o.mem_bytes;
    if (!fits && !(must && !stream_building(s) && !s->gone_bytes && !s->fills))
        return 0;
    load->state[i] = SH_LOADING;
    load->next_load++;
    s->resident += bytes;
    int owe = sc__fill_room(s, bytes); /* before the read: nothing evicted for it */
    *t = (task){T_LOAD, load, i, NULL, NULL, 0, 0, 0, owe > 0, owe == 0};
    t->buf = sc__pool_take(&s->pool, stream_buf_need(s, load, i), &t->cap);
    uint64_t cap;
    void *shed;
    /*
     * A fresh buffer: the pool gives back what the bound lacks, out
     * of the count at once (its caller buries it before allocating).
     */
    while (!t->buf && (shed = sc__pool_shed(&s->pool, sc__stream_pool_limit(s, s->pool.n), &cap)))
        sc__stream_let_go(s, NULL, shed, 0);
    stream_note_held(s);
    return 1;
}

static int stream_pick(sc__stream *s, task *t)
{
    SC__ASSERT(sc__stream_held(s));
    ep *build, *load;
    t->ring_full = 0;
    if (s->closing)
        return 0; /* a close waits for the cache writer: nothing new is read meanwhile */
    if (stream_scan(s, t, &build, &load))
        return 1;
    if (build && stream_pick_build(s, build, t))
        return 1;
    return load && stream_pick_load(s, load, build, t);
}

static void stream_fail(sc__stream *s, const sc_error *err)
{
    if (!s->failed) {
        s->failed = 1;
        s->err = *err;
    }
    s->stop = 1;
    pthread_cond_broadcast(&s->ready);
    pthread_cond_broadcast(&s->work);
}

/*
 * A build failed (mutex held): the error waits for its batch's turn
 * (sc__stream_next), the batches before it are still built; the earliest
 * failed batch's error is the one kept.
 */
static void stream_defer(sc__stream *s, const task *t, uint64_t bad_id, const sc_error *err)
{
    if (t->slot->seq < s->fail_seq) {
        s->fail_seq = t->slot->seq;
        s->fail_id = bad_id;
        s->fail_err = *err;
    }
    t->slot->state = SL_FREE;
    pthread_cond_broadcast(&s->ready);
    pthread_cond_broadcast(&s->work);
}

/* ---- doing it (mutex not held) ------------------------------------------------ */

static int stream_load(sc__stream *s, task *t, sc__tring *tr, int *hit, sc_error *err)
{
    ep *e = t->e;
    uint64_t i = t->i;
    const unsigned char **fp = e->fp + i * (uint64_t)s->nfields;
    sc__mapping *m = &e->map[i];
    sc__tctx tc = {tr, e->epoch};
    int owed = t->owed; /* may the cache writer take a miss: the answer, once read */
    t->owed = 0;
    /* A hit is mapped only where the pool had no buffer (docs/architecture.md). */
    int rc = t->buf ? SC_OK : sc__cache_map(s->cache, e->shards[i], m, &tc, err);
    if (rc == SC_OK && m->base) {
        *hit = m->origin;
        for (int f = 0; f < s->nfields; f++)
            fp[f] = m->field[f];
        return SC_OK; /* published to builders under the mutex, by finish() */
    }
    /*
     * Each field placed as its bytes lie in the source file (modulo a
     * page: sc__read_skews), so that a direct read lands in place.
     */
    uint64_t skew[SC_MAX_FIELDS];
    sc__read_skews(s->ds, e->shards[i], skew);
    uint64_t need = stream_buf_need(s, e, i);
    t->fresh = !t->buf;
    unsigned char *buf = t->buf ? t->buf : sc__big_alloc(t->cap = need); /* pooled: >= need */
    t->buf = NULL; /* the shard's now, or freed below */
    if (!buf)
        return sc__seterr(err, SC_ENOMEM, "rank %d: epoch %llu: no memory for shard %u",
                          s->o.rank, (unsigned long long)e->epoch, e->shards[i]);
    void *bufs[SC_MAX_FIELDS];
    uint64_t at = 0;
    for (int f = 0; f < s->nfields; at += sc__field_bytes(s->ds, f, e->shards[i]), f++) {
        at += (skew[f] + SC__IO_ALIGN - at % SC__IO_ALIGN) % SC__IO_ALIGN; /* < a page more */
        bufs[f] = buf + at;
    }
    SC__ASSERT(at < t->cap); /* need: a page at most ahead of each field, and one byte */
    if (rc == SC_OK)
        rc = sc__cache_read(s->cache, e->shards[i], bufs, hit, &owed, &tc, err);
    if (rc != SC_OK) {
        free(buf);
        return sc__errctx(err, rc, "rank %d: epoch %llu: shard %u", s->o.rank,
                          (unsigned long long)e->epoch, e->shards[i]);
    }
    e->buf[i] = buf;
    e->cap[i] = t->cap;
    t->owed = owed;
    for (int f = 0; f < s->nfields; f++)
        fp[f] = bufs[f];
    return SC_OK;
}

/* Retires a task's work (mutex held). */
static void stream_finish(sc__stream *s, const task *t, int hit)
{
    SC__ASSERT(sc__stream_held(s));
    ep *e = t->e;
    if (t->kind == T_PREPARE) {
        e->prep = PREP_DONE;
    } else if (t->kind == T_LOAD) {
        e->state[t->i] = SH_LOADED;
        stream_advance_prefix(e);
        uint64_t bytes = stream_shard_bytes(s, e, t->i);
        if (hit == SC__FROM_PEER) /* a hit, whose bytes came from another node */
            e->counts.hits++, e->counts.bytes_from_peers += bytes;
        else if (hit)
            e->counts.hits++, e->counts.bytes_from_cache += bytes;
        else
            e->counts.misses++, e->counts.bytes_from_source += bytes;
        e->counts.writes_skipped += hit == SC__FROM_SOURCE && t->behind;
        e->counts.fresh_bufs += t->fresh;
        /* Its entry is written off this path (or, the writer stopping, not kept). */
        if (t->owed && !sc__fill_owe(s, e, t->i))
            sc__cache_unreserve(s->cache, e->shards[t->i]);
    } else {
        uint64_t B = s->o.batch_size;
        sc__stream_retire(s, e, t->i * B + t->slot->retired, (t->i + 1) * B);
        t->slot->state = SL_READY;
        pthread_cond_broadcast(&s->ready);
    }
    pthread_cond_broadcast(&s->work);
}

static void *stream_producer(void *arg)
{
    sc__stream *s = arg;
    sc_error err = SC_ERROR_INIT;
    int rc = sc__dev_bind(s->o.dev, &err), why = sc__yield_to_caller();
    pthread_mutex_lock(&s->mu);
    char name[32];
    int me = ++s->named;
    snprintf(name, sizeof name, "producer %d", me);
    pthread_mutex_unlock(&s->mu);
    if (why && me == 1) /* a sandbox's policy: the copies still run, now and then first */
        sc__log(s->o.log_level, SC__LOG_INFO, s->o.rank, "producers keep the default "
                "scheduling policy (SCHED_BATCH refused: %s): a woken producer may preempt "
                "the training thread", strerror(why));
    sc__tring *tr = sc__trace_ring(s->o.trace, name);
    sc__image *jp = NULL; /* this producer's decoder, made at its first image */
    pthread_mutex_lock(&s->mu);
    if (rc != SC_OK)
        stream_fail(s, &err);
    while (!s->stop) {
        task t;
        if (sc__fill_help(s, tr))
            continue; /* the cache writer is behind: its oldest entry first */
        if (!stream_pick(s, &t)) {
            /* The epoch may be retired while we wait: keep its number, not it. */
            uint64_t t0 = t.ring_full ? sc__tring_now(tr) : 0;
            uint64_t epoch = t.ring_full ? t.e->epoch : 0;
            pthread_cond_wait(&s->work, &s->mu);
            if (t.ring_full)
                sc__tring_span(tr, SC__ST_RING_WAIT, t0, sc__tring_now(tr), epoch, -1,
                               (int64_t)t.i, 0);
            continue;
        }
        sc__stream_bury(s); /* what was let go meanwhile */
        pthread_mutex_unlock(&s->mu);
        int hit = 0;
        uint64_t bad_id = UINT64_MAX;
        if (t.kind == T_PREPARE)
            rc = stream_prepare(s, t.e, &err);
        else if (t.kind == T_LOAD)
            rc = stream_load(s, &t, tr, &hit, &err);
        else
            rc = sc__batch_build(s, t.e, t.i, t.slot, tr, &jp, &bad_id, &err);
        pthread_mutex_lock(&s->mu);
        SC__ASSERT(!t.buf); /* a load keeps its pooled buffer, or frees it on failure */
        if (rc != SC_OK && t.kind == T_BUILD)
            stream_defer(s, &t, bad_id, &err);
        else if (rc != SC_OK)
            stream_fail(s, &err);
        else
            stream_finish(s, &t, hit);
        sc__stream_bury(s);
    }
    pthread_mutex_unlock(&s->mu);
    sc__image_free(jp);
    return NULL;
}

/* ---- the caller's side -------------------------------------------------------- */

int sc__stream_open(sc_dataset *ds, sc_cache *cache, const sc__stream_opts *o,
                    sc__stream **out, sc_error *err)
{
    *out = NULL;
    if (o->producers < 1 || o->depth < 1 || o->batch_size < 1)
        return sc__seterr(err, SC_EINVAL,
                          "stream: %d producers, %llu ring slots and batches of %llu: "
                          "each must be at least 1",
                          o->producers, (unsigned long long)o->depth,
                          (unsigned long long)o->batch_size);
    sc__stream *s = calloc(1, sizeof *s);
    if (!s)
        return sc__seterr(err, SC_ENOMEM, "no memory for the stream");
    s->ds = ds;
    s->cache = cache;
    s->o = *o;
    s->nfields = ds->nfields;
    int uniform = stream_buf_top(s);
    s->fail_seq = s->fail_id = s->failed_id = UINT64_MAX;
    stream_mutex_init(s);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->ready, NULL);
    pthread_cond_init(&s->fill_cv, NULL);
    int rc = sc__batch_layout(s, o->batch_size, err);
    if (rc == SC_OK) {
        s->o.depth = sc__config_depth(o->depth, s->slot_bytes, o->least); /* auto: by bytes */
        /* past the cache, but not for a user's augmentation, which reads the batch next */
        uint64_t ring;
        s->copy = o->tf && o->tf->augment ? memcpy
                  : __builtin_mul_overflow(s->o.depth, s->slot_bytes, &ring) ? sc__copy_nt
                                                                             : sc__copy_for(ring);
        s->ring = calloc(s->o.depth, sizeof *s->ring);
        s->threads = calloc((size_t)o->producers, sizeof *s->threads);
        if (!s->ring || !s->threads)
            rc = sc__seterr(err, SC_ENOMEM, "no memory for the batch ring");
    }
    for (uint64_t i = 0; rc == SC_OK && i < s->o.depth; i++) {
        rslot *r = &s->ring[i];
        rc = sc__dev_host_alloc(o->dev, s->slot_bytes, (void **)&r->host, err);
        r->ids = malloc(sizeof *r->ids * o->batch_size);
        r->replaced = calloc(o->batch_size, 1);
        r->stands_for = calloc(o->batch_size, sizeof *r->stands_for);
        for (int f = 0; rc == SC_OK && f < s->nfields; f++)
            r->offs[f] = s->vlen[f] ? (const uint64_t *)(r->host + s->foff[f]) : NULL;
        if (rc == SC_OK && (!r->ids || !r->replaced || !r->stands_for))
            rc = sc__seterr(err, SC_ENOMEM, "no memory for a batch's ids");
        if (rc == SC_OK && o->device >= 0)
            rc = sc__dev_alloc(o->dev, s->slot_bytes, (void **)&r->dev, err);
        if (rc == SC_OK)
            rc = sc__dev_event(o->dev, &r->event, err);
        if (rc == SC_OK)
            rc = sc__dev_event(o->dev, &r->consumed, err);
        if (rc != SC_OK)
            sc__errctx(err, rc, "rank %d: %llu ring slots of %llu bytes", o->rank,
                       (unsigned long long)s->o.depth, (unsigned long long)s->slot_bytes);
    }
    if (rc == SC_OK) /* after the ring, which must be had: the pool is a speed-up */
        stream_pool_fill(s, uniform);
    if (rc == SC_OK)
        rc = sc__fill_start(s, err);
    for (int i = 0; rc == SC_OK && i < o->producers; i++) {
        if (pthread_create(&s->threads[i], NULL, stream_producer, s) != 0)
            rc = sc__seterr(err, SC_ENOMEM, "rank %d: cannot start producer thread %d",
                            o->rank, i);
        else
            s->nthreads++;
    }
    if (rc != SC_OK) {
        sc__stream_close(s);
        return rc;
    }
    *out = s;
    return SC_OK;
}

int sc__stream_copies_past_cache(const sc__stream *s)
{
    return s->copy == sc__copy_nt;
}

uint64_t sc__stream_ring(const sc__stream *s, uint64_t *slot_bytes)
{
    *slot_bytes = s->slot_bytes;
    return s->o.depth;
}

/* Queues an epoch behind the others: its batches follow theirs. */
static void stream_enqueue(sc__stream *s, ep *e)
{
    pthread_mutex_lock(&s->mu);
    e->seq0 = s->next_seq;
    s->next_seq += e->nb;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
}

int sc__stream_push(sc__stream *s, uint64_t epoch, sc__sched *sched, sc_error *err)
{
    uint64_t B = s->o.batch_size;
    if (!sched->slot_shard)
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu: a schedule not ordered "
                          "(sc__sched_order)", s->o.rank, (unsigned long long)epoch);
    /* Every slot may be padding: a short rank resumed after its last real batch. */
    if (sched->nslots % B || sched->nreal > sched->nslots)
        return sc__seterr(err, SC_EINVAL,
                          "rank %d: epoch %llu: a schedule of %llu slots (%llu real) is not "
                          "whole batches of %llu",
                          s->o.rank, (unsigned long long)epoch,
                          (unsigned long long)sched->nslots, (unsigned long long)sched->nreal,
                          (unsigned long long)B);
    ep *e = calloc(1, sizeof *e);
    if (!e)
        return sc__seterr(err, SC_ENOMEM, "no memory for an epoch");
    e->epoch = epoch;
    e->nb = sched->nslots / B;
    e->sched = *sched;
    memset(sched, 0, sizeof *sched);
    stream_enqueue(s, e);
    return SC_OK;
}

/* One wait for a built batch (mutex held); with an idle hook, 1 ms at a time. */
static void stream_wait_ready(sc__stream *s)
{
    SC__ASSERT(sc__stream_held(s));
    if (!s->o.idle) {
        pthread_cond_wait(&s->ready, &s->mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    if (pthread_cond_timedwait(&s->ready, &s->mu, &ts) == 0)
        return;
    pthread_mutex_unlock(&s->mu);
    s->o.idle(s->o.idle_arg);
    pthread_mutex_lock(&s->mu);
}

int sc__stream_next(sc__stream *s, sc_batch *b, double *waited, sc_error *err)
{
    int rc = SC_OK;
    *waited = 0.0;
    pthread_mutex_lock(&s->mu);
    if (!s->failed && s->held >= s->o.depth) {
        pthread_mutex_unlock(&s->mu);
        return sc__seterr(err, SC_EINVAL,
                          "rank %d: all %llu batch buffers (SC_PREFETCH_BATCHES) are held; "
                          "release a batch before asking for the next",
                          s->o.rank, (unsigned long long)s->o.depth);
    }
    rslot *slot = sc__stream_slot_with(s, SL_READY, s->take);
    if (!slot && !s->failed && s->take < s->fail_seq) {
        double t0 = sc__clock_s();
        while (!s->failed && s->take < s->fail_seq &&
               !(slot = sc__stream_slot_with(s, SL_READY, s->take)))
            stream_wait_ready(s);
        *waited = sc__clock_s() - t0;
    }
    if (!s->failed && s->take >= s->fail_seq) { /* the failed batch is due: the stream stops */
        stream_fail(s, &s->fail_err);
        s->failed_id = s->fail_id;
    }
    if (s->failed) {
        if (err)
            *err = s->err;
        rc = s->err.code;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    memset(b, 0, sizeof *b);
    b->epoch = slot->epoch;
    b->index = slot->index;
    b->size = s->o.batch_size;
    b->padded = slot->padded;
    b->ids = slot->ids;
    b->nfields = s->nfields;
    for (int f = 0; f < s->nfields; f++) {
        b->data[f] = (s->o.device >= 0 ? slot->dev : slot->host) + s->fval[f];
        b->bytes[f] = s->vlen[f] ? slot->offs[f][s->o.batch_size] : s->o.batch_size * s->fsb[f];
    }
    b->offsets = slot->offs;
    b->nreplaced = slot->nreplaced;
    b->replaced = slot->replaced;
    b->stands_for = slot->stands_for;
    b->device = s->o.device;
    b->ready = slot->event;
    b->seq = slot->seq;
    slot->state = SL_HELD;
    s->held++;
    s->take++;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t sc__stream_ready(sc__stream *s)
{
    uint64_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (uint64_t i = 0; i < s->o.depth; i++)
        n += s->ring[i].state == SL_READY;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sc__stream_status(sc__stream *s)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->failed ? s->err.code : SC_OK;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t sc__stream_failed_sample(sc__stream *s)
{
    if (!s)
        return UINT64_MAX;
    pthread_mutex_lock(&s->mu);
    uint64_t id = s->failed ? s->failed_id : UINT64_MAX;
    pthread_mutex_unlock(&s->mu);
    return id;
}

int sc__stream_release(sc__stream *s, const sc_batch *b, void *stream, sc_error *err)
{
    pthread_mutex_lock(&s->mu);
    rslot *slot = sc__stream_slot_with(s, SL_HELD, b->seq);
    if (!slot) {
        pthread_mutex_unlock(&s->mu);
        return sc__seterr(err, SC_EINVAL,
                          "rank %d: batch %llu of epoch %llu released twice, or not handed "
                          "out by this loader",
                          s->o.rank, (unsigned long long)b->index,
                          (unsigned long long)b->epoch);
    }
    /* Recorded before the slot is free, so its next copy finds it. */
    int rc = s->o.device >= 0 ? sc__dev_release(s->o.dev, slot->dev, s->slot_bytes,
                                                slot->consumed, stream, err)
                              : SC_OK;
    if (rc != SC_OK) {
        pthread_mutex_unlock(&s->mu);
        return sc__errctx(err, rc, "rank %d: epoch %llu: release of batch %llu (the releasing "
                          "thread needs the loader's device current; the batch stays held)",
                          s->o.rank, (unsigned long long)b->epoch,
                          (unsigned long long)b->index);
    }
    slot->state = SL_FREE;
    s->held--;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    return SC_OK;
}

int sc__stream_finish_epoch(sc__stream *s, uint64_t epoch, const uint64_t **dropped,
                            uint64_t *ndropped, sc__stream_counts *counts,
                            sc_error *err)
{
    pthread_mutex_lock(&s->mu);
    ep *e = s->head;
    /* An epoch without batches may end before a producer has prepared it. */
    while (e && e->epoch == epoch && e->nb == 0 && e->prep != PREP_DONE && !s->failed)
        pthread_cond_wait(&s->work, &s->mu);
    if (s->failed) {
        if (err)
            *err = s->err;
        pthread_mutex_unlock(&s->mu);
        return s->err.code;
    }
    int ok = e && e->epoch == epoch && e->prep == PREP_DONE && s->take >= e->seq0 + e->nb &&
             e->next_build == e->nb;
    if (!ok) {
        pthread_mutex_unlock(&s->mu);
        return sc__seterr(err, SC_EINVAL,
                          "rank %d: epoch %llu finished before its batches were taken",
                          s->o.rank, (unsigned long long)epoch);
    }
    /* Every batch was taken, so every build and load of e has retired. */
    s->head = e->next;
    if (!s->head)
        s->tail = NULL;
    stream_ep_free(s->retired);
    s->retired = e;
    sc__fill_epoch_done(s, e); /* entries still owed keep their buffers */
    pthread_mutex_unlock(&s->mu);
    stream_ep_free_work(e);
    *dropped = e->sched.dropped;
    *ndropped = e->sched.ndropped;
    *counts = e->counts;
    return SC_OK;
}

int sc__stream_last_counts(sc__stream *s, sc__stream_counts *out)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->retired ? SC_OK : SC_EINVAL;
    if (s->retired)
        *out = s->retired->counts;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void sc__stream_close(sc__stream *s)
{
    if (!s)
        return;
    sc__fill_stop(s); /* first: what the cache is owed is written, producers running */
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->work);
    pthread_cond_broadcast(&s->ready);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    for (ep *e = s->head, *n; e; e = n) {
        n = e->next;
        stream_ep_free(e);
    }
    stream_ep_free(s->retired);
    for (uint64_t i = 0; s->ring && i < s->o.depth; i++) {
        rslot *r = &s->ring[i];
        sc__dev_event_wait(s->o.dev, r->event, NULL);
        sc__dev_event_wait(s->o.dev, r->consumed, NULL);
        sc__dev_event_free(s->o.dev, r->event);
        sc__dev_event_free(s->o.dev, r->consumed);
        sc__dev_free(s->o.dev, r->dev, s->slot_bytes);
        sc__dev_host_free(s->o.dev, r->host);
        free(r->ids);
        free(r->replaced);
        free(r->stands_for);
    }
    pthread_mutex_lock(&s->mu);
    sc__stream_bury(s); /* empty: each thread buries what it let go, but to be sure */
    pthread_mutex_unlock(&s->mu);
    free(s->gone);
    sc__pool_free(&s->pool);
    free(s->ring);
    free(s->threads);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->ready);
    pthread_cond_destroy(&s->fill_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
