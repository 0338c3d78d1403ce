/*
 * trace.c - per-thread event rings, the job-wide clock, and the rank's
 * Chrome Trace Event file.
 *
 * A ring is single-producer/single-consumer: the recording thread alone
 * advances `head` (release), the draining thread alone advances `tail`
 * (release); each reads the other's index with acquire, so a slot is never
 * read before it is written nor overwritten before it is read.  The file
 * is JSON with one event per line; the loader's thread drains the rings,
 * in no particular order across threads (viewers sort by timestamp).
 */
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fault.h"

static const char *const stage_names[] = {
#define SC__STAGE_NAME(id, name) name,
    SC_TRACE_STAGE_LIST(SC__STAGE_NAME)
#undef SC__STAGE_NAME
};

const char *sc__stage_name(sc__stage st)
{
    return st < SC__ST_COUNT ? stage_names[st] : "?";
}

enum { EV_SPAN, EV_COUNTER, EV_EPOCH_END };

typedef struct event {
    uint64_t t0, t1, epoch, bytes;
    int64_t shard, batch;
    double value;
    uint16_t kind, what; /* EV_*, then a stage or a counter */
} event;

struct sc__tring {
    _Atomic uint64_t head, tail, dropped;
    uint64_t cap;
    int tid, named;
    char name[48];
    struct sc__tring *next;
    event ev[];
};

struct sc__trace {
    int rank, world;
    FILE *f;
    char path[SC_PATH_MAX + 32];
    uint64_t cap;
    int64_t offset_ns; /* add to the local clock: rank 0's clock */
    int64_t error_ns;  /* |offset error| <= this */
    pthread_mutex_t mu; /* the ring list */
    sc__tring *rings;
    int nrings, untraced;
    int io_failed;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sc__trace_now(const sc__tring *r)
{
    return r ? mono_ns() : 0;
}

/*
 * Offset to rank 0 by ping-pong: the sample with the shortest round trip
 * bounds the error best (Cristian's algorithm): rank 0's reading lies
 * within that round trip, so the error is at most half of it.
 */
static void measure_offset(MPI_Comm comm, int rank, int world, int64_t *offset,
                           int64_t *error)
{
    enum { ROUNDS = 8, TAG = 0x7ace };
    *offset = 0;
    *error = 0;
    for (int peer = 1; peer < world; peer++) {
        for (int k = 0; k < ROUNDS; k++) {
            uint64_t t;
            if (rank == 0) {
                MPI_Recv(&t, 1, MPI_UINT64_T, peer, TAG, comm, MPI_STATUS_IGNORE);
                t = mono_ns();
                MPI_Send(&t, 1, MPI_UINT64_T, peer, TAG, comm);
            } else if (rank == peer) {
                uint64_t a = mono_ns();
                MPI_Send(&a, 1, MPI_UINT64_T, 0, TAG, comm);
                MPI_Recv(&t, 1, MPI_UINT64_T, 0, TAG, comm, MPI_STATUS_IGNORE);
                uint64_t b = mono_ns(), rtt = b - a;
                if (k == 0 || (int64_t)rtt / 2 < *error) {
                    *error = (int64_t)rtt / 2;
                    *offset = (int64_t)t - (int64_t)(a + rtt / 2);
                }
            }
        }
    }
}

static int put_line(sc__trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int put_line(sc__trace *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(t->f, fmt, ap);
    va_end(ap);
    if (n < 0)
        t->io_failed = 1;
    return n < 0 ? -1 : 0;
}

int sc__trace_open(MPI_Comm comm, const char *prefix, uint64_t ring_events,
                   sc__trace **out, sc_error *err)
{
    *out = NULL;
    int rank, world, on = prefix && *prefix, all_on = 0, any_on = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, comm);
    MPI_Allreduce(&on, &any_on, 1, MPI_INT, MPI_MAX, comm);
    if (all_on != any_on)
        return sc__seterr(err, SC_EINVAL,
                          "rank %d: SC_TRACE is %s here but not on every rank: set it "
                          "for the whole job",
                          rank, on ? "set" : "unset");
    if (!on)
        return sc__errok(err);

    sc__trace *t = calloc(1, sizeof *t);
    int rc = t ? SC_OK : sc__seterr(err, SC_ENOMEM, "rank %d: no memory for the trace", rank);
    if (t) {
        t->rank = rank;
        t->world = world;
        t->cap = ring_events ? ring_events : 1;
        pthread_mutex_init(&t->mu, NULL);
        snprintf(t->path, sizeof t->path, "%s.rank%d.json", prefix, rank);
        t->f = fopen(t->path, "w");
        if (!t->f)
            rc = sc__seterr(err, SC_EIO, "rank %d: trace file '%s': %s", rank, t->path,
                            strerror(errno));
    }
    /* Every rank takes part in the ping-pong, or none does: agree first. */
    int ok = rc == SC_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok)
        measure_offset(comm, rank, world, &t->offset_ns, &t->error_ns);
    else if (rc == SC_OK)
        rc = sc__seterr(err, SC_EIO, "rank %d: another rank could not open its trace file",
                        rank);
    if (rc != SC_OK) {
        if (t && t->f)
            fclose(t->f);
        if (t)
            pthread_mutex_destroy(&t->mu);
        free(t);
        return rc;
    }
    put_line(t, "{\"traceEvents\":[\n");
    put_line(t,
             "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
             "\"args\":{\"name\":\"rank %d\"}},\n",
             rank, rank);
    put_line(t,
             "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
             "\"args\":{\"sort_index\":%d}}",
             rank, rank);
    *out = t;
    return sc__errok(err);
}

