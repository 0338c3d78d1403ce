/*
 * resume.c - the resumption of an interrupted epoch from checkpoint
 * records (their bytes: ckpt.c).
 */
#include "resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "plan_state.h"
#include "source.h"
#include "vec.h"

_Static_assert(SC__CKPT_BYTES == SC_CHECKPOINT_BYTES && SC__CKPT_MAX_BYTES == SC_CHECKPOINT_MAX_BYTES,
               "ckpt.h's sizes are the public ones");

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
    c->partitions = cfg->partitions;
}

/*
 * The settings a resumed job must share with the checkpointed one, named as
 * the config's.  With partitions the global batch must stay, world x batch,
 * not the batch: a job of another size keeps the same global batches.
 * SC_PARTITIONS comes first: the batch's meaning depends on it.
 */
enum { S_PARTITIONS, S_SEED, S_SHUFFLE, S_EXCHANGE, S_REMAINDER, S_BATCH, S_WINDOW, NSETTINGS };
static const char *const setting_names[NSETTINGS] = {
    "SC_PARTITIONS", "SC_SEED",       "SC_SHUFFLE",       "SC_EXCHANGE",
    "SC_REMAINDER",  "SC_BATCH_SIZE", "SC_SHUFFLE_WINDOW"};

static void resume_settings_of(const sc__ckpt *c, uint64_t world, uint64_t w[NSETTINGS])
{
    uint64_t batch = c->partitions ? c->batch * world : c->batch;
    const uint64_t v[NSETTINGS] = {c->partitions, c->seed,  c->mode,  c->exchange_bits,
                                   c->remainder,  batch,    c->window};
    memcpy(w, v, sizeof v);
}

