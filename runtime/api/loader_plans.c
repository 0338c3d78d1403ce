/*
 * loader_plans.c - the loader's epoch records (loader_state.h): each epoch's
 * plan broadcast, posted one epoch ahead and tested while the one before
 * runs; its arrival, checked and held back until the shards it moves from
 * other nodes are in, then queued in the stream; its verdict, picked up
 * without waiting.  Also where the loader fails: the first fatal error
 * stops it, and the epoch in hand is abandoned in the ledger.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "vec.h"
#include "loader_state.h"
#include "plan_state.h"

/*
 * After an error or at close: the epoch being begun or run is abandoned in
 * the ledger (begun there or not), so no other rank waits for it forever.
 * After an error, so are the epochs whose plans are out (posted_to): other
 * ranks may run them, and their verdicts then say why this rank never did,
 * not only that it closed.
 */
void sc__loader_settle(sc_loader *ld)
{
    if (!ld->started || !ld->ledger || ld->settled_to > ld->cur)
        return;
    /* A rank stopped by a bad image says which: every rank's verdict names it. */
    sc__ledger_stopped why = {.sample = sc__stream_failed_sample(ld->stream), .epoch = ld->cur,
                              .skip = ld->cfg.bad_sample == SC_BAD_SAMPLE_SKIP};
    uint64_t to = ld->failed && ld->posted_to > ld->cur ? ld->posted_to : ld->cur + 1;
    for (uint64_t e = ld->cur; e < to; e++)
        sc__ledger_stop(ld->ledger, e, &why, NULL);
    ld->settled_to = to;
    if (ld->phase == LD_RUNNING)
        ld->phase = LD_ENDED;
    sc__loader_rec *r = sc__loader_find_rec(ld, ld->cur);
    if (r)
        sc__loader_rec_advance(r, REC_ENDED);
}

/* Records the loader's first fatal error and stops it; returns its code. */
int sc__loader_fail(sc_loader *ld, const sc_error *err)
{
    if (!ld->failed) {
        ld->failed = 1;
        ld->fatal = *err;
        sc__loader_settle(ld);
    }
    ld->err = ld->fatal;
    return ld->fatal.code;
}

/* A call on a stopped loader: it fails with why the loader stopped. */
int sc__loader_stopped(sc_loader *ld)
{
    ld->err = ld->fatal;
    return ld->fatal.code;
}

sc__loader_rec *sc__loader_find_rec(sc_loader *ld, uint64_t epoch)
{
    for (int i = 0; i < NREC; i++)
        if (ld->recs[i].state != REC_FREE && ld->recs[i].epoch == epoch)
            return &ld->recs[i];
    return NULL;
}

sc_epoch_summary *sc__loader_report_of(sc_loader *ld, uint64_t epoch)
{
    if (!ld->started || epoch < ld->first)
        return NULL;
    uint64_t i = epoch - ld->first;
    if (i >= SIZE_MAX / sizeof *ld->reps)
        return NULL;
    if (i >= ld->nreps) { /* all of its room in use: each epoch's stays unset till used */
        size_t n = ld->nreps;
        sc_epoch_summary *r = sc__vec_grow(ld->reps, &n, i + 1, sizeof *r);
        if (!r)
            return NULL;
        memset(r + ld->nreps, 0, sizeof *r * (n - ld->nreps));
        for (uint64_t k = ld->nreps; k < n; k++)
            r[k].epoch = r[k].exactly_once.epoch = ld->first + k;
        ld->reps = r;
        ld->nreps = n;
    }
    return &ld->reps[i];
}

void sc__loader_rec_free(sc_loader *ld, sc__loader_rec *r)
{
    if (r->plan != ld->last_made) /* rank 0 still plans the next epoch from it */
        sc_plan_free(r->plan);
    sc_plan_free(r->extra);
    sc__sched_free(&r->sched);
    free(r->reads);
    memset(r, 0, sizeof *r);
}

/*
 * Records are kept until their broadcast, their epoch and its verdict are
 * done with, and at least until the next epoch has begun (a stale-plan
 * fault re-uses the previous plan).
 */
static void loader_retire(sc_loader *ld)
{
    for (int i = 0; i < NREC; i++) {
        sc__loader_rec *r = &ld->recs[i];
        if (r->state == REC_JUDGED && !r->bc_live && r->epoch + 1 < ld->cur)
            sc__loader_rec_free(ld, r);
    }
}

