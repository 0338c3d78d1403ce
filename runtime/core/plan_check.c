/*
 * plan_check.c - verifying a plan (sc_plan_check): every property it
 * promises, against the inputs it was made from.  (Validating the inputs
 * themselves, sc_plan_params_check, is plan_params.c's.)
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plan_state.h"

/*
 * Unit u's list: each shard in range, not listed before, owned by u; the
 * offsets start at 0 and never go back.
 */
static int check_unit(const sc_plan *plan, uint32_t u, unsigned char *seen, sc_error *err)
{
    unsigned long long e = (unsigned long long)plan->info.epoch;
    uint64_t n = plan->info.nshards;

    if (u == 0 ? plan->unit_off[0] != 0 : plan->unit_off[u] < plan->unit_off[u - 1])
        return sc__seterr(err, SC_EPLAN, "epoch %llu: bad offsets", e);
    for (uint64_t i = plan->unit_off[u]; i < plan->unit_off[u + 1]; i++) {
        uint32_t s = plan->order[i];
        if (s >= n)
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: shard %u is out of range (unit %u, %llu shards)", e,
                              s, u, (unsigned long long)n);
        if (seen[s]++)
            return sc__seterr(err, SC_EPLAN, "epoch %llu: shard %u is listed twice (unit %u)",
                              e, s, u);
        if (plan->owner[s] != u)
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: shard %u is listed by unit %u, its home is unit %u",
                              e, s, u, plan->owner[s]);
    }
    return SC_OK;
}

/* Every shard has exactly one home, and its home is the unit whose list has it. */
static int check_lists(const sc_plan *plan, sc_error *err)
{
    uint64_t n = plan->info.nshards;
    int rc = SC_OK;
    unsigned char *seen = calloc(n, 1);
    if (!seen)
        return sc__seterr(err, SC_ENOMEM, "no memory to check the plan");
    for (uint32_t u = 0; u < plan->units && rc == SC_OK; u++)
        rc = check_unit(plan, u, seen, err);
    for (uint64_t s = 0; s < n && rc == SC_OK; s++)
        if (!seen[s])
            rc = sc__seterr(err, SC_EPLAN, "epoch %llu: shard %llu has no home",
                            (unsigned long long)plan->info.epoch, (unsigned long long)s);
    free(seen);
    return rc;
}

/*
 * The cuts: at most 2 (U - 1); each a non-empty range of its shard, from
 * its home to another unit; a shard's cuts never overlap and, with what
 * its home keeps, cover it: every sample is served exactly once.
 */
static int check_cuts(const sc_plan *plan, const uint64_t *sizes, sc_error *err)
{
    unsigned long long e = (unsigned long long)plan->info.epoch;
    uint64_t nc = plan->info.cuts;
    if (nc > SC__PLAN_MAX_CUTS(plan->units))
        return sc__seterr(err, SC_EPLAN, "epoch %llu: %llu cuts, more than 2 x (%u - 1)", e,
                          (unsigned long long)nc, plan->units);
    for (uint64_t i = 0; i < nc; i++) {
        const sc__cut *c = &plan->by_shard[i];
        if (c->shard >= plan->info.nshards || c->to >= plan->units || c->to == c->from ||
            c->from != plan->owner[c->shard] || c->lo >= c->hi || c->hi > sizes[c->shard])
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: cut %llu (shard %u, [%llu, %llu), unit %u to %u) "
                              "is not a range of its shard from its home to another unit",
                              e, (unsigned long long)i, c->shard, (unsigned long long)c->lo,
                              (unsigned long long)c->hi, c->from, c->to);
        int last = i + 1 == nc || plan->by_shard[i + 1].shard != c->shard;
        uint64_t next = last ? sizes[c->shard] : plan->by_shard[i + 1].lo;
        if (c->hi != next)
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: shard %u's cuts overlap or leave a gap at sample %llu",
                              e, c->shard, (unsigned long long)c->hi);
    }
    return SC_OK;
}

/* Sums the samples of the pieces visited. */
static int check_add(void *ctx, uint32_t shard, uint64_t lo, uint64_t hi)
{
    (void)shard;
    *(uint64_t *)ctx += hi - lo;
    return 0;
}

/*
 * Every unit serves what its pieces hold, and its target: exactly under
 * pad, at least under drop (its extra is dropped).  shard_first is built
 * from the sizes.
 */
static int check_served(const sc_plan *plan, const uint64_t *first, uint64_t total,
                        sc_error *err)
{
    unsigned long long e = (unsigned long long)plan->info.epoch;
    int drop = plan->info.remainder == SC_REMAINDER_DROP;
    for (uint32_t u = 0; u < plan->units; u++) {
        uint64_t sum = 0, want = sc__plan_target(plan, u, total);
        sc__plan_visit(plan, u, first, check_add, &sum);
        if (sum != plan->unit_samples[u])
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: unit %u's pieces hold %llu samples, the plan says "
                              "%llu", e, u, (unsigned long long)sum,
                              (unsigned long long)plan->unit_samples[u]);
        if (drop ? sum < want : sum != want)
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: unit %u serves %llu samples; remainder=%s needs %s%llu",
                              e, u, (unsigned long long)sum, drop ? "drop" : "pad",
                              drop ? "at least " : "", (unsigned long long)want);
    }
    return SC_OK;
}

