/*
 * resume.c - the resumption of an interrupted epoch from checkpoint
 * records (their bytes: ckpt.c).
 */
#include "resume.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "plan.h"
#include "source.h"

static int resume_cmp_rank(const void *a, const void *b)
{
    const sc__ckpt *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

void sc__ckpt_settings(const sc_config *cfg, sc__ckpt *c)
{
    c->seed = cfg->seed;
    c->mode = (uint64_t)cfg->mode;
    c->exchange_bits = sc__double_bits(cfg->exchange);
    c->remainder = (uint64_t)cfg->remainder;
    c->batch = cfg->batch_size;
    c->window = cfg->shuffle_window;
}

/* The settings a resumed job must share with the checkpointed one, named as the config's. */
enum { NSETTINGS = 6 };
static const char *const setting_names[NSETTINGS] = {
    "SC_SEED", "SC_SHUFFLE", "SC_EXCHANGE", "SC_REMAINDER", "SC_BATCH_SIZE", "SC_SHUFFLE_WINDOW"};

static void resume_settings_of(const sc__ckpt *c, uint64_t w[NSETTINGS])
{
    const uint64_t v[NSETTINGS] = {c->seed, c->mode, c->exchange_bits, c->remainder, c->batch,
                                   c->window};
    memcpy(w, v, sizeof v);
}

int sc__ckpt_check(sc__ckpt *ck, int n, const sc_dataset *ds, const sc_config *cfg,
                   sc_error *err)
{
    if (n < 1)
        return sc__seterr(err, SC_EINVAL, "no checkpoints to resume from");
    qsort(ck, (size_t)n, sizeof *ck, resume_cmp_rank);
    const sc__ckpt *a = &ck[0];
    uint64_t was[NSETTINGS], is[NSETTINGS];
    resume_settings_of(a, was);
    if (a->world != (uint64_t)n)
        return sc__seterr(err, SC_EINVAL,
                          "the checkpoints are of a %llu-rank job: all %llu are needed, %d given",
                          (unsigned long long)a->world, (unsigned long long)a->world, n);
    for (int i = 0; i < n; i++) {
        const sc__ckpt *c = &ck[i];
        if (c->rank != (uint64_t)i)
            return sc__seterr(err, SC_EINVAL, "checkpoint of rank %d is missing (or given twice)",
                              i);
        if (c->epoch != a->epoch)
            return sc__seterr(err, SC_EINVAL,
                              "checkpoints from different epochs: rank 0's is of epoch %llu, "
                              "rank %d's of epoch %llu",
                              (unsigned long long)a->epoch, i, (unsigned long long)c->epoch);
        resume_settings_of(c, is);
        if (c->world != a->world || memcmp(is, was, sizeof is) != 0 ||
            c->fingerprint != a->fingerprint || c->nshards != a->nshards ||
            c->batches != a->batches)
            return sc__seterr(err, SC_EINVAL,
                              "checkpoints of different jobs: rank %d's inputs differ from "
                              "rank 0's",
                              i);
        if (c->consumed > c->batches)
            return sc__seterr(err, SC_EFORMAT, "checkpoint of rank %d: %llu of %llu batches",
                              i, (unsigned long long)c->consumed,
                              (unsigned long long)c->batches);
    }
    if (a->fingerprint != ds->fingerprint || a->nshards != ds->nshards)
        return sc__seterr(err, SC_EINVAL,
                          "the checkpoints are of another dataset (fingerprint %016llx, %llu "
                          "shards); '%s' is %016llx, %llu shards",
                          (unsigned long long)a->fingerprint, (unsigned long long)a->nshards,
                          ds->path, (unsigned long long)ds->fingerprint,
                          (unsigned long long)ds->nshards);
    sc__ckpt now;
    sc__ckpt_settings(cfg, &now);
    resume_settings_of(&now, is);
    for (int i = 0; i < NSETTINGS; i++) {
        if (was[i] == is[i])
            continue;
        if (!strcmp(setting_names[i], "SC_SHUFFLE_WINDOW")) /* auto hides the number */
            return sc__seterr(err, SC_EINVAL,
                              "the checkpoints were taken with SC_SHUFFLE_WINDOW of %llu "
                              "samples, this job's is %llu (auto is half of SC_STREAM_BYTES' "
                              "samples): resume with the same settings",
                              (unsigned long long)was[i], (unsigned long long)is[i]);
        return sc__seterr(err, SC_EINVAL,
                          "the checkpoints were taken with another %s than this job's: "
                          "resume with the same settings",
                          setting_names[i]);
    }
    return SC_OK;
}

void sc__resume_free(sc__resume *r)
{
    sc__sched_free(&r->sched);
    free(r->before);
    free(r->dropped_old);
    free(r->dropped_new);
    memset(r, 0, sizeof *r);
}

/* Appends n ids to a growing list. */
static int resume_append(uint64_t **list, uint64_t *len, const uint64_t *ids, uint64_t n)
{
    if (!n)
        return 0;
    uint64_t *g = realloc(*list, sizeof *g * (*len + n));
    if (!g)
        return -1;
    memcpy(g + *len, ids, sizeof *ids * n);
    *list = g;
    *len += n;
    return 0;
}

/*
 * Another number of ranks: the samples left (S, in the old ranks' order)
 * are dealt out in contiguous shares, balanced to within one sample; every
 * share gets the same batch count, by the remainder policy.
 */
static int resume_reslice(const uint64_t *S, uint64_t L, uint32_t world, uint32_t rank, uint64_t B,
                          sc_remainder policy, sc__sched *out)
{
    uint64_t base = L / world, extra = L % world;
    uint64_t len = base + (rank < extra), lo = rank * base + (rank < extra ? rank : extra);
    uint64_t nb = policy == SC_REMAINDER_DROP ? base / B : (base + (extra > 0) + B - 1) / B;
    out->nslots = nb * B;
    out->nreal = len < out->nslots ? len : out->nslots;
    out->ndropped = len > out->nslots ? len - out->nslots : 0;
    out->ids = malloc(sizeof *out->ids * (out->nslots + 1));
    out->dropped = malloc(sizeof *out->dropped * (out->ndropped + 1));
    if (!out->ids || !out->dropped)
        return -1;
    for (uint64_t q = 0; q < out->nslots; q++)
        /* An empty share pads with any sample left. */
        out->ids[q] = len ? S[lo + sc__pad_slot(q, len)] : S[q % L];
    memcpy(out->dropped, S + lo + out->nslots, sizeof *out->dropped * out->ndropped);
    return 0;
}

int sc__resume_compute(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                       uint32_t world, uint32_t rank, sc__resume *out, sc_error *err)
{
    memset(out, 0, sizeof *out);
    const uint32_t old = (uint32_t)ck[0].world;
    const uint64_t B = ck[0].batch, e = ck[0].epoch;
    out->epoch = e;
    sc_plan_params p;
    sc_dataset_plan_params(ds, cfg, old, e, &p);
    sc_plan *plan = NULL;
    int rc = sc__plan_at(&p, NULL, &plan, err);
    if (rc != SC_OK)
        return sc__errctx(err, rc, "resuming epoch %llu of a %u-rank job", (unsigned long long)e,
                          old);
    /* The records' hash is not a key: their batch count must be the plan's. */
    sc_plan_info pi;
    sc_plan_get_info(plan, &pi);
    if (ck[0].batches != UINT64_MAX && ck[0].batches != pi.batches_per_rank) {
        sc_plan_free(plan);
        return sc__seterr(err, SC_EFORMAT,
                          "the checkpoints say epoch %llu has %llu batches per rank; its plan "
                          "has %llu: damaged or not shardcache's records",
                          (unsigned long long)e, (unsigned long long)ck[0].batches,
                          (unsigned long long)pi.batches_per_rank);
    }
    uint64_t *S = NULL, L = 0;
    int oom = 0;
    for (uint32_t q = 0; q < old && rc == SC_OK; q++) {
        sc__sched sq;
        rc = sc__schedule(ds->shard_first, plan, q, B, cfg->shuffle_window, cfg->seed, 0, &sq, err);
        if (rc != SC_OK)
            break;
        uint64_t done = ck[q].consumed * B, ended = ck[q].consumed == ck[q].batches;
        uint64_t delivered = done < sq.nreal ? done : sq.nreal;
        if (rank == 0) {
            /* Its padding too: the verdict's padded covers both runs, as delivered does. */
            out->padded_before += (done < sq.nslots ? done : sq.nslots) - delivered;
            oom |= resume_append(&out->before, &out->nbefore, sq.ids, delivered);
            /* An old rank that ended the epoch recorded its drops then. */
            if (ended)
                oom |= resume_append(&out->dropped_old, &out->ndropped_old, sq.dropped,
                                     sq.ndropped);
            else if (world != old)
                oom |= resume_append(&out->dropped_new, &out->ndropped_new, sq.dropped,
                                     sq.ndropped);
        }
        if (world == old && q == rank) {
            /* The same ranks: this one continues its own schedule at its next batch. */
            out->sched.nslots = sq.nslots - done;
            out->sched.nreal = sq.nreal > done ? sq.nreal - done : 0;
            out->sched.ids = malloc(sizeof *out->sched.ids * (out->sched.nslots + 1));
            oom |= !out->sched.ids;
            if (out->sched.ids)
                memcpy(out->sched.ids, sq.ids + done, sizeof *sq.ids * out->sched.nslots);
            if (!ended) { /* its drops are still to be accounted, at the epoch's end */
                out->sched.dropped = sq.dropped, out->sched.ndropped = sq.ndropped;
                sq.dropped = NULL, sq.ndropped = 0;
            }
        }
        if (world != old && sq.nreal > delivered)
            oom |= resume_append(&S, &L, sq.ids + delivered, sq.nreal - delivered);
        sc__sched_free(&sq);
    }
    if (rc == SC_OK && !oom && world != old)
        oom |= resume_reslice(S, L, world, rank, B, (sc_remainder)ck[0].remainder, &out->sched);
    if (rc == SC_OK && !oom && world == old && !out->sched.dropped)
        oom |= !(out->sched.dropped = malloc(sizeof *out->sched.dropped));
    free(S);
    sc_plan_free(plan);
    if (rc == SC_OK && oom)
        rc = sc__seterr(err, SC_ENOMEM, "rank %u: no memory to resume epoch %llu", rank,
                        (unsigned long long)e);
    if (rc != SC_OK)
        sc__resume_free(out);
    return rc;
}
