/*
 * schedule.c - a rank's delivery order in an epoch, from the plan alone.
 */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "plan_state.h"
#include "vec.h"


void sc__sched_free(sc__sched *sc)
{
    free(sc->ids);
    free(sc->dropped);
    free(sc->shards);
    free(sc->slot_shard);
    memset(sc, 0, sizeof *sc);
}

/*
 * Drop leaves out d of a unit's m shuffled positions: drawn at random over
 * all of them (seeded by seed, epoch and unit), not its last window's, so
 * that a unit above its target epoch after epoch (sticky plans) does not
 * leave out the same shards every time.  The kept ones move to the front,
 * in order; the drops after them.
 */
static int sched_pick_drops(uint64_t *perm, uint64_t m, uint64_t d, uint64_t seed,
                            uint64_t epoch, uint32_t u)
{
    unsigned char *out = calloc(m, 1);
    uint64_t *tmp = malloc(sizeof *tmp * d);
    if (!out || !tmp) {
        free(out);
        free(tmp);
        return -1;
    }
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(seed, epoch, SC__PURPOSE_DROPS, u));
    for (uint64_t j = m - d; j < m; j++) { /* Floyd: d distinct positions of m */
        uint64_t t = sc__rng_below(&r, j + 1);
        out[out[t] ? j : t] = 1;
    }
    for (uint64_t i = 0, keep = 0, k = 0; i < m; i++) {
        if (out[i])
            tmp[k++] = perm[i];
        else
            perm[keep++] = perm[i];
    }
    memcpy(perm + m - d, tmp, sizeof *tmp * d);
    free(out);
    free(tmp);
    return 0;
}

/* A rank's pieces being gathered, unit by unit: (first id, count) pairs. */
typedef struct sched_pieces {
    const uint64_t *first;
    uint64_t *id, *len, n;
    size_t cap, cap_len; /* id's and len's: equal but when one grew and the other could not */
} sched_pieces;

static int sched_add_piece(void *ctx, uint32_t shard, uint64_t lo, uint64_t hi)
{
    sched_pieces *g = ctx;
    uint64_t *a = sc__vec_grow(g->id, &g->cap, g->n + 1, sizeof *a);
    if (a)
        g->id = a;
    uint64_t *b = a ? sc__vec_grow(g->len, &g->cap_len, g->n + 1, sizeof *b) : NULL;
    if (!b)
        return -1;
    g->len = b;
    g->id[g->n] = g->first[shard] + lo;
    g->len[g->n++] = hi - lo;
    return 0;
}

/* Unit u's positions in plan order, shuffled window by window: perm[0..m). */
static void sched_unit(const sched_pieces *g, uint64_t p0, uint64_t p1, uint64_t *perm,
                       uint64_t m, uint64_t w, uint64_t seed, uint64_t epoch, uint32_t u)
{
    for (uint64_t i = p0, p = 0; i < p1; i++)
        for (uint64_t off = 0; off < g->len[i]; off++)
            perm[p++] = g->id[i] + off;
    for (uint64_t lo = 0, blk = 0; w > 1 && lo < m; lo += w, blk++) {
        uint64_t cnt = m - lo < w ? m - lo : w;
        sc__rng r;
        sc__rng_init(&r, sc__rng_key(seed, epoch, SC__PURPOSE_WINDOW, ((uint64_t)u << 40) ^ blk));
        for (uint64_t i = cnt - 1; i > 0; i--) {
            uint64_t j = sc__rng_below(&r, i + 1);
            uint64_t t = perm[lo + i];
            perm[lo + i] = perm[lo + j];
            perm[lo + j] = t;
        }
    }
}

/*
 * The rank's pieces, unit by unit (at[k] the first of unit u0 + k's), with
 * the test faults applied: its first piece twice, its last never.
 */
