/*
 * dev_sim.c - the simulated device (devops.h), in testing builds only.
 *
 * Each stream is a thread that runs its queued operations in order: a
 * copy sleeps SC_SIM_COPY_US microseconds (the copy engine's injectable
 * delay) before it moves the bytes, so a caller that reuses memory before
 * an event says it may finds the wrong bytes.  An event is a sequence
 * point: (the stream's clock, the number of operations queued on the stream
 * when it was recorded).  A clock outlives its stream while an event or a
 * queued wait still refers to it, as a CUDA event outlives the stream it was
 * recorded on.  One mutex guards every stream and event: the simulation is
 * about order, not speed.  SC_SIM_DEVICES sets how many devices a process
 * sees (default 8).
 */
#include "dev_sim.h"

#ifdef SC_TESTING
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OP_COPY, OP_WAIT, OP_FILL };

/* How many operations a stream has run; shared by everything that waits on it. */
typedef struct simclock {
    uint64_t done;
    unsigned refs;
} simclock;

/* Reached once clock->done >= seq; no clock is reached at once. */
typedef struct simpoint {
    simclock *clock;
    uint64_t seq;
} simpoint;

typedef struct simop {
    struct simop *next;
    int kind;
    void *dst;
    const void *src;
    size_t bytes;
    unsigned delay_us;
    simpoint wait;
} simop;

typedef struct simstream {
    simop *head, *tail;
    uint64_t queued;
    simclock *clock;
    int stop;
    pthread_t thread;
} simstream;

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sim_cv = PTHREAD_COND_INITIALIZER;
static _Thread_local int sim_bound = -1;

static int sim_reached(simpoint p)
{
    return !p.clock || p.clock->done >= p.seq;
}

/* Takes a reference to p's clock (mutex held). */
static simpoint sim_hold(simpoint p)
{
    if (p.clock)
        p.clock->refs++;
    return p;
}

/* Drops a reference (mutex held); the last one frees the clock. */
static void sim_drop(simpoint p)
{
    if (p.clock && --p.clock->refs == 0)
        free(p.clock);
}

/* CUDA's current device is per thread; so is the simulation's. */
static int sim_check(const char *call, sc_error *err)
{
    if (sim_bound >= 0)
        return SC_OK;
    return sc__seterr(err, SC_ECUDA,
                      "the simulated device: %s from a thread that has not bound a device "
                      "(cudaSetDevice)",
                      call);
}

