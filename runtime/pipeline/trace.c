/*
 * trace.c - the rank's list of trace rings (base/tring.c), the job-wide
 * clock, and the rank's Chrome Trace Event file.
 *
 * The file is JSON with one event per line; the loader's thread drains the
 * rings, in no particular order across threads (viewers sort by timestamp).
 */
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"
#include "clock.h"
#include "error.h"
#include "mpierr.h"

/* A ring in this rank's list; `named`: its thread's name is in the file. */
typedef struct trace_node {
    sc__tring *ring;
    int named;
    struct trace_node *next;
} trace_node;

struct sc__trace {
    int rank, world;
    FILE *f;
    char path[SC_PATH_MAX + 32];
    uint64_t cap;
    int64_t offset_ns; /* add to the local clock: rank 0's clock */
    int64_t error_ns;  /* |offset error| <= this */
    pthread_mutex_t mu; /* the ring list */
    trace_node *rings;
    int nrings, untraced;
    int io_failed;
};

/*
 * Offset to rank 0 by ping-pong: the sample with the shortest round trip
 * bounds the error best (Cristian's algorithm): rank 0's reading lies
 * within that round trip, so the error is at most half of it.
 */
static int trace_measure_offset(MPI_Comm comm, int rank, int world, int64_t *offset,
                                int64_t *error, sc_error *err)
{
    enum { ROUNDS = 8, TAG = 0x7ace };
    *offset = 0;
    *error = 0;
    for (int peer = 1; peer < world; peer++) {
        for (int k = 0; k < ROUNDS; k++) {
            uint64_t t;
            if (rank == 0) {
                SC_MPI_CHECK(err, MPI_Recv(&t, 1, MPI_UINT64_T, peer, TAG, comm,
                                           MPI_STATUS_IGNORE));
                t = sc__clock_ns();
                SC_MPI_CHECK(err, MPI_Send(&t, 1, MPI_UINT64_T, peer, TAG, comm));
            } else if (rank == peer) {
                uint64_t a = sc__clock_ns();
                SC_MPI_CHECK(err, MPI_Send(&a, 1, MPI_UINT64_T, 0, TAG, comm));
                SC_MPI_CHECK(err, MPI_Recv(&t, 1, MPI_UINT64_T, 0, TAG, comm,
                                           MPI_STATUS_IGNORE));
                uint64_t b = sc__clock_ns(), rtt = b - a;
                if (k == 0 || (int64_t)rtt / 2 < *error) {
                    *error = (int64_t)rtt / 2;
                    *offset = (int64_t)t - (int64_t)(a + rtt / 2);
                }
            }
        }
    }
    return SC_OK;
}