/* Picks up verdicts that have arrived; waits for `epoch`'s if wait. */
int sc__loader_poll_verdicts(sc_loader *ld, int wait, uint64_t epoch)
{
    for (int i = 0; i < NREC; i++) {
        sc__loader_rec *r = &ld->recs[i];
        if (r->state != REC_ENDED)
            continue;
        sc_exactly_once v;
        sc_error err = SC_ERROR_INIT;
        int rc = sc__ledger_result(ld->ledger, r->epoch, wait && r->epoch == epoch, &v,
                                   &err);
        if (rc != SC_OK)
            return sc__loader_fail(ld, &err);
        if (v.verified) {
            sc_epoch_summary *rep = sc__loader_report_of(ld, r->epoch);
            if (rep)
                rep->exactly_once = v;
            r->state = REC_JUDGED;
        }
    }
    loader_retire(ld);
    return SC_OK;
}

/*
 * An epoch from SC_EPOCHS on, which the job said it never runs: its plan is
 * still broadcast (a rank that closes early says so in it), but nothing is
 * read for it ahead, by the stream, the cache's Belady or the peers, until
 * it is begun anyway.
 */
static int loader_past_last(const sc_loader *ld, uint64_t epoch)
{
    return ld->cfg.epochs > 0 && epoch >= (uint64_t)ld->cfg.epochs;
}

static sc_plan_params loader_params_for(const sc_loader *ld, uint64_t epoch)
{
    sc_plan_params p;
    sc__dataset_plan_params(ld->ds, &ld->cfg, (uint32_t)ld->size, epoch, &p);
    sc__loader_fault_params(ld, epoch, &p);
    return p;
}

/* Posts the broadcast of `epoch`'s plan (rank 0 computes it first). */
int sc__loader_post(sc_loader *ld, uint64_t epoch, int closing)
{
    sc__loader_rec *r = NULL;
    for (int i = 0; i < NREC && !r; i++)
        if (ld->recs[i].state == REC_FREE)
            r = &ld->recs[i];
    if (!r) {
        sc_error err;
        sc__seterr(&err, SC_EINVAL,
                   "rank %d: epoch %llu: more than %d epochs in flight (verdicts unread?)",
                   ld->rank, (unsigned long long)epoch, NREC);
        return sc__loader_fail(ld, &err);
    }
    memset(r, 0, sizeof *r);
    r->state = REC_POSTED;
    r->epoch = epoch;
    int made = SC_OK;
    sc_error err = SC_ERROR_INIT;
    if (ld->rank == 0 && !closing) {
        sc_plan_params p = loader_params_for(ld, epoch);
        uint64_t t0 = sc__tring_now(ld->tr);
        /* A sticky job begun at a later epoch replays the chain from epoch 0. */
        made = sc__plan_at(&p, ld->last_made, &r->plan, &err);
        sc__tring_span(ld->tr, SC__ST_PLAN_COMPUTE, t0, sc__tring_now(ld->tr), epoch, -1, -1,
                       0);
        if (made == SC_OK) {
            /* The plan it replaces is freed here unless a record still holds it. */
            sc_plan *old = ld->last_made;
            ld->last_made = r->plan;
            int held = 0;
            for (int i = 0; i < NREC; i++)
                held |= ld->recs[i].state != REC_FREE && ld->recs[i].plan == old;
            if (!held)
                sc_plan_free(old);
        } else {
            r->status = made, r->err = err;
        }
    }
    /* The broadcast before this one is still its `after` while in flight. */
    sc__loader_rec *before = sc__loader_find_rec(ld, epoch - 1);
    sc__plan_bcast *after = epoch > 0 && before && before->bc_live ? &before->bc : NULL;
    /* Closing: how far rank 0 went (an epoch whose begin failed is not counted). */
    uint64_t begun = ld->phase != LD_NO_EPOCH ? ld->cur + 1 : ld->cur > ld->first ? ld->cur : 0;
    int rc = closing ? sc__plan_bcast_closing(&r->bc, after, ld->hdr, ld->data, 0, begun,
                                              epoch, &err)
                     : sc__plan_bcast_start(&r->bc, after, ld->hdr, ld->data, 0,
                                            ld->rank == 0 ? r->plan : NULL, made, epoch, &err);
    if (rc != SC_OK)
        return sc__loader_fail(ld, &err);
    r->bc_live = 1;
    ld->posted_to = epoch + 1;
    return SC_OK;
}

