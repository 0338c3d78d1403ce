/*
 * plan_params.c - validating a plan's inputs (sc_plan_params_check at
 * open, sc__plan_params_validate at each epoch): whether a job with these
 * parameters can plan at all, before any assignment.  Not to be confused
 * with verifying a plan once made (sc_plan_check, plan_check.c).
 */
#include "error.h"
#include "plan_state.h"

/*
 * The checks of the parameters alone, which sc_plan_params_check runs at
 * open and sc__plan_params_validate at each epoch: their words say no
 * epoch, the epoch's caller adds it.
 */

/* The counts every later step sizes its arrays and loops by. */
static int params_counts(const sc_plan_params *p, sc_error *err)
{
    if (p->nshards == 0)
        return sc__seterr(err, SC_EINVAL, "the dataset has zero shards");
    if (!p->shard_sizes)
        return sc__seterr(err, SC_EINVAL, "shard sizes are NULL for %llu shards",
                          (unsigned long long)p->nshards);
    if (p->nshards > SC__PLAN_MAX_SHARDS)
        return sc__seterr(err, SC_EOVERFLOW,
                          "%llu shards is more than the %llu a plan can hold",
                          (unsigned long long)p->nshards,
                          (unsigned long long)SC__PLAN_MAX_SHARDS);
    if (p->world_size == 0)
        return sc__seterr(err, SC_EINVAL, "world size is 0");
    if (p->world_size > p->nshards)
        return sc__seterr(err, SC_EINVAL,
                          "more ranks (%u) than shards (%llu); "
                          "every rank needs at least one shard",
                          p->world_size, (unsigned long long)p->nshards);
    if (p->batch_size == 0)
        return sc__seterr(err, SC_EINVAL, "batch size is 0");
    return SC_OK;
}

static int params_policy(const sc_plan_params *p, sc_error *err)
{
    if (p->mode != SC_SHUFFLE_GLOBAL && p->mode != SC_SHUFFLE_STICKY)
        return sc__seterr(err, SC_EINVAL, "unknown shuffle mode %d", (int)p->mode);
    if (p->remainder != SC_REMAINDER_DROP && p->remainder != SC_REMAINDER_PAD)
        return sc__seterr(err, SC_EINVAL, "unknown remainder policy %d",
                          (int)p->remainder);
    if (!(p->exchange >= 0.0 && p->exchange <= 1.0)) /* also rejects NaN */
        return sc__seterr(err, SC_EINVAL, "exchange fraction %g is outside [0,1]",
                          p->exchange);
    return SC_OK;
}

/* Every shard non-empty; also the total and the largest, which bound balance. */
static int params_sizes(const sc_plan_params *p, uint64_t *total,
                            uint64_t *largest, sc_error *err)
{
    uint64_t sum = 0, big = 0;

    for (uint64_t s = 0; s < p->nshards; s++) {
        uint64_t n = p->shard_sizes[s];
        if (n == 0)
            return sc__seterr(err, SC_EINVAL, "shard %llu has no samples",
                              (unsigned long long)s);
        if (__builtin_add_overflow(sum, n, &sum))
            return sc__seterr(err, SC_EOVERFLOW,
                              "shard sizes overflow 64 bits at shard %llu",
                              (unsigned long long)s);
        if (n > big)
            big = n;
    }
    *total = sum;
    *largest = big;
    return SC_OK;
}

/*
 * Partitions: rank r serves partitions [r P/R, (r+1) P/R), each giving
 * R x B / P samples to every batch of its rank.
 */
static int params_partitions(const sc_plan_params *p, uint64_t G, sc_error *err)
{
    uint64_t P = p->partitions, R = p->world_size;
    if (!P)
        return SC_OK;
    if (P > SC__PLAN_MAX_SHARDS)
        return sc__seterr(err, SC_EINVAL, "SC_PARTITIONS=%llu is more than the %llu a plan can "
                          "hold", (unsigned long long)P, (unsigned long long)SC__PLAN_MAX_SHARDS);
    if (P % R)
        return sc__seterr(err, SC_EINVAL,
                          "SC_PARTITIONS=%llu is not a multiple of the %llu ranks: each rank "
                          "serves P/R of them (use a world size that divides it)",
                          (unsigned long long)P, (unsigned long long)R);
    if (P > p->nshards)
        return sc__seterr(err, SC_EINVAL,
                          "SC_PARTITIONS=%llu is more than the %llu shards: every partition "
                          "needs a shard (use smaller shards or fewer partitions)",
                          (unsigned long long)P, (unsigned long long)p->nshards);
    if (G % P)
        return sc__seterr(err, SC_EINVAL,
                          "the global batch, %llu ranks x %llu = %llu samples, is not a "
                          "multiple of SC_PARTITIONS=%llu: each partition gives G/P samples "
                          "to every global batch",
                          (unsigned long long)R, (unsigned long long)p->batch_size,
                          (unsigned long long)G, (unsigned long long)P);
    return SC_OK;
}