/*
 * Equal batches and the remainder: b = floor or ceil(N / (R B)), and what
 * drop leaves out or pad repeats is below one global batch, R x B.
 */
static int check_batches(const sc_plan *plan, uint64_t total, sc_error *err)
{
    const sc_plan_info *in = &plan->info;
    unsigned long long e = (unsigned long long)in->epoch;
    uint64_t G = (uint64_t)in->world_size * in->batch_size, b = in->batches_per_rank;
    int drop = in->remainder == SC_REMAINDER_DROP;
    uint64_t want = drop ? total / G : total / G + (total % G != 0);
    if (in->total_samples != total)
        return sc__seterr(err, SC_EPLAN, "epoch %llu: the plan says %llu samples, the shards "
                          "hold %llu", e, (unsigned long long)in->total_samples,
                          (unsigned long long)total);
    if (b != want || !b)
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: %llu batches per rank; %llu samples in batches of %llu "
                          "on %u ranks give %llu with remainder=%s",
                          e, (unsigned long long)b, (unsigned long long)total,
                          (unsigned long long)in->batch_size, in->world_size,
                          (unsigned long long)want, drop ? "drop" : "pad");
    uint64_t all = b * G;
    if (in->dropped != (drop ? total - all : 0) || in->padded != (drop ? 0 : all - total))
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: %llu dropped and %llu padded do not add up to %llu "
                          "batches of %llu on %u ranks",
                          e, (unsigned long long)in->dropped, (unsigned long long)in->padded,
                          (unsigned long long)b, (unsigned long long)in->batch_size,
                          in->world_size);
    if ((drop ? in->dropped : in->padded) >= G)
        return sc__seterr(err, SC_EPLAN, "epoch %llu: %llu samples %s, a global batch (%llu) "
                          "or more", e, (unsigned long long)(drop ? in->dropped : in->padded),
                          drop ? "dropped" : "padded", (unsigned long long)G);
    return SC_OK;
}

static int check_moved(const sc_plan *plan, const sc_plan *prev, sc_error *err)
{
    uint64_t moved = sc__plan_moved(plan, prev);
    if (moved != plan->info.moved)
        return sc__seterr(err, SC_EPLAN, "epoch %llu: %llu shards moved, the plan says %llu",
                          (unsigned long long)plan->info.epoch, (unsigned long long)moved,
                          (unsigned long long)plan->info.moved);
    return SC_OK;
}

/* Determinism: the same inputs give the same bytes. */
static int check_replan(const sc_plan *plan, const sc_plan_params *params,
                        const sc_plan *prev, sc_error *err)
{
    unsigned long long e = (unsigned long long)plan->info.epoch;
    sc_plan *again = NULL;
    int rc = sc_plan_create(params, prev, &again, err);
    if (rc != SC_OK)
        return sc__errctx(err, rc, "epoch %llu: re-planning failed", e);
    int same = again->wire_len == plan->wire_len &&
               memcmp(again->wire, plan->wire, plan->wire_len) == 0;
    sc_plan_free(again);
    if (!same)
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: re-planning the same inputs gave different bytes "
                          "(hash %016llx)", e, (unsigned long long)plan->info.hash);
    return SC_OK;
}

int sc__plan_check_pieces(const sc_plan *plan, const uint64_t *sizes, const uint64_t *first,
                          sc_error *err)
{
    int rc = check_cuts(plan, sizes, err);
    return rc == SC_OK ? check_served(plan, first, first[plan->info.nshards], err) : rc;
}

/* The checks that need each shard's first sample id. */
static int check_samples(const sc_plan *plan, const sc_plan_params *params, sc_error *err)
{
    uint64_t n = params->nshards;
    uint64_t *first = malloc(sizeof *first * (n + 1));
    if (!first)
        return sc__seterr(err, SC_ENOMEM, "no memory to check the plan");
    first[0] = 0;
    for (uint64_t s = 0; s < n; s++)
        first[s + 1] = first[s] + params->shard_sizes[s];
    int rc = sc__plan_check_pieces(plan, params->shard_sizes, first, err);
    free(first);
    return rc;
}

int sc_plan_check(const sc_plan *plan, const sc_plan_params *params, const sc_plan *prev,
                  sc_error *err)
{
    uint64_t total = 0;
    int rc;
    if (!plan)
        return sc__seterr(err, SC_EINVAL, "plan is NULL");
    if ((rc = sc_plan_params_check(params, err)) != SC_OK)
        return sc__errctx(err, rc, "epoch %llu", (unsigned long long)plan->info.epoch);
    for (uint64_t s = 0; s < params->nshards; s++)
        total += params->shard_sizes[s];
    if ((rc = sc__plan_matches(plan, params, 0, err)) == SC_OK &&
        (rc = check_lists(plan, err)) == SC_OK &&
        (rc = check_batches(plan, total, err)) == SC_OK &&
        (rc = check_samples(plan, params, err)) == SC_OK &&
        (rc = check_moved(plan, prev, err)) == SC_OK &&
        (rc = check_replan(plan, params, prev, err)) == SC_OK)
        rc = sc__errok(err);
    return rc;
}