static int trace_put_line(sc__trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int trace_put_line(sc__trace *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(t->f, fmt, ap);
    va_end(ap);
    if (n < 0)
        t->io_failed = 1;
    return n < 0 ? -1 : 0;
}

/*
 * Creates this rank's trace file anew, 0600, never through a link planted
 * at its name (docs/reliability.md, "Shared nodes").
 */
static int trace_create(sc__trace *t, sc_error *err)
{
    int fd = -1;
    int rc = sc_output_open(t->path, &fd, err);
    if (rc == SC_OK && !(t->f = fdopen(fd, "w"))) {
        rc = sc__seterr(err, SC_EIO, "'%s': %s", t->path, strerror(errno));
        close(fd);
    }
    return rc == SC_OK ? SC_OK
                       : sc__errctx(err, rc, "rank %d: trace file (SC_TRACE)", t->rank);
}

int sc__trace_open(MPI_Comm comm, const char *prefix, uint64_t ring_events,
                   sc__trace **out, sc_error *err)
{
    *out = NULL;
    int rank, world, on = prefix && *prefix, all_on = 0, any_on = 0;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    SC_MPI_CHECK(err, MPI_Comm_size(comm, &world));
    SC_MPI_CHECK(err, sc__agree_range(comm, on, &all_on, &any_on));
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
        rc = trace_create(t, err);
    }
    /* Every rank takes part in the ping-pong, or none does: agree first. */
    rc = sc__agree(comm, rc, "could not open its trace file", err);
    if (rc == SC_OK)
        rc = trace_measure_offset(comm, rank, world, &t->offset_ns, &t->error_ns, err);
    if (rc != SC_OK) {
        if (t && t->f)
            fclose(t->f);
        if (t)
            pthread_mutex_destroy(&t->mu);
        free(t);
        return rc;
    }
    trace_put_line(t, "{\"traceEvents\":[\n");
    trace_put_line(t,
                   "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
                   "\"args\":{\"name\":\"rank %d\"}},\n",
                   rank, rank);
    trace_put_line(t,
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
    trace_node *n = malloc(sizeof *n);
    pthread_mutex_lock(&t->mu);
    sc__tring *r = n ? sc__tring_new(t->cap, t->nrings + 1, thread_name) : NULL;
    if (!r) {
        free(n);
        t->untraced++;
    } else {
        t->nrings++;
        *n = (trace_node){r, 0, t->rings};
        t->rings = n;
    }
    pthread_mutex_unlock(&t->mu);
    return r;
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

static void trace_l_str(line *l, const char *s)
{
    size_t k = strlen(s);
    memcpy(l->b + l->n, s, k);
    l->n += k;
}

static void trace_l_u64(line *l, uint64_t v)
{
    char tmp[24];
    int i = 0;
    do
        tmp[i++] = (char)('0' + v % 10);
    while (v /= 10);
    while (i)
        l->b[l->n++] = tmp[--i];
}

static void trace_l_i64(line *l, int64_t v)
{
    if (v < 0) {
        l->b[l->n++] = '-';
        trace_l_u64(l, (uint64_t)(-(v + 1)) + 1);
    } else {
        trace_l_u64(l, (uint64_t)v);
    }
}

/* v thousandths as a decimal with three places: 1234567 -> "1234.567". */
static void trace_l_milli(line *l, int64_t v)
{
    if (v < 0) {
        l->b[l->n++] = '-';
        v = -v;
    }
    trace_l_u64(l, (uint64_t)v / 1000);
    l->b[l->n++] = '.';
    l->b[l->n++] = (char)('0' + v / 100 % 10);
    l->b[l->n++] = (char)('0' + v / 10 % 10);
    l->b[l->n++] = (char)('0' + v % 10);
}

static void trace_l_head(line *l, const sc__trace *t, const sc__tring *r, const char *ph,
                         const char *name, uint64_t ts_ns)
{
    trace_l_str(l, ",\n{\"ph\":\"");
    trace_l_str(l, ph);
    trace_l_str(l, "\",\"pid\":");
    trace_l_i64(l, t->rank);
    trace_l_str(l, ",\"tid\":");
    trace_l_i64(l, sc__tring_tid(r));
    trace_l_str(l, ",\"name\":\"");
    trace_l_str(l, name);
    trace_l_str(l, "\",\"ts\":"); /* microseconds on rank 0's clock, as Chrome wants */
    trace_l_milli(l, (int64_t)ts_ns + t->offset_ns);
}

static void trace_write_event(void *arg, const sc__tring *r, const sc__event *e)
{
    sc__trace *t = arg;
    static const char *const counters[] = {"ring occupancy", "cache hit rate",
                                           "shards per batch"};
    static const char *const counter_keys[] = {"batches", "percent", "shards"};
    line l = {.n = 0};
    if (e->kind == SC__EV_SPAN) {
        trace_l_head(&l, t, r, "X", sc__tring_stage_name((sc__stage)e->what), e->t0);
        trace_l_str(&l, ",\"dur\":");
        trace_l_milli(&l, (int64_t)(e->t1 - e->t0));
        trace_l_str(&l, ",\"args\":{\"epoch\":");
        trace_l_u64(&l, e->epoch);
        trace_l_str(&l, ",\"shard\":");
        trace_l_i64(&l, e->shard);
        trace_l_str(&l, ",\"batch\":");
        trace_l_i64(&l, e->batch);
        trace_l_str(&l, ",\"bytes\":");
        trace_l_u64(&l, e->bytes);
        trace_l_str(&l, "}}");
    } else if (e->kind == SC__EV_COUNTER) {
        trace_l_head(&l, t, r, "C", counters[e->what], e->t0);
        trace_l_str(&l, ",\"args\":{\"");
        trace_l_str(&l, counter_keys[e->what]);
        trace_l_str(&l, "\":");
        trace_l_milli(&l, (int64_t)(e->value * 1000.0 + (e->value < 0 ? -0.5 : 0.5)));
        trace_l_str(&l, "}}");
    } else {
        trace_l_head(&l, t, r, "i\",\"s\":\"p", "epoch end", e->t0);
        trace_l_str(&l, ",\"args\":{\"epoch\":");
        trace_l_u64(&l, e->epoch);
        trace_l_str(&l, "}}");
    }
    if (fwrite(l.b, 1, l.n, t->f) != l.n)
        t->io_failed = 1;
}

int sc__trace_flush(sc__trace *t, sc_error *err)
{
    if (!t)
        return sc__errok(err);
    pthread_mutex_lock(&t->mu);
    trace_node *list = t->rings;
    pthread_mutex_unlock(&t->mu);
    /* Rings are only ever prepended, so the list from `list` on is stable. */
    for (trace_node *n = list; n; n = n->next) {
        if (!n->named) /* written as soon as the thread exists: a crash keeps it */
            trace_put_line(t,
                           ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                           "\"args\":{\"name\":\"%s\"}}",
                           t->rank, sc__tring_tid(n->ring), sc__tring_name(n->ring));
        n->named = 1;
        sc__tring_drain(n->ring, trace_write_event, t);
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
    for (trace_node *n = t->rings; n; n = n->next)
        dropped += sc__tring_dropped(n->ring);
    trace_put_line(t,
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
    for (trace_node *n = t->rings, *next; n; n = next) {
        next = n->next;
        sc__tring_free(n->ring);
        free(n);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
    return rc;
}