/* Setting i's value v in words: the config's names for modes and policies. */
static void resume_setting_text(int i, uint64_t v, char *buf, size_t n)
{
    if (i == S_SHUFFLE)
        snprintf(buf, n, "%s", v == SC_SHUFFLE_STICKY ? "sticky" : "global");
    else if (i == S_REMAINDER)
        snprintf(buf, n, "%s", v == SC_REMAINDER_PAD ? "pad" : "drop");
    else if (i == S_EXCHANGE)
        snprintf(buf, n, "%g", sc__bits_double(v));
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* This job's settings against the records' (rank 0's, a), naming the first that differs. */
static int resume_same_settings(const sc__ckpt *a, const sc_config *cfg, uint64_t world,
                                sc_error *err)
{
    uint64_t was[NSETTINGS], is[NSETTINGS];
    sc__ckpt now;
    sc__ckpt_settings(cfg, &now);
    resume_settings_of(a, a->world, was);
    resume_settings_of(&now, world, is);
    for (int i = 0; i < NSETTINGS; i++) {
        if (was[i] == is[i])
            continue;
        if (i == S_BATCH && a->partitions)
            return sc__seterr(err, SC_EINVAL,
                              "the checkpoints were taken with a global batch of %llu samples "
                              "(%llu ranks x %llu); on %llu ranks SC_PARTITIONS=%llu keeps the "
                              "same global batches only with SC_BATCH_SIZE=%llu, not %llu",
                              (unsigned long long)was[i], (unsigned long long)a->world,
                              (unsigned long long)a->batch, (unsigned long long)world,
                              (unsigned long long)a->partitions,
                              (unsigned long long)(was[i] / world),
                              (unsigned long long)cfg->batch_size);
        char then[32], here[32];
        resume_setting_text(i, was[i], then, sizeof then);
        resume_setting_text(i, is[i], here, sizeof here);
        return sc__seterr(err, SC_EINVAL,
                          "the checkpoints were taken with %s=%s, this job's is %s%s: resume "
                          "with the same settings", setting_names[i], then, here,
                          i == S_WINDOW ? " (samples as resolved: auto, or a window "
                                          "SC_STREAM_BYTES cannot hold, comes to what half "
                                          "of SC_STREAM_BYTES holds in whole shards; set "
                                          "SC_SHUFFLE_WINDOW to the checkpoint's and an "
                                          "SC_STREAM_BYTES that holds it)" : "");
    }
    return SC_OK;
}

int sc__ckpt_check(sc__ckpt *ck, int n, const sc_dataset *ds, const sc_config *cfg,
                   uint64_t world, sc_error *err)
{
    if (n < 1)
        return sc__seterr(err, SC_EINVAL, "no checkpoints to resume from");
    qsort(ck, (size_t)n, sizeof *ck, resume_cmp_rank);
    const sc__ckpt *a = &ck[0];
    uint64_t was[NSETTINGS], is[NSETTINGS];
    resume_settings_of(a, a->world, was);
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
        resume_settings_of(c, c->world, is);
        if (c->world != a->world || memcmp(is, was, sizeof is) != 0 ||
            c->fingerprint != a->fingerprint || c->nshards != a->nshards ||
            c->batches != a->batches || c->resliced != a->resliced || c->world0 != a->world0 ||
            c->batches0 != a->batches0)
            return sc__seterr(err, SC_EINVAL,
                              "checkpoints of different jobs: rank %d's inputs differ from "
                              "rank 0's",
                              i);
        /* Shares of different runs may overlap: a sample would come twice. */
        if (c->run != a->run)
            return sc__seterr(err, SC_EINVAL,
                              "checkpoints of different runs of epoch %llu: rank %d's was "
                              "written by another run than rank 0's",
                              (unsigned long long)a->epoch, i);
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
    return resume_same_settings(a, cfg, world, err);
}

void sc__share_free(sc__share *s)
{
    free(s->pieces);
    memset(s, 0, sizeof *s);
}

void sc__resume_free(sc__resume *r)
{
    sc__sched_free(&r->sched);
    sc__share_free(&r->share);
    free(r->before.v);
    free(r->dropped_old.v);
    free(r->dropped_new.v);
    memset(r, 0, sizeof *r);
}

/* Appends n ids to a growing list. */
static int resume_append(sc__ids *l, const uint64_t *ids, uint64_t n)
{
    if (!n)
        return 0;
    uint64_t *g = sc__vec_grow(l->v, &l->cap, l->n + n, sizeof *g);
    if (!g)
        return -1;
    memcpy(g + l->n, ids, sizeof *ids * n);
    l->v = g;
    l->n += n;
    return 0;
}

/* Appends a piece, merged into the last one when it continues it. */
static int resume_add_piece(sc__piece **list, uint64_t *n, size_t *cap, sc__piece x)
{
    if (*n && (*list)[*n - 1].q == x.q && (*list)[*n - 1].end == x.start) {
        (*list)[*n - 1].end = x.end;
        return 0;
    }
    sc__piece *g = sc__vec_grow(*list, cap, *n + 1, sizeof *g);
    if (!g)
        return -1;
    g[(*n)++] = x;
    *list = g;
    return 0;
}

static uint64_t resume_min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The contiguous share [*lo, *lo + *len) of L samples that `rank` of `world` gets. */
static void resume_deal(uint64_t L, uint32_t world, uint32_t rank, uint64_t *lo, uint64_t *len)
{
    uint64_t base = L / world, extra = L % world;
    *len = base + (rank < extra);
    *lo = rank * base + (rank < extra ? rank : extra);
}

/*
 * Another number of ranks: the samples left (S, in the old ranks' order)
 * are dealt out in contiguous shares, balanced to within one sample; every
 * share gets the same batch count, by the remainder policy.
 */
static int resume_reslice(const uint64_t *S, uint64_t L, uint32_t world, uint32_t rank, uint64_t B,
                          sc_remainder policy, sc__sched *out)
{
    uint64_t base = L / world, extra = L % world, len, lo;
    resume_deal(L, world, rank, &lo, &len);
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

/* The pieces of S (nS of them) that cover positions [lo, lo + len) of it. */
static int resume_share_pieces(const sc__piece *S, uint64_t nS, uint64_t lo, uint64_t len,
                               sc__share *out)
{
    uint64_t at = 0; /* S's position of piece i's start */
    for (uint64_t i = 0; i < nS && len; i++) {
        uint64_t n = S[i].end - S[i].start;
        if (at + n > lo) {
            uint64_t from = lo > at ? lo - at : 0, take = resume_min(n - from, len);
            sc__piece x = {S[i].q, S[i].start + from, S[i].start + from + take};
            if (resume_add_piece(&out->pieces, &out->npieces, &out->cap, x))
                return -1;
            len -= take;
            lo += take;
        }
        at += n;
    }
    return 0;
}

/* Every rank's schedule of the epoch's plan, sq[old]. */
static int resume_schedules(const sc_dataset *ds, const sc_config *cfg, const sc_plan *plan,
                            uint32_t old, uint64_t B, sc__sched **sq, sc_error *err)
{
    if (!(*sq = calloc(old, sizeof **sq)))
        return sc__seterr(err, SC_ENOMEM, "no memory for %u ranks' schedules", old);
    int rc = SC_OK;
    for (uint32_t q = 0; q < old && rc == SC_OK; q++)
        rc = sc__schedule(ds->shard_first, plan, q, B, cfg->shuffle_window, cfg->seed, 0,
                          &(*sq)[q], err);
    return rc;
}

/*
 * Plain records, rank 0: what each old rank delivered (and its padding)
 * before, and the plan's drops: recorded by an old rank that ended the
 * epoch, else now (they were never recorded when another world deals the
 * rest out again).
 */
static int resume_account_plain(const sc__ckpt *ck, const sc__sched *sq, uint32_t old,
                                uint64_t B, int same, sc__resume *out)
{
    int oom = 0;
    for (uint32_t q = 0; q < old; q++) {
        uint64_t done = ck[q].consumed * B, ended = ck[q].consumed == ck[q].batches;
        uint64_t delivered = resume_min(done, sq[q].nreal);
        /* Its padding too: the verdict's padded covers both runs, as delivered does. */
        out->padded_before += resume_min(done, sq[q].nslots) - delivered;
        oom |= resume_append(&out->before, sq[q].ids, delivered);
        if (ended)
            oom |= resume_append(&out->dropped_old, sq[q].dropped,
                                 sq[q].ndropped);
        else if (!same)
            oom |= resume_append(&out->dropped_new, sq[q].dropped,
                                 sq[q].ndropped);
    }
    return oom;
}

/* The same ranks: this one continues its own schedule at its next batch. */
static int resume_continue(sc__sched *sq, const sc__ckpt *c, uint64_t B, sc__resume *out)
{
    uint64_t done = c->consumed * B;
    out->sched.nslots = sq->nslots - done;
    out->sched.nreal = sq->nreal > done ? sq->nreal - done : 0;
    out->sched.ids = malloc(sizeof *out->sched.ids * (out->sched.nslots + 1));
    if (!out->sched.ids)
        return -1;
    memcpy(out->sched.ids, sq->ids + done, sizeof *sq->ids * out->sched.nslots);
    if (c->consumed != c->batches) { /* its drops are still to be accounted, at the end */
        out->sched.dropped = sq->dropped, out->sched.ndropped = sq->ndropped;
        sq->dropped = NULL, sq->ndropped = 0;
    } else if (!(out->sched.dropped = malloc(sizeof *out->sched.dropped))) {
        return -1;
    }
    return 0;
}

/* Plain records: S is each old rank's schedule after what it delivered. */
static int resume_left_plain(const sc__ckpt *ck, const sc__sched *sq, uint32_t old, uint64_t B,
                             sc__piece **S, uint64_t *nS, size_t *capS)
{
    for (uint32_t q = 0; q < old; q++) {
        uint64_t delivered = resume_min(ck[q].consumed * B, sq[q].nreal);
        sc__piece x = {q, delivered, sq[q].nreal};
        if (delivered < sq[q].nreal && resume_add_piece(S, nS, capS, x))
            return -1;
    }
    return 0;
}

static int resume_cmp_piece(const void *a, const void *b)
{
    const sc__piece *x = a, *y = b;
    if (x->q != y->q)
        return (x->q > y->q) - (x->q < y->q);
    return (x->start > y->start) - (x->start < y->start);
}

/*
 * Resliced records: S is their pieces, in rank order.  Each must lie in
 * its plan rank's real samples, and no two overlap (one sample, one
 * owner); `sorted` gets them in canonical order.
 */
static int resume_left_resliced(const sc__ckpt *ck, int n, const sc__sched *sq, sc__piece **S,
                                uint64_t *nS, size_t *capS, sc__piece **sorted, sc_error *err)
{
    for (int r = 0; r < n; r++)
        for (uint64_t i = 0; i < ck[r].npieces; i++) {
            sc__piece x = sc__ckpt_piece(&ck[r], i);
            if (x.end > sq[x.q].nreal)
                return sc__seterr(err, SC_EFORMAT,
                                  "checkpoint of rank %d: its piece [%llu, %llu) of plan rank "
                                  "%llu's samples is past their %llu: damaged or not "
                                  "shardcache's record", r, (unsigned long long)x.start,
                                  (unsigned long long)x.end, (unsigned long long)x.q,
                                  (unsigned long long)sq[x.q].nreal);
            if (resume_add_piece(S, nS, capS, x))
                return sc__seterr(err, SC_ENOMEM, "no memory for the checkpoints' pieces");
        }
    if (!(*sorted = malloc(sizeof **sorted * (*nS + 1))))
        return sc__seterr(err, SC_ENOMEM, "no memory for the checkpoints' pieces");
    memcpy(*sorted, *S, sizeof **S * *nS);
    qsort(*sorted, *nS, sizeof **sorted, resume_cmp_piece);
    for (uint64_t i = 1; i < *nS; i++)
        if ((*sorted)[i].q == (*sorted)[i - 1].q && (*sorted)[i].start < (*sorted)[i - 1].end)
            return sc__seterr(err, SC_EINVAL,
                              "the checkpoints name samples [%llu, %llu) of plan rank %llu "
                              "twice: records of different runs", 
                              (unsigned long long)(*sorted)[i].start,
                              (unsigned long long)(*sorted)[i - 1].end,
                              (unsigned long long)(*sorted)[i].q);
    return SC_OK;
}

/*
 * Resliced records, rank 0: every canonical sample no piece names was
 * delivered or dropped (by a share's remainder, `dropped` of them, which
 * ones the verdict's sums need not know) by the runs before, in their
 * trails; the plan's own drops were recorded by the first of them.
 */
static int resume_account_resliced(const sc__ckpt *ck, int n, const sc__sched *sq,
                                   uint32_t old, const sc__piece *sorted, uint64_t nS,
                                   sc__resume *out, sc_error *err)
{
    int oom = 0;
    uint64_t dropped = 0, k = 0;
    for (int r = 0; r < n; r++)
        dropped += ck[r].dropped, out->padded_before += ck[r].padded;
    for (uint32_t q = 0; q < old; q++) {
        uint64_t at = 0;
        for (; k < nS && sorted[k].q == q; at = sorted[k++].end)
            oom |= resume_append(&out->before, sq[q].ids + at,
                                 sorted[k].start - at);
        oom |= resume_append(&out->before, sq[q].ids + at, sq[q].nreal - at);
        oom |= resume_append(&out->dropped_old, sq[q].dropped,
                             sq[q].ndropped);
    }
    if (oom)
        return sc__seterr(err, SC_ENOMEM, "rank 0: no memory to account the runs before");
    if (dropped > out->before.n)
        return sc__seterr(err, SC_EFORMAT,
                          "the checkpoints say %llu samples were dropped; only %llu are not "
                          "left: damaged or not shardcache's records",
                          (unsigned long long)dropped, (unsigned long long)out->before.n);
    /* The last `dropped` of them count as dropped, in a trail already. */
    out->before.n -= dropped;
    oom |= resume_append(&out->dropped_old, out->before.v + out->before.n,
                         dropped);
    out->share.dropped_before = dropped;
    return oom ? sc__seterr(err, SC_ENOMEM, "rank 0: no memory to account the runs before")
               : SC_OK;
}

/* S's ids (its pieces' samples, in order), dealt out: this rank's schedule and share. */
static int resume_deal_out(const sc__piece *S, uint64_t nS, const sc__sched *sq, uint32_t world,
                           uint32_t rank, uint64_t B, sc_remainder policy, sc__resume *out)
{
    sc__ids ids = {0};
    uint64_t lo, len;
    int oom = 0;
    for (uint64_t i = 0; i < nS && !oom; i++)
        oom |= resume_append(&ids, sq[S[i].q].ids + S[i].start, S[i].end - S[i].start);
    if (!oom)
        oom |= resume_reslice(ids.v, ids.n, world, rank, B, policy, &out->sched);
    resume_deal(ids.n, world, rank, &lo, &len);
    if (!oom)
        oom |= resume_share_pieces(S, nS, lo, len, &out->share);
    out->share.nreal = out->sched.nreal;
    out->share.nslots = out->sched.nslots;
    out->share.ndropped = out->sched.ndropped;
    out->resliced = 1;
    free(ids.v);
    return oom;
}

/*
 * The batch size of the checkpointed epoch's plan, on its `old` ranks:
 * the records' own, or with partitions the global batch's share.
 */
static uint64_t resume_old_batch(const sc__ckpt *c, uint32_t old)
{
    return c->partitions ? c->batch * c->world / old : c->batch;
}

/* The epoch's plan for `old` ranks, checked against the records' batch count. */
static int resume_plan(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                       uint32_t old, sc_plan **plan, uint64_t *batches, sc_error *err)
{
    const uint64_t e = ck[0].epoch;
    sc_plan_params p;
    sc__dataset_plan_params(ds, cfg, old, e, &p);
    p.batch_size = resume_old_batch(&ck[0], old);
    int rc = sc__plan_at(&p, NULL, plan, err);
    if (rc != SC_OK)
        return sc__errctx(err, rc, "resuming epoch %llu of a %u-rank job", (unsigned long long)e,
                          old);
    /* The records' hash is not a key: their batch count must be the plan's. */
    sc_plan_info pi;
    sc_plan_get_info(*plan, &pi);
    uint64_t says = ck[0].resliced ? ck[0].batches0 : ck[0].batches;
    *batches = pi.batches_per_rank;
    if (says != UINT64_MAX && says != pi.batches_per_rank)
        return sc__seterr(err, SC_EFORMAT,
                          "the checkpoints say epoch %llu has %llu batches per rank; its plan "
                          "has %llu: damaged or not shardcache's records",
                          (unsigned long long)e, (unsigned long long)says,
                          (unsigned long long)pi.batches_per_rank);
    return SC_OK;
}

/*
 * The samples left, dealt out again (another world, or resliced records),
 * in this job's batches of B1; B is the checkpointed plan's.
 */
static int resume_again(const sc__ckpt *ck, const sc__sched *sq, uint32_t old, uint64_t B,
                        uint64_t B1, uint32_t world, uint32_t rank, sc__resume *out,
                        sc_error *err)
{
    const int n = (int)ck[0].world;
    sc__piece *S = NULL, *sorted = NULL;
    uint64_t nS = 0;
    size_t capS = 0;
    int rc = SC_OK, oom = 0;
    if (!ck[0].resliced) {
        oom |= resume_left_plain(ck, sq, old, B, &S, &nS, &capS);
        if (rank == 0)
            oom |= resume_account_plain(ck, sq, old, B, 0, out);
    } else {
        rc = resume_left_resliced(ck, n, sq, &S, &nS, &capS, &sorted, err);
        if (rc == SC_OK && rank == 0)
            rc = resume_account_resliced(ck, n, sq, old, sorted, nS, out, err);
    }
    if (rc == SC_OK && !oom)
        oom |= resume_deal_out(S, nS, sq, world, rank, B1, (sc_remainder)ck[0].remainder, out);
    if (rank == 0)
        out->share.padded_before = out->padded_before;
    free(S);
    free(sorted);
    if (rc == SC_OK && oom)
        rc = sc__seterr(err, SC_ENOMEM, "rank %u: no memory to resume epoch %llu", rank,
                        (unsigned long long)ck[0].epoch);
    return rc;
}

/* Plain records of a partitioned epoch, every rank at the same batch. */
static int resume_in_step(const sc__ckpt *ck)
{
    for (uint64_t i = 0; i < ck[0].world; i++)
        if (ck[i].consumed != ck[0].consumed)
            return 0;
    return ck[0].partitions && !ck[0].resliced;
}

/*
 * Partitions, every old rank at batch k: the global batches do not depend
 * on the world size, so this rank continues its own schedule of the
 * epoch's plan for `world` ranks at batch k, and the rest of the epoch's
 * global batches are the uninterrupted run's.
 */
static int resume_partitions(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                             const sc__sched *sq, uint32_t old, uint64_t B, uint32_t world,
                             uint32_t rank, sc__resume *out, sc_error *err)
{
    sc_plan_params p;
    sc_plan *plan = NULL;
    sc__sched mine = {0};
    sc__dataset_plan_params(ds, cfg, world, ck[0].epoch, &p);
    int rc = sc__plan_at(&p, NULL, &plan, err);
    if (rc == SC_OK)
        rc = sc__schedule(ds->shard_first, plan, rank, cfg->batch_size, cfg->shuffle_window,
                          cfg->seed, 0, &mine, err);
    if (rc == SC_OK && mine.nslots != ck[0].batches * cfg->batch_size)
        rc = sc__seterr(err, SC_EFORMAT, "epoch %llu on %u ranks has %llu batches a rank, the "
                        "checkpoints say %llu: damaged or not shardcache's records",
                        (unsigned long long)ck[0].epoch, world,
                        (unsigned long long)(mine.nslots / cfg->batch_size),
                        (unsigned long long)ck[0].batches);
    if (rc == SC_OK && ((rank == 0 && resume_account_plain(ck, sq, old, B, 1, out)) ||
                        resume_continue(&mine, &ck[0], cfg->batch_size, out)))
        rc = sc__seterr(err, SC_ENOMEM, "rank %u: no memory to resume epoch %llu", rank,
                        (unsigned long long)ck[0].epoch);
    out->offset = ck[0].consumed;
    sc__sched_free(&mine);
    sc_plan_free(plan);
    return rc;
}

int sc__resume_compute(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                       uint32_t world, uint32_t rank, sc__resume *out, sc_error *err)
{
    memset(out, 0, sizeof *out);
    const uint32_t old = (uint32_t)(ck[0].resliced ? ck[0].world0 : ck[0].world);
    const uint64_t B = resume_old_batch(&ck[0], old);
    out->epoch = ck[0].epoch;
    sc_plan *plan = NULL;
    sc__sched *sq = NULL;
    uint64_t batches0 = 0;
    int rc = resume_plan(ds, cfg, ck, old, &plan, &batches0, err);
    if (rc == SC_OK)
        rc = resume_schedules(ds, cfg, plan, old, B, &sq, err);
    if (rc == SC_OK && !ck[0].resliced && world == old) {
        out->offset = ck[rank].consumed;
        if ((rank == 0 && resume_account_plain(ck, sq, old, B, 1, out)) ||
            resume_continue(&sq[rank], &ck[rank], B, out))
            rc = sc__seterr(err, SC_ENOMEM, "rank %u: no memory to resume epoch %llu", rank,
                            (unsigned long long)out->epoch);
    } else if (rc == SC_OK && resume_in_step(ck)) {
        rc = resume_partitions(ds, cfg, ck, sq, old, B, world, rank, out, err);
    } else if (rc == SC_OK) {
        rc = resume_again(ck, sq, old, B, cfg->batch_size, world, rank, out, err);
        out->share.world0 = old;
        out->share.batches0 = batches0;
    }
    for (uint32_t q = 0; sq && q < old; q++)
        sc__sched_free(&sq[q]);
    free(sq);
    sc_plan_free(plan);
    if (rc != SC_OK)
        sc__resume_free(out);
    return rc;
}

/* Where the first `skip` samples of the share's pieces end: piece *k, *off into it. */
static void resume_skip(const sc__share *s, uint64_t skip, uint64_t *k, uint64_t *off)
{
    for (*k = 0; *k < s->npieces && skip >= s->pieces[*k].end - s->pieces[*k].start; (*k)++)
        skip -= s->pieces[*k].end - s->pieces[*k].start;
    *off = skip;
}

int sc__share_record(const sc__share *s, uint64_t consumed, uint64_t B, int done,
                     uint64_t max, sc__ckpt *c, sc__piece **left, sc_error *err)
{
    uint64_t slots = consumed * B, real = resume_min(slots, s->nreal), k, off;
    c->resliced = 1;
    c->world0 = s->world0, c->batches0 = s->batches0, c->run = s->run;
    /* Rank 0 carries what the runs before did (its share fields; 0 on others). */
    c->padded = resume_min(slots, s->nslots) - real + s->padded_before;
    c->dropped = (done ? s->ndropped : 0) + s->dropped_before;
    /* Once its epoch has ended its drops are recorded: nothing is left. */
    resume_skip(s, done ? s->nreal + s->ndropped : real, &k, &off);
    c->npieces = s->npieces - k;
    *left = NULL;
    for (uint64_t i = k; i < s->npieces; i++)
        if (s->world0 > SC__CKPT_MAX_WORLD || s->pieces[i].end > SC__CKPT_MAX_POS)
            return sc__seterr(err, SC_ENOTSUP,
                              "rank %llu: epoch %llu: %llu ranks of %llu samples each are "
                              "more than a checkpoint names (2^24 of 2^40)",
                              (unsigned long long)c->rank, (unsigned long long)c->epoch,
                              (unsigned long long)s->world0,
                              (unsigned long long)s->pieces[i].end);
    if (c->npieces > max)
        return sc__seterr(err, SC_ENOTSUP,
                          "rank %llu: epoch %llu: what this rank has left is %llu pieces of "
                          "the plan's schedules, more than a checkpoint holds (%llu, in "
                          "SC_CHECKPOINT_MAX_BYTES): take the checkpoint once the epoch has "
                          "ended",
                          (unsigned long long)c->rank, (unsigned long long)c->epoch,
                          (unsigned long long)c->npieces, (unsigned long long)max);
    if (!(*left = malloc(sizeof **left * (c->npieces + 1))))
        return sc__seterr(err, SC_ENOMEM, "rank %llu: no memory for a checkpoint",
                          (unsigned long long)c->rank);
    if (c->npieces) { /* none left: s->pieces may be NULL, which memcpy may not take */
        memcpy(*left, s->pieces + k, sizeof **left * c->npieces);
        (*left)[0].start += off;
    }
    return SC_OK;
}
