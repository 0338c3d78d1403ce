/*
 * plan_obj.c - the plan object: its arrays, what is derived from them (the
 * owner table, the cuts by shard, the pieces a unit serves), its
 * accessors, and freeing it.  The planner (plan.c, plan_cut.c) and the wire
 * decoder (plan_codec.c) both build plans with it, so neither depends on
 * the other.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plan_state.h"

void sc__plan_fill_owner(sc_plan *p)
{
    for (uint32_t u = 0; u < p->units; u++)
        for (uint64_t i = p->unit_off[u]; i < p->unit_off[u + 1]; i++)
            p->owner[p->order[i]] = u;
}

static int plan_obj_cmp_cut(const void *a, const void *b)
{
    const sc__cut *x = a, *y = b;
    if (x->shard != y->shard)
        return (x->shard > y->shard) - (x->shard < y->shard);
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int plan_obj_cmp_to(const void *a, const void *b)
{
    const sc__cut *x = a, *y = b;
    if (x->to != y->to)
        return (x->to > y->to) - (x->to < y->to);
    return plan_obj_cmp_cut(a, b);
}

void sc__plan_index_cuts(sc_plan *p)
{
    memcpy(p->by_shard, p->cuts, sizeof *p->cuts * p->info.cuts);
    qsort(p->by_shard, p->info.cuts, sizeof *p->by_shard, plan_obj_cmp_cut);
    memcpy(p->by_to, p->cuts, sizeof *p->cuts * p->info.cuts);
    qsort(p->by_to, p->info.cuts, sizeof *p->by_to, plan_obj_cmp_to);
}

/*
 * The first of n cuts, sorted by the field at byte `at` (shard or to),
 * whose field is at least v: one binary search for both indexes.
 */
static uint64_t plan_obj_lower(const sc__cut *c, uint64_t n, size_t at, uint32_t v)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint32_t key;
        memcpy(&key, (const char *)&c[mid] + at, sizeof key);
        if (key < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first cut to unit u in by_to, or info.cuts when none is. */
static uint64_t plan_obj_first_to(const sc_plan *p, uint32_t u)
{
    return plan_obj_lower(p->by_to, p->info.cuts, offsetof(sc__cut, to), u);
}

/* The first of shard s's cuts in by_shard, or info.cuts when it has none. */
static uint64_t plan_obj_first_cut(const sc_plan *p, uint32_t s)
{
    uint64_t i = plan_obj_lower(p->by_shard, p->info.cuts, offsetof(sc__cut, shard), s);
    return i < p->info.cuts && p->by_shard[i].shard == s ? i : p->info.cuts;
}

/* Cuts take a shard's tail: its home keeps what lies before the first. */
uint64_t sc__plan_kept(const sc_plan *p, uint32_t s, uint64_t size)
{
    uint64_t i = plan_obj_first_cut(p, s);
    return i < p->info.cuts ? p->by_shard[i].lo : size;
}

uint32_t sc__plan_unit_of(const sc_plan *p, uint32_t s, uint64_t off)
{
    for (uint64_t i = plan_obj_first_cut(p, s); i < p->info.cuts && p->by_shard[i].shard == s;
         i++)
        if (off >= p->by_shard[i].lo && off < p->by_shard[i].hi)
            return p->by_shard[i].to;
    return p->owner[s];
}

int sc__plan_visit(const sc_plan *p, uint32_t u, const uint64_t *first, sc__piece_fn fn,
                   void *ctx)
{
    int rc = 0;
    for (uint64_t i = p->unit_off[u]; i < p->unit_off[u + 1] && !rc; i++) {
        uint32_t s = p->order[i];
        uint64_t kept = p->info.cuts ? sc__plan_kept(p, s, first[s + 1] - first[s])
                                     : first[s + 1] - first[s];
        if (kept)
            rc = fn(ctx, s, 0, kept);
    }
    for (uint64_t c = plan_obj_first_to(p, u); c < p->info.cuts && p->by_to[c].to == u && !rc;
         c++)
        rc = fn(ctx, p->by_to[c].shard, p->by_to[c].lo, p->by_to[c].hi);
    return rc;
}

void sc__plan_rank_extremes(sc_plan *p)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t r = 0; r < p->info.world_size; r++) {
        uint32_t u0, u1;
        uint64_t sum = 0;
        sc__plan_rank_units(p, r, &u0, &u1);
        for (uint32_t u = u0; u < u1; u++)
            sum += p->unit_samples[u];
        lo = sum < lo ? sum : lo;
        hi = sum > hi ? sum : hi;
    }
    p->info.min_rank_samples = lo;
    p->info.max_rank_samples = hi;
}

