/*
 * plan_cut.c - the remainder at sample granularity.
 *
 * Whole shards cannot give U units equal batch counts without dropping or
 * repeating up to a shard's imbalance per unit.  Here, after the shards
 * are assigned and spread, every unit gets a target and the units above
 * theirs hand the tail of their lists to the units below: whole shards
 * where they fit, else a sample range of one (a cut).  With T = b x bu
 * (bu: a unit's part of its rank's batch):
 *
 *   drop: b = floor(N / (U bu)); every unit serves at least T, a unit
 *         above keeps its extra and its schedule drops it: fewer than
 *         U bu = R x B samples dropped in all.
 *   pad:  b = ceil(N / (U bu)); the Z = U T - N repeats fall on the last
 *         units, at most bu each (unit u serves T - min(bu, max(0,
 *         Z - (U-1-u) bu))), so they lie in the last batch, at its end,
 *         on every rank; with b = 1 the units fill in order, each keeping
 *         at least one sample.
 *
 * Givers and takers are matched in unit order; each transfer ends a giver
 * or a taker, so there are at most U - 1, and each makes at most two
 * cuts (the rest of a shard cut before, and the start of the next): at
 * most 2 (U - 1) cuts an epoch, and no sample in two places.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plan_state.h"
#include "vec.h"

/* A giver's tail: order[i] is its last shard with samples at home, rem of them. */
typedef struct cut_tail {
    uint64_t i, rem;
} cut_tail;

typedef struct cut_work {
    sc_plan *p;
    const uint64_t *sizes;
    uint64_t *target;          /* [U] */
    uint32_t *moves, nmoves;   /* whole shards moved, in the order moved */
    size_t cap;
} cut_work;

uint64_t sc__plan_target(const sc_plan *p, uint32_t u, uint64_t total)
{
    uint64_t U = p->units, bu = p->unit_batch, b = p->info.batches_per_rank, T = b * bu;
    if (p->info.remainder == SC_REMAINDER_DROP)
        return T;
    if (b > 1) {
        uint64_t Z = U * T - total, after = (U - 1 - u) * bu;
        uint64_t pad = Z > after ? Z - after : 0;
        return T - (pad < bu ? pad : bu);
    }
    /* One batch: units fill in order, keeping one sample for each unit after. */
    uint64_t before = u * T, rest = U - 1 - u;
    if (total < before + rest + 1)
        return 1;
    uint64_t fill = total - before - rest;
    return fill < T ? fill : T;
}

static void cut_targets(cut_work *w, uint64_t total)
{
    for (uint32_t u = 0; u < w->p->units; u++)
        w->target[u] = sc__plan_target(w->p, u, total);
}

static int cut_push_move(cut_work *w, uint32_t s)
{
    uint32_t *m = sc__vec_grow(w->moves, &w->cap, w->nmoves + 1, sizeof *m);
    if (!m)
        return -1;
    w->moves = m;
    w->moves[w->nmoves++] = s;
    return 0;
}

/* Steps a giver's tail back to its previous shard. */
static void cut_step_back(const cut_work *w, uint32_t g, cut_tail *t)
{
    const sc_plan *p = w->p;
    t->rem = 0;
    if (t->i > p->unit_off[g]) {
        t->i--;
        t->rem = w->sizes[p->order[t->i]];
    }
}

/* Giver g hands k samples from its tail to taker to. */
static int cut_give(cut_work *w, uint32_t g, cut_tail *t, uint32_t to, uint64_t k)
{
    sc_plan *p = w->p;
    while (k && t->rem) {
        uint32_t s = p->order[t->i];
        uint64_t size = w->sizes[s];
        if (t->rem == size && k >= size) {
            p->owner[s] = to;
            if (cut_push_move(w, s))
                return SC_ENOMEM;
            k -= size;
            cut_step_back(w, g, t);
            continue;
        }
        uint64_t take = k < t->rem ? k : t->rem;
        if (p->info.cuts >= SC__PLAN_MAX_CUTS(p->units))
            return SC_EPLAN;
        sc__cut c = {s, g, to, t->rem - take, t->rem};
        p->cuts[p->info.cuts++] = c;
        t->rem -= take;
        k -= take;
        if (!t->rem)
            cut_step_back(w, g, t);
    }
    return k ? SC_EPLAN : SC_OK;
}