static int sched_gather(const sc_plan *plan, uint32_t u0, uint32_t k, unsigned faults,
                        sched_pieces *g, uint64_t *at)
{
    for (uint32_t i = 0; i < k; i++) {
        at[i] = g->n;
        if (sc__plan_visit(plan, u0 + i, g->first, sched_add_piece, g))
            return -1;
    }
    at[k] = g->n;
    if ((faults & SC__SCHED_DUP_SHARD) && g->n > 0) {
        if (sched_add_piece(g, 0, 0, 0))
            return -1;
        memmove(g->id + 1, g->id, sizeof *g->id * (g->n - 1));
        memmove(g->len + 1, g->len, sizeof *g->len * (g->n - 1));
        for (uint32_t i = 1; i <= k; i++)
            at[i]++;
    }
    if ((faults & SC__SCHED_SKIP_SHARD) && g->n > 1 && at[k] - at[k - 1] > 1) {
        uint64_t big = at[k - 1]; /* the last unit's largest piece: a whole shard */
        for (uint64_t i = at[k - 1]; i < at[k]; i++)
            big = g->len[i] >= g->len[big] ? i : big;
        memmove(g->id + big, g->id + big + 1, sizeof *g->id * (g->n - big - 1));
        memmove(g->len + big, g->len + big + 1, sizeof *g->len * (g->n - big - 1));
        g->n--, at[k]--;
    }
    return 0;
}

/*
 * The rank's slots from its units' shuffled positions: batch j is unit
 * u0's slots [j bu, (j+1) bu), then u0+1's...; a unit's slots past its
 * samples repeat them (padding), which the plan puts at the rank's end.
 */
static int sched_interleave(const uint64_t *perm, const uint64_t *pm, uint32_t k, uint64_t bu,
                            uint64_t want_u, sc__sched *out)
{
    uint64_t B = bu * k, nreal = 0, d = 0;
    int padding = 0;
    for (uint64_t q = 0; q < out->nslots; q++) {
        uint64_t o = q % B, i = o / bu, us = q / B * bu + o % bu, m = pm[i + 1] - pm[i];
        out->ids[q] = perm[pm[i] + sc__pad_slot(us, m)];
        if (us < m && padding)
            return -1;
        padding |= us >= m;
        nreal += us < m;
    }
    out->nreal = nreal;
    for (uint32_t i = 0; i < k; i++)
        for (uint64_t p = pm[i] + want_u; p < pm[i + 1]; p++)
            out->dropped[d++] = perm[p];
    out->ndropped = d;
    return 0;
}

int sc__schedule(const uint64_t *shard_first, const sc_plan *plan, uint32_t rank, uint64_t batch,
                 uint64_t window, uint64_t seed, unsigned faults, sc__sched *out, sc_error *err)
{
    sc_plan_info in;
    uint32_t u0, u1;
    memset(out, 0, sizeof *out);
    sc_plan_get_info(plan, &in);
    sc__plan_rank_units(plan, rank, &u0, &u1);
    uint32_t k = u1 - u0;
    uint64_t bu = batch / k, want_u = in.batches_per_rank * bu, m = 0;
    uint64_t w = sc__unit_window(window, in.partitions);
    sched_pieces g = {.first = shard_first};
    uint64_t *at = malloc(sizeof *at * (k + 1)), *pm = malloc(sizeof *pm * (k + 1));
    uint64_t *perm = NULL;
    int rc = SC_ENOMEM;
    if (at && pm && !sched_gather(plan, u0, k, faults, &g, at)) {
        pm[0] = 0;
        for (uint32_t i = 0; i < k; i++) {
            uint64_t mu = 0;
            for (uint64_t p = at[i]; p < at[i + 1]; p++)
                mu += g.len[p];
            pm[i + 1] = pm[i] + mu;
        }
        m = pm[k];
        out->nslots = in.batches_per_rank * batch;
        perm = malloc(sizeof *perm * (m + 1));
        out->ids = malloc(sizeof *out->ids * (out->nslots + 1));
        out->dropped = malloc(sizeof *out->dropped * (m + 1));
    }
    if (perm && out->ids && out->dropped) {
        rc = SC_OK;
        for (uint32_t i = 0; i < k; i++)
            sched_unit(&g, at[i], at[i + 1], perm + pm[i], pm[i + 1] - pm[i], w, seed, in.epoch,
                       u0 + i);
        for (uint32_t i = 0; i < k && rc == SC_OK; i++) {
            uint64_t mu = pm[i + 1] - pm[i];
            if (!mu && out->nslots)
                rc = SC_EPLAN;
            else if (mu > want_u &&
                     sched_pick_drops(perm + pm[i], mu, mu - want_u, seed, in.epoch, u0 + i))
                rc = SC_ENOMEM;
        }
        if (rc == SC_OK && sched_interleave(perm, pm, k, bu, want_u, out))
            rc = SC_EPLAN;
    }
    free(perm);
    free(at);
    free(pm);
    free(g.id);
    free(g.len);
    if (rc != SC_OK)
        sc__sched_free(out);
    if (rc == SC_ENOMEM)
        return sc__seterr(err, rc, "rank %u: epoch %llu: no memory for the schedule", rank,
                          (unsigned long long)in.epoch);
    if (rc != SC_OK)
        return sc__seterr(err, rc, "rank %u: epoch %llu: a unit with no samples, or padding "
                          "before real samples: the plan does not fit its schedule", rank,
                          (unsigned long long)in.epoch);
    return SC_OK;
}