sc__tring *sc__trace_ring(sc__trace *t, const char *thread_name)
{
    if (!t)
        return NULL;
    sc__tring *r = calloc(1, sizeof *r + sizeof(event) * t->cap);
    pthread_mutex_lock(&t->mu);
    if (!r) {
        t->untraced++;
    } else {
        r->cap = t->cap;
        r->tid = ++t->nrings;
        snprintf(r->name, sizeof r->name, "%s", thread_name);
        r->next = t->rings;
        t->rings = r;
    }
    pthread_mutex_unlock(&t->mu);
    return r;
}

static event *slot(sc__tring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tl = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (h - tl >= r->cap) {
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    return &r->ev[h % r->cap];
}

static void publish(sc__tring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

void sc__trace_span(sc__tring *r, sc__stage st, uint64_t t0, uint64_t t1, uint64_t epoch,
                    int64_t shard, int64_t batch, uint64_t bytes)
{
    event *e = r ? slot(r) : NULL;
    if (!e)
        return;
    *e = (event){t0, t1, epoch, bytes, shard, batch, 0.0, EV_SPAN, (uint16_t)st};
    publish(r);
}

void sc__trace_counter(sc__tring *r, sc__counter c, uint64_t t, double value)
{
    event *e = r ? slot(r) : NULL;
    if (!e)
        return;
    *e = (event){t, t, 0, 0, -1, -1, value, EV_COUNTER, (uint16_t)c};
    publish(r);
}

void sc__trace_epoch_end(sc__tring *r, uint64_t t, uint64_t epoch)
{
    event *e = r ? slot(r) : NULL;
    if (!e)
        return;
    *e = (event){t, t, epoch, 0, -1, -1, 0.0, EV_EPOCH_END, 0};
    publish(r);
}

void sc__trace_slow(sc__stage st)
{
#ifdef SC_TESTING
    static const char *const faults[] = {
#define SC__STAGE_FAULT(id, name) "slow:" #id,
        SC_TRACE_STAGE_LIST(SC__STAGE_FAULT)
#undef SC__STAGE_FAULT
    };
    char want[64];
    /* The hook's names are the stages' ids in lower case: slow:cache_read. */
    snprintf(want, sizeof want, "%s", faults[st]);
    for (char *p = want; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    if (sc__fault(want))
        usleep(2000);
#else
    (void)st;
#endif
}

/*
 * The event lines are built by hand: printf's float formatting was most of
 * the cost of an event (bench/stream), and every number here is an integer
 * or a count of thousandths.
 */
typedef struct line {
    char b[384];
    size_t n;
} line;

static void l_str(line *l, const char *s)
{
    size_t k = strlen(s);
    memcpy(l->b + l->n, s, k);
    l->n += k;
}

static void l_u64(line *l, uint64_t v)
{
    char tmp[24];
    int i = 0;
    do
        tmp[i++] = (char)('0' + v % 10);
    while (v /= 10);
    while (i)
        l->b[l->n++] = tmp[--i];
}

static void l_i64(line *l, int64_t v)
{
    if (v < 0) {
        l->b[l->n++] = '-';
        l_u64(l, (uint64_t)(-(v + 1)) + 1);
    } else {
        l_u64(l, (uint64_t)v);
    }
}

/* v thousandths as a decimal with three places: 1234567 -> "1234.567". */
static void l_milli(line *l, int64_t v)
{
    if (v < 0) {
        l->b[l->n++] = '-';
        v = -v;
    }
    l_u64(l, (uint64_t)v / 1000);
    l->b[l->n++] = '.';
    l->b[l->n++] = (char)('0' + v / 100 % 10);
    l->b[l->n++] = (char)('0' + v / 10 % 10);
    l->b[l->n++] = (char)('0' + v % 10);
}

static void l_head(line *l, const sc__trace *t, const sc__tring *r, const char *ph,
                   const char *name, uint64_t ts_ns)
{
    l_str(l, ",\n{\"ph\":\"");
    l_str(l, ph);
    l_str(l, "\",\"pid\":");
    l_i64(l, t->rank);
    l_str(l, ",\"tid\":");
    l_i64(l, r->tid);
    l_str(l, ",\"name\":\"");
    l_str(l, name);
    l_str(l, "\",\"ts\":"); /* microseconds on rank 0's clock, as Chrome wants */
    l_milli(l, (int64_t)ts_ns + t->offset_ns);
}

static void write_event(sc__trace *t, const sc__tring *r, const event *e)
{
    static const char *const counters[] = {"ring occupancy", "cache hit rate"};
    static const char *const counter_keys[] = {"batches", "percent"};
    line l = {.n = 0};
    if (e->kind == EV_SPAN) {
        l_head(&l, t, r, "X", sc__stage_name((sc__stage)e->what), e->t0);
        l_str(&l, ",\"dur\":");
        l_milli(&l, (int64_t)(e->t1 - e->t0));
        l_str(&l, ",\"args\":{\"epoch\":");
        l_u64(&l, e->epoch);
        l_str(&l, ",\"shard\":");
        l_i64(&l, e->shard);
        l_str(&l, ",\"batch\":");
        l_i64(&l, e->batch);
        l_str(&l, ",\"bytes\":");
        l_u64(&l, e->bytes);
        l_str(&l, "}}");
    } else if (e->kind == EV_COUNTER) {
        l_head(&l, t, r, "C", counters[e->what], e->t0);
        l_str(&l, ",\"args\":{\"");
        l_str(&l, counter_keys[e->what]);
        l_str(&l, "\":");
        l_milli(&l, (int64_t)(e->value * 1000.0 + (e->value < 0 ? -0.5 : 0.5)));
        l_str(&l, "}}");
    } else {
        l_head(&l, t, r, "i\",\"s\":\"p", "epoch end", e->t0);
        l_str(&l, ",\"args\":{\"epoch\":");
        l_u64(&l, e->epoch);
        l_str(&l, "}}");
    }
    if (fwrite(l.b, 1, l.n, t->f) != l.n)
        t->io_failed = 1;
}

int sc__trace_flush(sc__trace *t, sc_error *err)
{
    if (!t)
        return sc__errok(err);
    pthread_mutex_lock(&t->mu);
    sc__tring *list = t->rings;
    pthread_mutex_unlock(&t->mu);
    /* Rings are only ever prepended, so the list from `list` on is stable. */
    for (sc__tring *r = list; r; r = r->next) {
        if (!r->named) /* written as soon as the thread exists: a crash keeps it */
            put_line(t,
                     ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                     "\"args\":{\"name\":\"%s\"}}",
                     t->rank, r->tid, r->name);
        r->named = 1;
        uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
        uint64_t tl = atomic_load_explicit(&r->tail, memory_order_relaxed);
        for (; tl < h; tl++)
            write_event(t, r, &r->ev[tl % r->cap]);
        atomic_store_explicit(&r->tail, tl, memory_order_release);
    }
    if (fflush(t->f) != 0)
        t->io_failed = 1;
    if (t->io_failed)
        return sc__seterr(err, SC_EIO, "rank %d: writing trace file '%s' failed", t->rank,
                          t->path);
    return sc__errok(err);
}

int sc__trace_close(sc__trace *t, sc_error *err)
{
    if (!t)
        return sc__errok(err);
    int rc = sc__trace_flush(t, err);
    unsigned long long dropped = 0;
    for (sc__tring *r = t->rings; r; r = r->next)
        dropped += atomic_load_explicit(&r->dropped, memory_order_relaxed);
    put_line(t,
             ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"shardcache\",\"args\":{"
             "\"rank\":%d,\"world\":%d,\"clock_offset_us\":%.3f,\"clock_error_us\":%.3f,"
             "\"dropped\":%llu,\"untraced_threads\":%d,\"ring_events\":%llu}}\n"
             "],\"displayTimeUnit\":\"ms\"}\n",
             t->rank, t->rank, t->world, (double)t->offset_ns / 1e3,
             (double)t->error_ns / 1e3, dropped, t->untraced, (unsigned long long)t->cap);
    if (fclose(t->f) != 0)
        t->io_failed = 1;
    if (rc == SC_OK && t->io_failed)
        rc = sc__seterr(err, SC_EIO, "rank %d: writing trace file '%s' failed", t->rank,
                        t->path);
    for (sc__tring *r = t->rings, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
    return rc;
}