/*
 * Whether every epoch can fill its batches: the remainder is cut at sample
 * granularity (plan_cut.c), so with drop the dataset must fill one global
 * batch, R x B; with partitions and pad too (a partition's repeats must
 * fall in its last batch).  R x B must not overflow.
 */
static int params_fill(const sc_plan_params *p, uint64_t total, sc_error *err)
{
    uint64_t R = p->world_size, B = p->batch_size, G = 0;
    if (__builtin_mul_overflow(R, B, &G))
        return sc__seterr(err, SC_EOVERFLOW, "%llu ranks x batch size %llu overflows 64 bits",
                          (unsigned long long)R, (unsigned long long)B);
    int rc = params_partitions(p, G, err);
    if (rc != SC_OK || total >= G || (p->remainder == SC_REMAINDER_PAD && !p->partitions))
        return rc;
    if (p->partitions) /* the batch that fits: R x B <= total, and P/R divides B */
        return sc__seterr(err, SC_EINVAL,
                          "%llu samples are less than one global batch (%llu ranks x %llu = "
                          "%llu): with SC_PARTITIONS=%llu an epoch needs one, under drop and "
                          "pad; use a batch size of at most %llu (a multiple of P/R = %llu)",
                          (unsigned long long)total, (unsigned long long)R,
                          (unsigned long long)B, (unsigned long long)G,
                          (unsigned long long)p->partitions,
                          (unsigned long long)(total / p->partitions * (p->partitions / R)),
                          (unsigned long long)(p->partitions / R));
    return sc__seterr(err, SC_EINVAL,
                      "%llu samples cannot give each of %llu ranks a batch of %llu with "
                      "remainder=drop: that takes %llu samples (%llu x %llu); remainder=pad, "
                      "or a batch size of at most %llu, would",
                      (unsigned long long)total, (unsigned long long)R, (unsigned long long)B,
                      (unsigned long long)G, (unsigned long long)R, (unsigned long long)B,
                      (unsigned long long)(total / R));
}

int sc_plan_params_check(const sc_plan_params *p, sc_error *err)
{
    uint64_t total = 0, largest = 0;
    int rc;
    if (!p)
        return sc__seterr(err, SC_EINVAL, "plan parameters are NULL");
    if ((rc = params_counts(p, err)) == SC_OK && (rc = params_policy(p, err)) == SC_OK &&
        (rc = params_sizes(p, &total, &largest, err)) == SC_OK &&
        (rc = params_fill(p, total, err)) == SC_OK)
        rc = sc__errok(err);
    return rc;
}

/* Sticky mode keeps prev's owners, so prev must describe the same job. */
static int params_prev(const sc_plan_params *p, const sc_plan *prev,
                           sc_error *err)
{
    if (prev && p->mode == SC_SHUFFLE_STICKY &&
        (prev->info.nshards != p->nshards || prev->units != sc__plan_units_of(p)))
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: the previous plan (epoch %llu) has "
                          "%llu shards on %u units, this one %llu on %u",
                          (unsigned long long)p->epoch,
                          (unsigned long long)prev->info.epoch,
                          (unsigned long long)prev->info.nshards,
                          prev->units, (unsigned long long)p->nshards,
                          sc__plan_units_of(p));
    return SC_OK;
}

int sc__plan_params_validate(const sc_plan_params *p, const sc_plan *prev, uint64_t *total,
                             uint64_t *largest, sc_error *err)
{
    uint64_t sum = 0, big = 0;
    int rc;

    if (!p)
        return sc__seterr(err, SC_EINVAL, "plan parameters are NULL");
    if ((rc = params_counts(p, err)) != SC_OK || (rc = params_policy(p, err)) != SC_OK ||
        (rc = params_sizes(p, &sum, &big, err)) != SC_OK ||
        (rc = params_fill(p, sum, err)) != SC_OK)
        return sc__errctx(err, rc, "epoch %llu", (unsigned long long)p->epoch);
    if ((rc = params_prev(p, prev, err)) == SC_OK) {
        *total = sum;
        *largest = big;
    }
    return rc;
}