int sc__plan_alloc(uint32_t world_size, uint32_t units, uint64_t nshards, sc_plan **out,
                   sc_error *err)
{
    sc_plan *p = calloc(1, sizeof *p);
    uint64_t maxcuts = SC__PLAN_MAX_CUTS(units) + 1;
    if (p) {
        p->order = malloc(sizeof *p->order * nshards);
        p->owner = malloc(sizeof *p->owner * nshards);
        p->unit_off = malloc(sizeof *p->unit_off * ((size_t)units + 1));
        p->unit_samples = malloc(sizeof *p->unit_samples * units);
        p->cuts = malloc(sizeof *p->cuts * maxcuts);
        p->by_shard = malloc(sizeof *p->by_shard * maxcuts);
        p->by_to = malloc(sizeof *p->by_to * maxcuts);
    }
    if (!p || !p->order || !p->owner || !p->unit_off || !p->unit_samples || !p->cuts ||
        !p->by_shard || !p->by_to) {
        sc_plan_free(p);
        return sc__seterr(err, SC_ENOMEM,
                          "no memory for a plan of %llu shards on %u units",
                          (unsigned long long)nshards, units);
    }
    p->info.world_size = world_size;
    p->info.nshards = nshards;
    p->units = units;
    *out = p;
    return SC_OK;
}

void sc_plan_free(sc_plan *plan)
{
    if (!plan)
        return;
    free(plan->order);
    free(plan->owner);
    free(plan->unit_off);
    free(plan->unit_samples);
    free(plan->cuts);
    free(plan->by_shard);
    free(plan->by_to);
    free(plan->wire);
    free(plan);
}

/* Without a previous plan of the same size nothing counts as moved. */
uint64_t sc__plan_moved(const sc_plan *plan, const sc_plan *prev)
{
    uint64_t moved = 0, n = plan->info.nshards;
    if (prev && prev->info.nshards == n && prev->units == plan->units)
        for (uint64_t s = 0; s < n; s++)
            moved += plan->owner[s] != prev->owner[s];
    return moved;
}

/* Whether shard s's home keeps none of it (a cut from its sample 0). */
static int plan_obj_all_cut(const sc_plan *p, uint32_t s)
{
    uint64_t i = plan_obj_first_cut(p, s);
    return i < p->info.cuts && p->by_shard[i].lo == 0;
}

static int plan_obj_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int sc__plan_reads(const sc_plan *p, uint32_t rank, uint32_t **out, uint64_t *n)
{
    uint32_t u0, u1;
    sc__plan_rank_units(p, rank, &u0, &u1);
    uint64_t lo = p->unit_off[u0], hi = p->unit_off[u1], k = 0;
    uint64_t c0 = plan_obj_first_to(p, u0), c1 = plan_obj_first_to(p, u1);
    uint32_t *list = malloc(sizeof *list * (hi - lo + c1 - c0 + 1));
    if (!list)
        return SC_ENOMEM;
    for (uint64_t i = lo; i < hi; i++)
        if (!p->info.cuts || !plan_obj_all_cut(p, p->order[i]))
            list[k++] = p->order[i];
    /* The shards cut to its units that it does not read as a home: each once. */
    uint64_t homes = k;
    for (uint64_t c = c0; c < c1; c++) {
        uint32_t s = p->by_to[c].shard;
        if (p->owner[s] < u0 || p->owner[s] >= u1 || plan_obj_all_cut(p, s))
            list[k++] = s;
    }
    qsort(list + homes, k - homes, sizeof *list, plan_obj_cmp_u32);
    uint64_t m = homes;
    for (uint64_t i = homes; i < k; i++)
        if (i == homes || list[i] != list[i - 1])
            list[m++] = list[i];
    *out = list;
    *n = m;
    return SC_OK;
}