static void sim_run(simop *op)
{
    if (op->delay_us) {
        struct timespec ts = {op->delay_us / 1000000, (long)(op->delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    if (op->kind == OP_COPY)
        memcpy(op->dst, op->src, op->bytes);
    else if (op->kind == OP_FILL)
        memset(op->dst, SC__SIM_POISON, op->bytes);
}

static void *sim_engine(void *arg)
{
    simstream *s = arg;
    pthread_mutex_lock(&sim_mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&sim_cv, &sim_mu);
        simop *op = s->head;
        if (!op)
            break; /* stopped, and everything queued has run */
        while (op->kind == OP_WAIT && !sim_reached(op->wait))
            pthread_cond_wait(&sim_cv, &sim_mu);
        pthread_mutex_unlock(&sim_mu);
        sim_run(op);
        pthread_mutex_lock(&sim_mu);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->clock->done++;
        if (op->kind == OP_WAIT)
            sim_drop(op->wait);
        free(op);
        pthread_cond_broadcast(&sim_cv);
    }
    pthread_mutex_unlock(&sim_mu);
    return NULL;
}

/* Queues op on s, or runs it now when s is NULL (the legacy stream: idle). */
static int sim_queue(simstream *s, simop op, sc_error *err)
{
    if (!s) {
        pthread_mutex_lock(&sim_mu);
        while (op.kind == OP_WAIT && !sim_reached(op.wait))
            pthread_cond_wait(&sim_cv, &sim_mu);
        if (op.kind == OP_WAIT)
            sim_drop(op.wait);
        pthread_mutex_unlock(&sim_mu);
        sim_run(&op);
        return SC_OK;
    }
    simop *o = malloc(sizeof *o);
    if (!o) {
        pthread_mutex_lock(&sim_mu);
        if (op.kind == OP_WAIT)
            sim_drop(op.wait);
        pthread_mutex_unlock(&sim_mu);
        return sc__seterr(err, SC_ENOMEM, "the simulated device: no memory for an operation");
    }
    *o = op;
    o->next = NULL;
    pthread_mutex_lock(&sim_mu);
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->queued++;
    pthread_cond_broadcast(&sim_cv);
    pthread_mutex_unlock(&sim_mu);
    return SC_OK;
}

static unsigned sim_env(const char *name, unsigned dflt, unsigned max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    unsigned long x = strtoul(v, NULL, 10);
    return x > max ? max : (unsigned)x;
}

static int sim_count(int *n, sc_error *err)
{
    (void)err;
    *n = (int)sim_env("SC_SIM_DEVICES", 8, 64);
    return SC_OK;
}

static int sim_current(int *device, sc_error *err)
{
    (void)err;
    *device = sim_bound;
    return SC_OK;
}

static int sim_bind(int device, sc_error *err)
{
    int n = 0;
    sim_count(&n, err);
    if (device < 0 || device >= n)
        return sc__seterr(err, SC_ECUDA, "the simulated device: no device %d (%d visible)",
                          device, n);
    sim_bound = device;
    return SC_OK;
}

/* One machine: a device's identity is its number. */
static int sim_identity(int device, char id[SC__DEV_ID_BYTES], sc_error *err)
{
    (void)err;
    snprintf(id, SC__DEV_ID_BYTES, "sim:%d", device);
    return SC_OK;
}

static int sim_host_alloc(size_t bytes, void **p, sc_error *err)
{
    int rc = sim_check("cudaHostAlloc", err);
    if (rc != SC_OK)
        return rc;
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    *p = aligned_alloc(align, (bytes + align - 1) / align * align);
    return *p ? SC_OK : sc__seterr(err, SC_ENOMEM, "the simulated device: no host memory");
}

static int sim_alloc(size_t bytes, void **p, sc_error *err)
{
    int rc = sim_check("cudaMalloc", err);
    if (rc != SC_OK)
        return rc;
    *p = malloc(bytes);
    if (*p)
        memset(*p, SC__SIM_POISON, bytes);
    return *p ? SC_OK : sc__seterr(err, SC_ENOMEM, "the simulated device: no device memory");
}

static void sim_free(void *p, size_t bytes)
{
    if (p)
        memset(p, SC__SIM_POISON, bytes);
    free(p);
}

static int sim_stream_new(void **stream, sc_error *err)
{
    int rc = sim_check("cudaStreamCreate", err);
    if (rc != SC_OK)
        return rc;
    simstream *s = calloc(1, sizeof *s);
    simclock *c = calloc(1, sizeof *c);
    if (!s || !c) {
        free(s);
        free(c);
        return sc__seterr(err, SC_ENOMEM, "the simulated device: no memory for a stream");
    }
    c->refs = 1;
    s->clock = c;
    if (pthread_create(&s->thread, NULL, sim_engine, s) != 0) {
        free(s);
        free(c);
        return sc__seterr(err, SC_ECUDA, "the simulated device: cannot start a stream");
    }
    *stream = s;
    return SC_OK;
}

/* Runs what is queued, then stops (cudaStreamDestroy's order). */
static void sim_stream_free(void *stream)
{
    simstream *s = stream;
    if (!s)
        return;
    pthread_mutex_lock(&sim_mu);
    s->stop = 1;
    pthread_cond_broadcast(&sim_cv);
    pthread_mutex_unlock(&sim_mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&sim_mu);
    sim_drop((simpoint){s->clock, 0});
    pthread_mutex_unlock(&sim_mu);
    free(s);
}

static int sim_event_new(void **event, sc_error *err)
{
    int rc = sim_check("cudaEventCreate", err);
    if (rc != SC_OK)
        return rc;
    *event = calloc(1, sizeof(simpoint)); /* never recorded: reached */
    return *event ? SC_OK
                  : sc__seterr(err, SC_ENOMEM, "the simulated device: no memory for an event");
}

static int sim_record(void *event, void *stream, sc_error *err)
{
    int rc = sim_check("cudaEventRecord", err);
    if (rc != SC_OK)
        return rc;
    simstream *s = stream;
    simpoint *p = event;
    pthread_mutex_lock(&sim_mu);
    sim_drop(*p);
    *p = s ? sim_hold((simpoint){s->clock, s->queued}) : (simpoint){NULL, 0};
    pthread_mutex_unlock(&sim_mu);
    return SC_OK;
}

static void sim_event_free(void *event)
{
    pthread_mutex_lock(&sim_mu);
    sim_drop(*(simpoint *)event);
    pthread_mutex_unlock(&sim_mu);
    free(event);
}

static int sim_stream_wait(void *stream, void *event, sc_error *err)
{
    int rc = sim_check("cudaStreamWaitEvent", err);
    if (rc != SC_OK)
        return rc;
    pthread_mutex_lock(&sim_mu);
    simop op = {.kind = OP_WAIT, .wait = sim_hold(*(simpoint *)event)};
    pthread_mutex_unlock(&sim_mu);
    return sim_queue(stream, op, err);
}

/* Like cudaEventSynchronize, from any thread: the event knows its device. */
static int sim_sync(void *event, sc_error *err)
{
    (void)err;
    pthread_mutex_lock(&sim_mu);
    while (!sim_reached(*(simpoint *)event))
        pthread_cond_wait(&sim_cv, &sim_mu);
    pthread_mutex_unlock(&sim_mu);
    return SC_OK;
}

static int sim_copy(void *dst, const void *src, size_t bytes, void *stream, sc_error *err)
{
    int rc = sim_check("cudaMemcpyAsync", err);
    if (rc != SC_OK)
        return rc;
    simop op = {.kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes,
                .delay_us = sim_env("SC_SIM_COPY_US", 0, 1000000)};
    return sim_queue(stream, op, err);
}

static int sim_poison(void *dst, size_t bytes, void *stream, sc_error *err)
{
    int rc = sim_check("cudaMemsetAsync", err);
    if (rc != SC_OK)
        return rc;
    return sim_queue(stream, (simop){.kind = OP_FILL, .dst = dst, .bytes = bytes}, err);
}

int sc__sim_read(void *stream, void *dst, const void *src, size_t n, unsigned delay_us,
                 sc_error *err)
{
    int rc = sim_check("a kernel launch", err);
    if (rc != SC_OK)
        return rc;
    simop op = {.kind = OP_COPY, .dst = dst, .src = src, .bytes = n, .delay_us = delay_us};
    return sim_queue(stream, op, err);
}

void sc__sim_stream_sync(void *stream)
{
    simstream *s = stream;
    if (!s)
        return;
    pthread_mutex_lock(&sim_mu);
    uint64_t upto = s->queued;
    while (s->clock->done < upto)
        pthread_cond_wait(&sim_cv, &sim_mu);
    pthread_mutex_unlock(&sim_mu);
}

const sc__devops sc__devops_sim = {
    .name = "the simulated device",
    .count = sim_count,
    .current = sim_current,
    .bind = sim_bind,
    .identity = sim_identity,
    .host_alloc = sim_host_alloc,
    .host_free = free,
    .alloc = sim_alloc,
    .free = sim_free,
    .stream_new = sim_stream_new,
    .stream_free = sim_stream_free,
    .event_new = sim_event_new,
    .event_free = sim_event_free,
    .record = sim_record,
    .stream_wait = sim_stream_wait,
    .sync = sim_sync,
    .copy = sim_copy,
    .poison = sim_poison,
};

#else
typedef int sc__dev_sim_absent; /* a translation unit may not be empty */
#endif /* SC_TESTING */