int sc__loader_note_reads(sc_loader *ld, uint64_t epoch, sc__loader_rec *r, sc__sched *sc,
                          const sc_plan *plan, sc_error *err)
{
    const sc_dataset *ds = ld->ds;
    uint64_t bound = sc__sched_bound(plan, (uint32_t)ld->rank, sc->nslots, ds->nshards);
    int rc = sc__sched_order(sc, ds->shard_first, ds->nshards, bound);
    if (rc == SC_OK && r) {
        free(r->reads);
        r->nreads = 0;
        r->reads = malloc(sizeof *r->reads * (sc->nshards + 1));
        rc = r->reads ? SC_OK : SC_ENOMEM;
    }
    if (rc != SC_OK)
        return sc__seterr(err, rc, "rank %d: epoch %llu: %s", ld->rank,
                          (unsigned long long)epoch,
                          rc == SC_ENOMEM
                              ? "no memory for its shard order"
                              : "its schedule reads more shards than its plan gives it");
    if (r) {
        memcpy(r->reads, sc->shards, sizeof *r->reads * sc->nshards);
        r->nreads = sc->nshards;
    }
    return SC_OK;
}

/*
 * The epoch's schedule on this rank, computed once, on arrival: the stream
 * builds its batches from it, and the cache's Belady learns the shards in
 * the order the stream reads them.  (The plan's own order lists shards a
 * remainder drops: kept for a read that never came, they pushed out
 * shards that were read, and the cache rewrote itself every epoch.)
 */
static int loader_schedule(sc_loader *ld, sc__loader_rec *r, const sc_plan *use, sc_error *err)
{
    int rc = sc__schedule(ld->ds->shard_first, use, (uint32_t)ld->rank, ld->cfg.batch_size,
                          ld->cfg.shuffle_window, ld->cfg.seed,
                          sc__loader_fault_sched(ld, r->epoch), &r->sched, err);
    return rc == SC_OK ? sc__loader_note_reads(ld, r->epoch, r, &r->sched, use, err) : rc;
}

/*
 * The next epoch's plan has come while this one runs: the cache's Belady
 * learns of it now, not at its begin, so that the shards transfers bring
 * for it are kept, and room for them is known (sc__cache_spare).
 */
static void loader_plan_next(sc_loader *ld, const sc__loader_rec *r)
{
    if (!ld->ahead_to || r->epoch != ld->ahead_to || !r->reads || loader_past_last(ld, r->epoch))
        return; /* no epoch runs, the cache knows it already, or the job ends before it */
    if (sc__cache_plan_extend(ld->cache, r->reads, r->nreads) == SC_OK)
        ld->ahead_to = r->epoch + 1;
}

/* Finishes `r`'s broadcast and, on success, queues the epoch in the stream. */
int sc__loader_arrive(sc_loader *ld, sc__loader_rec *r)
{
    SC__ASSERT(r->bc_live); /* callers test it: a broadcast is finished once */
    sc_error err = SC_ERROR_INIT;
    sc_plan_params p = loader_params_for(ld, r->epoch);
    sc_plan *got = NULL;
    int rc = sc__plan_bcast_finish(&r->bc, &p, &got, &err);
    r->bc_live = 0;
    sc__loader_rec_advance(r, REC_ARRIVED);
    if (r->status != SC_OK) /* rank 0 could not make it: its own reason stands */
        return SC_OK;
    if (got)
        r->plan = got;
    const sc_plan *use = r->plan;
    sc__loader_rec *prev = sc__loader_find_rec(ld, r->epoch - 1);
    if (rc == SC_OK && got)
        rc = sc__plan_check_pieces(got, ld->ds->shard_sizes, ld->ds->shard_first, &err);
    if (rc == SC_OK)
        rc = sc__loader_fault_plan(ld, r, prev, &p, &use, &err);
    /* A resumed epoch's schedule is not its plan's: begin_resumed pushes it. */
    int resumed = ld->resume.pending && r->epoch == ld->resume.epoch;
    if (rc == SC_OK && !resumed)
        rc = loader_schedule(ld, r, use, &err);
    if (rc == SC_OK)
        loader_plan_next(ld, r);
    /*
     * Shards moving here from other nodes are asked for, and the epoch goes
     * to the stream once they are in (sc__loader_release): producers never
     * wait for a transfer, so an owner busy with this epoch cannot stall ours.
     * (After a resumed epoch, the shards its schedule read are not its plan's.)
     */
    int after_resume = ld->resume.happened && ld->resume.epoch + 1 == r->epoch;
    if (rc == SC_OK && r->epoch > 0 && prev && prev->plan && !ld->resume.pending &&
        !after_resume && !loader_past_last(ld, r->epoch))
        rc = sc__peer_want(ld->peer, prev->plan, r->reads, r->nreads, &err);
    if (rc == SC_OK && !resumed)
        r->use = use;
    if (rc != SC_OK)
        r->status = rc, r->err = err;
    return sc__loader_release(ld, r, 0);
}