int sc__plan_reads_shard(const sc_plan *p, uint32_t rank, uint32_t s)
{
    uint32_t u0, u1;
    sc__plan_rank_units(p, rank, &u0, &u1);
    if (p->owner[s] >= u0 && p->owner[s] < u1 && !plan_obj_all_cut(p, s))
        return 1;
    for (uint64_t i = plan_obj_first_cut(p, s); i < p->info.cuts && p->by_shard[i].shard == s;
         i++)
        if (p->by_shard[i].to >= u0 && p->by_shard[i].to < u1)
            return 1;
    return 0;
}

/* ---- accessors ------------------------------------------------------------ */

int sc_plan_get_info(const sc_plan *plan, sc_plan_info *out)
{
    if (!plan || !out)
        return SC_EINVAL;
    *out = plan->info;
    return SC_OK;
}

int sc_plan_rank(const sc_plan *plan, uint32_t rank, const uint32_t **shards,
                 uint64_t *nshards, uint64_t *samples)
{
    if (!plan || rank >= plan->info.world_size)
        return SC_EINVAL;
    uint32_t u0, u1;
    sc__plan_rank_units(plan, rank, &u0, &u1);
    uint64_t lo = plan->unit_off[u0], sum = 0;
    for (uint32_t u = u0; u < u1; u++)
        sum += plan->unit_samples[u];
    if (shards)
        *shards = plan->order + lo;
    if (nshards)
        *nshards = plan->unit_off[u1] - lo;
    if (samples)
        *samples = sum;
    return SC_OK;
}

int sc_plan_owner(const sc_plan *plan, uint64_t shard, uint32_t *rank)
{
    if (!plan || !rank || shard >= plan->info.nshards)
        return SC_EINVAL;
    *rank = sc__plan_unit_rank(plan, plan->owner[shard]);
    return SC_OK;
}

int sc_plan_get_cut(const sc_plan *plan, uint64_t i, sc_plan_cut *out)
{
    if (!plan || !out || i >= plan->info.cuts)
        return SC_EINVAL;
    const sc__cut *c = &plan->cuts[i];
    *out = (sc_plan_cut){.shard = c->shard, .begin = c->lo, .end = c->hi,
                         .from = sc__plan_unit_rank(plan, c->from),
                         .to = sc__plan_unit_rank(plan, c->to), .from_unit = c->from,
                         .to_unit = c->to}; /* reserved[] zeroed */
    return SC_OK;
}

int sc_plan_sample_owner(const sc_plan *plan, const uint64_t *first, uint64_t id,
                         uint32_t *rank)
{
    uint64_t s = 0;
    if (!plan || !rank || sc__shard_of(first, plan->info.nshards, id, &s) != SC_OK)
        return SC_EINVAL;
    uint32_t u = sc__plan_unit_of(plan, (uint32_t)s, id - first[s]);
    *rank = sc__plan_unit_rank(plan, u);
    return SC_OK;
}

int sc__shard_of(const uint64_t *first, uint64_t nshards, uint64_t id, uint64_t *shard)
{
    if (!first || !shard || !nshards || id >= first[nshards])
        return SC_EINVAL;
    uint64_t lo = 0, hi = nshards;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (first[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    *shard = lo;
    return SC_OK;
}