/*
 * Lists the shards of `sc`'s slots in order of first use into shards[] and
 * each slot's index into slot_shard[] (sc__sched_order); SC_EPLAN past
 * `bound` distinct shards.
 */
static int sched_first_use(const sc__sched *sc, const uint64_t *shard_first, uint64_t nshards,
                           uint64_t bound, uint32_t *shards, uint32_t *slot_shard, uint64_t *n)
{
    /*
     * Shard -> its index in shards[]: an open-addressing table sized to the
     * shards the schedule can read, not to the dataset, which may hold 10^8.
     */
    uint64_t cap = 16;
    while (cap < 2 * bound)
        cap <<= 1;
    uint32_t *keys = malloc(sizeof *keys * cap), *vals = malloc(sizeof *vals * cap);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return SC_ENOMEM;
    }
    memset(keys, 0xff, sizeof *keys * cap); /* shard ids are below UINT32_MAX */
    *n = 0;
    uint64_t q = 0;
    for (; q < sc->nslots; q++) {
        uint64_t shard = 0;
        sc__shard_of(shard_first, nshards, sc->ids[q], &shard); /* ids come from the dataset */
        uint64_t h = sc__mix64(shard) & (cap - 1);
        while (keys[h] != UINT32_MAX && keys[h] != shard)
            h = (h + 1) & (cap - 1);
        if (keys[h] == UINT32_MAX && *n == bound)
            break; /* more than its plan gives it: the table would fill */
        if (keys[h] == UINT32_MAX) {
            keys[h] = (uint32_t)shard;
            vals[h] = (uint32_t)*n;
            shards[(*n)++] = (uint32_t)shard;
        }
        slot_shard[q] = vals[h];
    }
    free(keys);
    free(vals);
    return q < sc->nslots ? SC_EPLAN : SC_OK;
}

int sc__sched_order(sc__sched *sc, const uint64_t *shard_first, uint64_t nshards,
                    uint64_t bound)
{
    if (bound > sc->nslots)
        bound = sc->nslots;
    uint32_t *shards = malloc(sizeof *shards * (bound + 1));
    uint32_t *at = malloc(sizeof *at * (sc->nslots + 1));
    uint64_t n = 0;
    int rc = shards && at ? sched_first_use(sc, shard_first, nshards, bound, shards, at, &n)
                          : SC_ENOMEM;
    if (rc != SC_OK) {
        free(shards);
        free(at);
        return rc;
    }
    free(sc->shards);
    free(sc->slot_shard);
    sc->shards = shards, sc->slot_shard = at, sc->nshards = n;
    return SC_OK;
}

uint64_t sc__sched_bound(const sc_plan *plan, uint32_t rank, uint64_t nslots, uint64_t nshards)
{
    uint64_t bound = nslots < nshards ? nslots : nshards;
    if (plan) {
        sc_plan_info in;
        sc_plan_rank(plan, rank, NULL, &bound, NULL);
        sc_plan_get_info(plan, &in);
        bound += in.cuts + 1; /* shards cut to it; the dup-shard fault reads one twice */
    }
    return bound;
}
