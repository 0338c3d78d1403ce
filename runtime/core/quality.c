/*
 * quality.c - how well an epoch's order mixes the dataset, from the plan
 * and the schedules alone (sc_plan_quality).
 *
 * Per full batch of each rank: the distinct shards and, with labels, the
 * distinct labels and their entropy; per delivered sample, how far its
 * position in the job's order (batch b of rank r is the b*R+r-th batch)
 * lies from its stored position.  The same figures for a uniform random
 * permutation of every sample, cut into batches, are the target: the
 * entropy of a 64-sample batch falls short of log2(classes) even then.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "plan_state.h"
#include "quality.h"
#include "schedule.h"


typedef struct qwork {
    const sc_quality_params *p;
    const uint64_t *first;  /* [nshards + 1] */
    unsigned char *seen;    /* [nshards] */
    uint32_t *shard;        /* [batch_size]: a batch's samples' shards */
    uint64_t *count;        /* [nclasses] */
    uint64_t total;
} qwork;

static uint64_t quality_shard(const qwork *w, uint64_t id)
{
    uint64_t s = 0;
    sc__shard_of(w->first, w->p->nshards, id, &s);
    return s;
}

uint64_t sc__quality_distinct(const uint32_t *keys, uint64_t n, unsigned char *seen)
{
    uint64_t distinct = 0;
    for (uint64_t i = 0; i < n; i++) {
        distinct += !seen[keys[i]];
        seen[keys[i]] = 1;
    }
    for (uint64_t i = 0; i < n; i++)
        seen[keys[i]] = 0;
    return distinct;
}

static void quality_batch(qwork *w, const uint64_t *ids, sc_quality_figures *f)
{
    uint64_t B = w->p->batch_size, nclasses = 0;
    for (uint64_t i = 0; i < B; i++)
        w->shard[i] = (uint32_t)quality_shard(w, ids[i]); /* plans' shards are uint32 */
    f->shards += (double)sc__quality_distinct(w->shard, B, w->seen);
    if (!w->p->labels)
        return;
    for (uint64_t i = 0; i < B; i++)
        nclasses += w->count[w->p->labels[ids[i]]]++ == 0;
    double h = 0;
    for (uint64_t i = 0; i < B; i++) {
        uint64_t *c = &w->count[w->p->labels[ids[i]]];
        if (*c) {
            double q = (double)*c / (double)B;
            h -= q * log2(q);
            *c = 0;
        }
    }
    f->bits += h;
    f->classes += (double)nclasses;
}

static double quality_moved(uint64_t pos, uint64_t id)
{
    return pos > id ? (double)(pos - id) : (double)(id - pos);
}

/* Sums to means: per batch, and per delivered sample over the dataset's size. */
static void quality_mean(sc_quality_figures *f, uint64_t batches, double moved,
                         uint64_t delivered, uint64_t total)
{
    double n = batches ? (double)batches : 1.0;
    f->shards /= n, f->bits /= n, f->classes /= n;
    f->moved = delivered ? moved / (double)delivered / (double)total : 0.0;
}

/* Every rank's schedule of the plan. */
static int quality_plan(qwork *w, const sc_plan *plan, sc_quality *out, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    uint64_t B = w->p->batch_size, R = in.world_size, delivered = 0;
    double moved = 0;
    for (uint32_t r = 0; r < R; r++) {
        sc__sched s;
        int rc = sc__schedule(w->first, plan, r, B, w->p->window, w->p->seed, 0, &s, err);
        if (rc != SC_OK)
            return rc;
        for (uint64_t q = 0; q < s.nreal; q++, delivered++)
            moved += quality_moved(((q / B) * R + r) * B + q % B, s.ids[q]);
        for (uint64_t b = 0; (b + 1) * B <= s.nreal; b++, out->batches++)
            quality_batch(w, s.ids + b * B, &out->plan);
        sc__sched_free(&s);
    }
    quality_mean(&out->plan, out->batches, moved, delivered, w->total);
    return SC_OK;
}