/* Matches givers (above target) with takers (below) in unit order. */
static int cut_transfer(cut_work *w)
{
    sc_plan *p = w->p;
    uint32_t U = p->units, g = 0;
    uint64_t *load = p->unit_samples;
    cut_tail tail = {0, 0};
    int rc = SC_OK;
    for (uint32_t t = 0; t < U && rc == SC_OK; t++) {
        while (load[t] < w->target[t] && rc == SC_OK) {
            while (g < U && load[g] <= w->target[g])
                g++;
            if (g == U)
                return SC_EPLAN;
            if (!tail.rem) { /* a fresh giver: its tail is its last shard */
                tail.i = p->unit_off[g + 1] - 1;
                tail.rem = w->sizes[p->order[tail.i]];
            }
            uint64_t need = w->target[t] - load[t], spare = load[g] - w->target[g];
            uint64_t k = need < spare ? need : spare;
            rc = cut_give(w, g, &tail, t, k);
            load[g] -= k;
            load[t] += k;
            if (load[g] == w->target[g])
                tail.rem = 0;
        }
    }
    return rc;
}

/* The home lists after whole moves: each unit's kept shards, then those moved to it. */
static int cut_relist(cut_work *w)
{
    sc_plan *p = w->p;
    uint32_t U = p->units;
    uint64_t n = p->info.nshards;
    uint32_t *order = malloc(sizeof *order * (n + 1));
    uint64_t *off = calloc((size_t)U + 1, sizeof *off);
    if (!order || !off) {
        free(order);
        free(off);
        return SC_ENOMEM;
    }
    for (uint64_t s = 0; s < n; s++)
        off[p->owner[s] + 1]++;
    for (uint32_t u = 0; u < U; u++)
        off[u + 1] += off[u];
    uint64_t *fill = w->target; /* free again: the cursor per unit */
    memcpy(fill, off, sizeof *fill * U);
    for (uint32_t u = 0; u < U; u++)
        for (uint64_t i = p->unit_off[u]; i < p->unit_off[u + 1]; i++)
            if (p->owner[p->order[i]] == u)
                order[fill[u]++] = p->order[i];
    for (uint32_t m = 0; m < w->nmoves; m++)
        order[fill[p->owner[w->moves[m]]]++] = w->moves[m];
    free(p->order);
    free(p->unit_off);
    p->order = order;
    p->unit_off = off;
    return SC_OK;
}

/* b: the batch count; T = b bu; overflow and drop's empty epoch refused. */
static int cut_count(const sc_plan *p, uint64_t total, uint64_t *b, uint64_t *T, sc_error *err)
{
    sc_plan_info in = p->info;
    uint64_t G = 0, all = 0;
    if (__builtin_mul_overflow((uint64_t)p->units, p->unit_batch, &G))
        return sc__seterr(err, SC_EOVERFLOW, "epoch %llu: the global batch overflows 64 bits",
                          (unsigned long long)in.epoch);
    *b = total / G + (in.remainder == SC_REMAINDER_PAD && total % G != 0);
    if (*b == 0)
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: %llu samples cannot fill one batch of %llu on each of "
                          "%u ranks with remainder=drop",
                          (unsigned long long)in.epoch, (unsigned long long)total,
                          (unsigned long long)in.batch_size, in.world_size);
    if (__builtin_mul_overflow(*b, p->unit_batch, T) ||
        __builtin_mul_overflow(*T, (uint64_t)p->units, &all))
        return sc__seterr(err, SC_EOVERFLOW,
                          "epoch %llu: %u ranks x %llu batches x %llu samples overflows 64 bits",
                          (unsigned long long)in.epoch, in.world_size, (unsigned long long)*b,
                          (unsigned long long)in.batch_size);
    return SC_OK;
}

int sc__plan_cut(sc_plan *p, const uint64_t *sizes, uint64_t total, sc_error *err)
{
    uint64_t b = 0, T = 0;
    int rc = cut_count(p, total, &b, &T, err);
    if (rc != SC_OK)
        return rc;
    cut_work w = {p, sizes, malloc(sizeof *w.target * p->units), NULL, 0, 0};
    p->info.cuts = 0;
    if (!w.target)
        rc = SC_ENOMEM;
    p->info.batches_per_rank = b;
    if (rc == SC_OK) {
        cut_targets(&w, total);
        rc = cut_transfer(&w);
    }
    if (rc == SC_OK && w.nmoves)
        rc = cut_relist(&w);
    free(w.target);
    free(w.moves);
    if (rc != SC_OK)
        return rc == SC_ENOMEM
                   ? sc__seterr(err, rc, "epoch %llu: no memory to balance the remainder",
                                (unsigned long long)p->info.epoch)
                   : sc__seterr(err, rc, "epoch %llu: the remainder could not be balanced "
                                "(a planner bug)", (unsigned long long)p->info.epoch);
    sc__plan_index_cuts(p);
    uint64_t all = T * p->units;
    p->info.dropped = total > all ? total - all : 0;
    p->info.padded = all > total ? all - total : 0;
    sc__plan_rank_extremes(p);
    return SC_OK;
}