/*
 * Queues a held-back epoch in the stream once its transfers are in; with
 * `wait`, first waits for them (answering the others' asks meanwhile) up
 * to the transfer timeout, then withdraws the rest: the source serves them.
 */
int sc__loader_release(sc_loader *ld, sc__loader_rec *r, int wait)
{
    sc_error err = SC_ERROR_INIT;
    if (!r->use || r->status != SC_OK || (!wait && loader_past_last(ld, r->epoch)))
        return SC_OK; /* (past the job's last epoch: held back until it is begun) */
    SC__ASSERT(!r->bc_live && r->state >= REC_ARRIVED); /* `use` is set on arrival */
    int rc = SC_OK, left = sc__peer_pending(ld->peer, r->epoch);
    /* Waits while replies keep coming; an owner silent for a while is given up. */
    for (double seen = sc__clock_s(); rc == SC_OK && left;) {
        if (!wait)
            return SC_OK;
        if (sc__clock_s() - seen > LOADER_PEER_QUIET_S) {
            rc = sc__peer_give_up(ld->peer, r->epoch, &err);
            break;
        }
        rc = sc__peer_pump(ld->peer, &err);
        int now = sc__peer_pending(ld->peer, r->epoch);
        if (now < left)
            seen = sc__clock_s(), left = now;
        if (rc == SC_OK && left)
            rc = sc__ledger_progress(ld->ledger, &err), usleep(200);
    }
    if (rc == SC_OK)
        rc = sc__stream_push(ld->stream, r->epoch, &r->sched, &err); /* takes it */
    r->use = NULL;
    if (rc != SC_OK)
        r->status = rc, r->err = err;
    return SC_OK;
}

/* The held-back epoch after the current one, if its transfers are in. */
void sc__loader_release_next(sc_loader *ld)
{
    sc__loader_rec *r = sc__loader_find_rec(ld, ld->cur + 1);
    if (r)
        sc__loader_release(ld, r, 0);
}

/* Lets the next epoch's plan arrive while this one runs; never waits. */
int sc__loader_progress(sc_loader *ld)
{
    sc__loader_rec *r = sc__loader_find_rec(ld, ld->cur + 1);
    if (!r || !r->bc_live)
        return SC_OK;
    int done = 0;
    sc_error err = SC_ERROR_INIT;
    if (sc__plan_bcast_test(&r->bc, &done, &err) != SC_OK)
        return sc__loader_fail(ld, &err);
    return done ? sc__loader_arrive(ld, r) : SC_OK;
}

/*
 * Tells the cache what this rank reads from now on, for Belady eviction.
 * When the cache knows this epoch already (its plan came during the last
 * one), only what it lacks is appended: the shards producers read ahead,
 * behind the last epoch, stay read in its future.
 */
void sc__loader_plan_ahead(sc_loader *ld)
{
    if (ld->ahead_to > ld->cur) {
        sc__loader_rec *r = sc__loader_find_rec(ld, ld->ahead_to);
        if (r)
            loader_plan_next(ld, r);
        return;
    }
    uint32_t *seq = NULL;
    uint64_t n = 0;
    size_t room = 0;
    for (uint64_t e = ld->cur; e <= ld->cur + 1 && (e == ld->cur || !loader_past_last(ld, e));
         e++) {
        sc__loader_rec *r = sc__loader_find_rec(ld, e);
        uint32_t *grown = r && r->reads ? sc__vec_grow(seq, &room, n + r->nreads + 1, sizeof *seq)
                                        : NULL;
        if (!grown)
            break;
        seq = grown;
        memcpy(seq + n, r->reads, sizeof *seq * r->nreads);
        n += r->nreads;
        ld->ahead_to = e + 1;
    }
    if (n) /* none yet: a resumed epoch's comes with its schedule (begin_resumed) */
        sc_cache_plan_ahead(ld->cache, seq, n);
    free(seq);
}