/* A uniform random permutation of every sample (seeded by the plan's), in batches. */
static int quality_uniform(qwork *w, uint64_t epoch, sc_quality *out, sc_error *err)
{
    uint64_t n = w->total, B = w->p->batch_size, batches = 0;
    uint64_t *ids = malloc(sizeof *ids * (n + 1));
    if (!ids)
        return sc__seterr(err, SC_ENOMEM, "epoch %llu: no memory for %llu sample ids",
                          (unsigned long long)epoch, (unsigned long long)n);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(w->p->seed, epoch, SC__PURPOSE_UNIFORM, 0));
    for (uint64_t i = 0; i < n; i++)
        ids[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = sc__rng_below(&r, i), t = ids[i - 1];
        ids[i - 1] = ids[j], ids[j] = t;
    }
    double moved = 0;
    for (uint64_t i = 0; i < n; i++)
        moved += quality_moved(i, ids[i]);
    for (; (batches + 1) * B <= n; batches++)
        quality_batch(w, ids + batches * B, &out->uniform);
    quality_mean(&out->uniform, batches, moved, n, n);
    free(ids);
    return SC_OK;
}

static int quality_check(const sc_plan *plan, const sc_quality_params *p, sc_quality *out,
                         sc_error *err)
{
    sc_plan_info in;
    if (!plan || !p || !out || !p->shard_sizes)
        return sc__seterr(err, SC_EINVAL, "sc_plan_quality: NULL argument");
    sc_plan_get_info(plan, &in);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < p->nshards && k < in.nshards; k++)
        sum += p->shard_sizes[k];
    if (p->nshards != in.nshards || sum != in.total_samples ||
        p->batch_size != in.batch_size || p->window == UINT64_MAX)
        return sc__seterr(err, SC_EINVAL,
                          "sc_plan_quality: %llu shard sizes of %llu samples, batch %llu, "
                          "window %llu for a plan of %llu shards of %llu samples, batch %llu "
                          "(needs the plan's shards and batch and a window in samples, not "
                          "auto)", (unsigned long long)p->nshards, (unsigned long long)sum,
                          (unsigned long long)p->batch_size, (unsigned long long)p->window,
                          (unsigned long long)in.nshards, (unsigned long long)in.total_samples,
                          (unsigned long long)in.batch_size);
    for (uint64_t i = 0; p->labels && i < in.total_samples; i++)
        if (p->labels[i] >= p->nclasses)
            return sc__seterr(err, SC_EINVAL, "sc_plan_quality: sample %llu has label %u, "
                              "not below the %u classes given", (unsigned long long)i,
                              p->labels[i], p->nclasses);
    return SC_OK;
}

int sc_plan_quality(const sc_plan *plan, const sc_quality_params *p, sc_quality *out,
                    sc_error *err)
{
    int rc = quality_check(plan, p, out, err);
    if (rc != SC_OK)
        return rc;
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    memset(out, 0, sizeof *out);
    qwork w = {.p = p, .total = in.total_samples};
    uint64_t *first = malloc(sizeof *first * (p->nshards + 1));
    w.seen = calloc(p->nshards + 1, 1);
    w.count = calloc(p->labels ? (size_t)p->nclasses + 1 : 1, sizeof *w.count);
    w.shard = malloc(sizeof *w.shard * (p->batch_size + 1));
    if (!first || !w.seen || !w.count || !w.shard)
        rc = sc__seterr(err, SC_ENOMEM, "epoch %llu: no memory to measure the shuffle",
                        (unsigned long long)in.epoch);
    for (uint64_t k = 0; rc == SC_OK && k <= p->nshards; k++)
        first[k] = k ? first[k - 1] + p->shard_sizes[k - 1] : 0;
    w.first = first;
    if (rc == SC_OK)
        rc = quality_plan(&w, plan, out, err);
    if (rc == SC_OK)
        rc = quality_uniform(&w, in.epoch, out, err);
    free(first), free(w.seen), free(w.count), free(w.shard);
    return rc;
}
