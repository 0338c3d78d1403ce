/*
 * loader.c - the epoch and batch API of the loader (loader_state.h says
 * how the loader's files divide it): an epoch's begin (its plan waited
 * for, its shards claimed in the ledger), every batch handed out checked
 * and recorded, the epoch's end (its verification posted), and its report
 * and verdict.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "loader_state.h"
#include "log.h"
#include "plan_state.h"

/* The end of `ld->cur` on this rank: its verification goes out, never waited for. */
static int loader_end_epoch(sc_loader *ld)
{
    SC__ASSERT(ld->phase == LD_RUNNING && ld->delivered == ld->nb); /* once, at its last */
    sc_error err = SC_ERROR_INIT;
    const uint64_t *dropped;
    uint64_t nd;
    sc__stream_counts c;
    uint64_t t0 = sc__tring_now(ld->tr);
    int rc = sc__stream_finish_epoch(ld->stream, ld->cur, &dropped, &nd, &c, &err);
    if (rc == SC_OK)
        rc = sc__ledger_drop(ld->ledger, ld->cur, dropped, nd, &err);
    if (rc == SC_OK)
        rc = sc__ledger_end(ld->ledger, ld->cur, &err);
    if (rc != SC_OK)
        return sc__loader_fail(ld, &err);
    uint64_t t1 = sc__tring_now(ld->tr);
    sc__tring_span(ld->tr, SC__ST_VERIFY, t0, t1, ld->cur, -1, -1, 0);
    sc__tring_epoch_end(ld->tr, t1, ld->cur);
    if (c.hits + c.misses)
        sc__tring_counter(ld->tr, SC__CT_HIT_RATE, t1,
                          100.0 * (double)c.hits / (double)(c.hits + c.misses));
    double spread = c.full_batches ? (double)c.batch_shards / (double)c.full_batches : 0.0;
    if (c.full_batches)
        sc__tring_counter(ld->tr, SC__CT_SHARDS, t1, spread);
    ld->phase = LD_ENDED;
    ld->settled_to = ld->cur + 1;
    sc__loader_rec *r = sc__loader_find_rec(ld, ld->cur);
    if (r)
        sc__loader_rec_advance(r, REC_ENDED);
    sc_epoch_summary *rep = sc__loader_report_of(ld, ld->cur);
    sc__peer_ended(ld->peer, ld->cur);
    if (rep) {
        rep->cache_hits = c.hits;
        rep->cache_misses = c.misses;
        rep->bytes_from_cache = c.bytes_from_cache;
        rep->bytes_from_source = c.bytes_from_source;
        rep->bytes_from_peers = c.bytes_from_peers;
        rep->shards_per_batch = spread;
        rep->cache_writes_skipped = c.writes_skipped;
    }
    return SC_OK;
}

/* Closes the wall clock of the current epoch, once. */
static void loader_stop_clock(sc_loader *ld)
{
    sc_epoch_summary *rep = sc__loader_report_of(ld, ld->cur);
    if (ld->phase != LD_NO_EPOCH && ld->t_begin > 0 && rep) {
        rep->wall_s = sc__clock_s() - ld->t_begin;
        ld->t_begin = 0;
    }
}

/* Whether `epoch` may begin now: in order, after the last one's batches. */
static int loader_begin_allowed(sc_loader *ld, uint64_t epoch)
{
    if (ld->phase == LD_RUNNING)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: epoch %llu begun while epoch %llu has %llu batches left",
                          ld->rank, (unsigned long long)epoch, (unsigned long long)ld->cur,
                          (unsigned long long)(ld->nb - ld->delivered));
    if (ld->started && epoch != ld->cur + 1)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: epoch %llu begun after epoch %llu: epochs go in order, "
                          "one after another: the next is %llu",
                          ld->rank, (unsigned long long)epoch, (unsigned long long)ld->cur,
                          (unsigned long long)ld->cur + 1);
    if (ld->resume.pending && epoch != ld->resume.epoch)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: resumed in epoch %llu: begin that epoch first, not %llu",
                          ld->rank, (unsigned long long)ld->resume.epoch,
                          (unsigned long long)epoch);
    return SC_OK;
}

/*
 * Waits for r's plan while answering the other ranks' asks and claims: a
 * rank blocked in the broadcast could leave a rank of another node waiting
 * on it for a shard, which that rank may need before its own broadcast.
 */
static int loader_await_plan(sc_loader *ld, sc__loader_rec *r)
{
    int done = 0;
    sc_error err = SC_ERROR_INIT;
    while (!done) {
        if (sc__plan_bcast_test(&r->bc, &done, &err) != SC_OK)
            return sc__loader_fail(ld, &err);
        if (!done) {
            sc__peer_pump(ld->peer, NULL);
            sc__ledger_progress(ld->ledger, NULL);
            usleep(100);
        }
    }
    return sc__loader_arrive(ld, r);
}

/*
 * `epoch`'s plan, waited for: its broadcast (posted one epoch ahead, or
 * now for the first epoch) is finished and checked; the next epoch's is
 * posted.  *out is its record.
 */
static int loader_wait_plan(sc_loader *ld, uint64_t epoch, sc__loader_rec **out)
{
    int rc;
    if (!ld->started) {
        ld->started = 1;
        ld->first = ld->settled_to = epoch;
        if ((rc = sc__loader_post(ld, epoch, 0)) != SC_OK)
            return rc;
    }
    if ((rc = sc__loader_post(ld, epoch + 1, 0)) != SC_OK)
        return rc;
    sc__loader_rec *r = *out = sc__loader_find_rec(ld, epoch);
    if (!r) {
        sc_error err;
        sc__seterr(&err, SC_EINVAL, "rank %d: epoch %llu has no plan record", ld->rank,
                   (unsigned long long)epoch);
        return sc__loader_fail(ld, &err);
    }
    if (r->bc_live && (rc = loader_await_plan(ld, r)) != SC_OK)
        return rc;
    return r->status != SC_OK ? sc__loader_fail(ld, &r->err) : SC_OK;
}

/*
 * The epoch in the ledger and the stream: a fresh one claims its plan's
 * shards; a resumed one takes the share its checkpoints left.  Sets the
 * batch count; *samples: this rank's samples in it.
 */
static int loader_begin_ledger(sc_loader *ld, const sc__loader_rec *r, uint64_t *samples)
{
    sc_error err = SC_ERROR_INIT;
    sc_plan_info pi;
    sc_plan_get_info(r->plan, &pi);
    ld->nb = ld->plan_nb = pi.batches_per_rank;
    int rc;
    if (ld->resume.pending) {
        *samples = ld->resume.state.sched.nreal;
        rc = sc__loader_begin_resumed(ld, &err); /* sets ld->nb */
    } else {
        ld->resume.offset = 0, ld->resume.resliced = 0;
        sc__share_free(&ld->resume.share);
        rc = sc__ledger_begin(ld->ledger, r->plan, &err);
    }
    return rc != SC_OK ? sc__loader_fail(ld, &err) : SC_OK;
}

static void loader_fill_info(const sc_loader *ld, const sc__loader_rec *r, uint64_t samples,
                             double waited, sc_epoch_info *info)
{
    sc_plan_info pi;
    sc_plan_get_info(r->plan, &pi);
    memset(info, 0, sizeof *info);
    info->epoch = r->epoch;
    info->batches = ld->nb;
    info->batch_size = pi.batch_size;
    sc_plan_rank(r->plan, (uint32_t)ld->rank, NULL, &info->shards, NULL);
    info->samples = samples;
    info->plan_hash = pi.hash;
    info->plan_wait_s = waited;
}

int sc_epoch_begin(sc_loader *ld, uint64_t epoch, sc_epoch_info *info)
{
    if (!ld)
        return SC_EINVAL;
    if (ld->failed)
        return sc__loader_stopped(ld);
    int rc = loader_begin_allowed(ld, epoch);
    if (rc != SC_OK)
        return rc;
    /* Epochs go in order, each settled (ended or abandoned) before the next. */
    SC__ASSERT(!ld->started || ld->settled_to == ld->cur + 1);
    loader_stop_clock(ld);
    double t0 = sc__clock_s();
    uint64_t tw = sc__tring_now(ld->tr);
    sc_error terr = SC_ERROR_INIT;
    /* The rings drain here: memory stays bounded, and a crash keeps past epochs. */
    if ((rc = sc__trace_flush(ld->trace, &terr)) != SC_OK)
        return sc__loader_fail(ld, &terr);
    ld->t_ret = 0;
    ld->cur = epoch;
    ld->phase = LD_NO_EPOCH;
    if ((rc = sc__loader_fault_mpi(ld, epoch, &terr)) != SC_OK)
        return sc__loader_fail(ld, &terr);
    sc__loader_rec *r = NULL;
    if ((rc = loader_wait_plan(ld, epoch, &r)) != SC_OK)
        return rc;
    /*
     * The cache learns the order its shards are read in before the stream
     * reads one; then, its shards from other nodes in (or given up), it
     * goes to the stream.  (A resumed epoch's comes with its schedule.)
     */
    sc__loader_plan_ahead(ld);
    sc__loader_release(ld, r, 1);
    if (r->status != SC_OK)
        return sc__loader_fail(ld, &r->err);
    double waited = sc__clock_s() - t0;
    sc__tring_span(ld->tr, SC__ST_PLAN_WAIT, tw, sc__tring_now(ld->tr), epoch, -1, -1, 0);

    if (ld->rank == 0 && ld->cfg.epochs > 0 && epoch == (uint64_t)ld->cfg.epochs)
        sc__log(ld->cfg.log_level, SC__LOG_WARN, 0, "epoch %llu begun past SC_EPOCHS=%d (the "
                "job's epochs, 0 to %d): nothing was read ahead for it, so it starts cold; "
                "it is still exactly-once", (unsigned long long)epoch, ld->cfg.epochs,
                ld->cfg.epochs - 1);
    ld->phase = LD_RUNNING;
    sc__loader_rec_advance(r, REC_BEGUN);
    uint64_t samples = 0;
    sc_plan_rank(r->plan, (uint32_t)ld->rank, NULL, NULL, &samples);
    if ((rc = loader_begin_ledger(ld, r, &samples)) != SC_OK)
        return rc;
    ld->delivered = 0;
    ld->t_begin = t0;
    sc_epoch_summary *rep = sc__loader_report_of(ld, epoch);
    if (!rep) {
        sc_error err;
        sc__seterr(&err, SC_ENOMEM, "rank %d: no memory for epoch reports", ld->rank);
        return sc__loader_fail(ld, &err);
    }
    rep->epoch = epoch;
    if ((rc = sc__loader_poll_verdicts(ld, 0, 0)) != SC_OK)
        return rc;
    if (info)
        loader_fill_info(ld, r, samples, waited, info);
    /* An epoch without batches ends as it begins. */
    return ld->nb == 0 ? loader_end_epoch(ld) : SC_OK;
}

/*
 * A batch handed out, checked and recorded in the ledger: its real samples
 * as delivered (`skip`: as skipped by the caller), its padding counted.
 */
static int loader_record(sc_loader *ld, const sc_batch *b, int skip, sc_error *err)
{
    uint64_t real = b->size - b->padded;
    int rc = sc__ledger_check(ld->ledger, ld->cur, b->ids, b->size, err);
    if (rc == SC_OK && skip)
        rc = sc__ledger_skip(ld->ledger, ld->cur, b->ids, real, err);
    else if (rc == SC_OK)
        rc = sc__ledger_consume(ld->ledger, ld->cur, b->ids, real, 0, err);
    if (rc == SC_OK && b->padded && !skip)
        rc = sc__ledger_consume(ld->ledger, ld->cur, b->ids + real, b->padded, 1, err);
    return rc;
}

/*
 * loader_record for a batch with replacements, slot by slot: a replaced
 * slot is checked as the sample it stands for (the replacement is of the
 * same shard, not always of this rank's part of it), which is accounted
 * for as skipped with its reason, its replacement counted apart.
 */
static int loader_record_replaced(sc_loader *ld, const sc_batch *b, int skip, sc_error *err)
{
    uint64_t real = b->size - b->padded;
    int rc = SC_OK;
    for (uint64_t k = 0; rc == SC_OK && k < b->size; k++) {
        uint64_t id = b->replaced[k] ? b->stands_for[k] : b->ids[k];
        rc = sc__ledger_check(ld->ledger, ld->cur, &id, 1, err);
        if (rc != SC_OK || (k >= real && skip))
            continue;
        if (k >= real) /* a padding repeat, recorded as the sample it repeats */
            rc = sc__ledger_consume(ld->ledger, ld->cur, &id, 1, 1, err);
        else if (b->replaced[k])
            rc = sc__ledger_replaced(ld->ledger, ld->cur, id, b->ids[k], b->replaced[k], !skip,
                                     err);
        else if (skip)
            rc = sc__ledger_skip(ld->ledger, ld->cur, &id, 1, err);
        else
            rc = sc__ledger_consume(ld->ledger, ld->cur, &id, 1, 0, err);
    }
    return rc;
}

/*
 * The next batch, or SC_END_OF_EPOCH; `skip`: the caller ends the epoch
 * early, so its samples are recorded as skipped by the caller, not
 * delivered, and the batch is not counted as the consumer's.
 */
static int loader_take(sc_loader *ld, sc_batch *batch, int skip)
{
    if (ld->failed)
        return sc__loader_stopped(ld);
    if (ld->phase == LD_NO_EPOCH)
        return sc__seterr(&ld->err, SC_EINVAL, "rank %d: %s before sc_epoch_begin", ld->rank,
                          skip ? "sc_epoch_skip_rest" : "sc_batch_next");
    /* The time since the last batch was handed out is the training step. */
    if (ld->t_ret)
        sc__tring_span(ld->tr, SC__ST_COMPUTE, ld->t_ret, sc__tring_now(ld->tr), ld->cur, -1,
                       (int64_t)ld->delivered - 1, 0);
    ld->t_ret = 0;
    int rc = sc__loader_progress(ld);
    if (rc != SC_OK)
        return rc;
    if (ld->delivered == ld->nb) {
        loader_stop_clock(ld);
        sc_error perr = SC_ERROR_INIT; /* the asks it deferred to its epoch's end */
        if (sc__peer_pump(ld->peer, &perr) != SC_OK)
            return sc__loader_fail(ld, &perr);
        return SC_END_OF_EPOCH;
    }
    sc_error err = SC_ERROR_INIT;
    double waited = 0;
    rc = sc__stream_next(ld->stream, batch, &waited, &err);
    if (ld->tr && rc == SC_OK) {
        uint64_t t = sc__tring_now(ld->tr);
        if (waited > 0)
            sc__tring_span(ld->tr, SC__ST_CONSUMER_WAIT, t - (uint64_t)(waited * 1e9), t,
                           ld->cur, -1, (int64_t)batch->index, 0);
        sc__tring_counter(ld->tr, SC__CT_RING, t, (double)sc__stream_ready(ld->stream));
    }
    if (rc != SC_OK && sc__stream_status(ld->stream) == SC_OK) {
        ld->err = err; /* every buffer held: the caller's mistake, the loader goes on */
        return rc;
    }
    if (rc == SC_OK && (batch->epoch != ld->cur || batch->index != ld->delivered))
        rc = sc__seterr(&err, SC_EINVAL,
                        "rank %d: epoch %llu: the stream handed out batch %llu of epoch %llu "
                        "where batch %llu was due",
                        ld->rank, (unsigned long long)ld->cur,
                        (unsigned long long)batch->index, (unsigned long long)batch->epoch,
                        (unsigned long long)ld->delivered);
    if (rc == SC_OK)
        rc = sc__ledger_progress(ld->ledger, &err);
    if (rc == SC_OK)
        rc = sc__peer_pump(ld->peer, &err);
    if (rc == SC_OK)
        sc__loader_release_next(ld);
    if (rc == SC_OK)
        rc = batch->nreplaced ? loader_record_replaced(ld, batch, skip, &err)
                              : loader_record(ld, batch, skip, &err);
    if (rc != SC_OK) {
        memset(batch, 0, sizeof *batch);
        return sc__loader_fail(ld, &err);
    }
    sc_epoch_summary *rep = sc__loader_report_of(ld, ld->cur);
    SC__ASSERT(rep); /* made by sc_epoch_begin, which fails without it */
    rep->wait_s += waited;
    rep->batches += !skip;
    rep->samples += skip ? 0 : batch->size;
    if (++ld->delivered == ld->nb && (rc = loader_end_epoch(ld)) != SC_OK)
        return rc;
    if ((rc = sc__loader_poll_verdicts(ld, 0, 0)) != SC_OK)
        return rc;
    ld->t_ret = sc__tring_now(ld->tr);
    return SC_OK;
}

int sc_batch_next(sc_loader *ld, sc_batch *batch)
{
    if (!ld || !batch)
        return SC_EINVAL;
    return loader_take(ld, batch, 0);
}

int sc_epoch_unused(sc_loader *ld, uint64_t samples)
{
    if (!ld)
        return SC_EINVAL;
    if (ld->failed)
        return sc__loader_stopped(ld);
    if (ld->phase == LD_NO_EPOCH || samples > ld->delivered * ld->cfg.batch_size)
        return sc__seterr(&ld->err, SC_EINVAL, "rank %d: sc_epoch_unused of %llu samples: "
                          "more than this epoch's batches taken so far", ld->rank,
                          (unsigned long long)samples);
    sc_error err = SC_ERROR_INIT;
    int rc = sc__ledger_unused(ld->ledger, ld->cur, samples, &err);
    if (rc != SC_OK)
        ld->err = err; /* the caller's timing: reported, the loader goes on */
    return rc;
}

int sc_epoch_skip_rest(sc_loader *ld, uint64_t *skipped)
{
    if (!ld)
        return SC_EINVAL;
    uint64_t n = 0;
    sc_batch b;
    int rc;
    while ((rc = loader_take(ld, &b, 1)) == SC_OK) {
        n += b.size - b.padded;
        if ((rc = sc_batch_release(ld, &b)) != SC_OK)
            break;
    }
    if (skipped)
        *skipped = n;
    return rc == SC_END_OF_EPOCH ? SC_OK : rc;
}

int sc_batch_release_on(sc_loader *ld, sc_batch *batch, void *stream)
{
    if (!ld || !batch)
        return SC_EINVAL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc__stream_release(ld->stream, batch, stream, &err);
    if (rc != SC_OK)
        ld->err = err; /* a caller's mistake: reported, but the loader goes on */
    return rc;
}

int sc_batch_release(sc_loader *ld, sc_batch *batch)
{
    return sc_batch_release_on(ld, batch, NULL);
}

int sc_batch_detach(sc_loader *ld, sc_batch *batch)
{
    if (!ld || !batch || batch->detached)
        return SC_EINVAL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc__stream_detach(ld->stream, batch, &batch->detached, &err);
    if (rc != SC_OK)
        ld->err = err; /* the batch stays held; the loader goes on */
    return rc;
}

int sc_batch_free(sc_batch *batch)
{
    if (!batch || !batch->detached)
        return SC_EINVAL;
    sc__stream_detached_free(batch->detached);
    memset(batch, 0, sizeof *batch);
    return SC_OK;
}

int sc_batch_wait(sc_loader *ld, const sc_batch *batch)
{
    if (!ld || !batch)
        return SC_EINVAL;
    if (batch->device < 0)
        return SC_OK;
    return sc__dev_event_wait(ld->dev, batch->ready, &ld->err);
}

int sc_batch_wait_on(sc_loader *ld, const sc_batch *batch, void *stream)
{
    if (!ld || !batch)
        return SC_EINVAL;
    if (batch->device < 0)
        return SC_OK;
    return sc__dev_stream_wait(ld->dev, stream, batch->ready, &ld->err);
}

/*
 * A verdict waits for every rank of the loader's communicator to end the
 * epoch: one called on rank 0 alone (PyTorch's `if rank == 0: validate()`
 * with a loader opened on every rank) waits for ever, which is said.
 */
static void loader_say_waiting(const sc_loader *ld, uint64_t epoch, double s)
{
    sc__log(ld->cfg.log_level, SC__LOG_WARN, ld->rank,
            "rank %d has waited %.0f s for epoch %llu's exactly-once verdict: it comes once "
            "every rank of the loader's communicator has ended the epoch; where only some "
            "ranks run it (if rank == 0: ...), open that loader on those ranks' own "
            "communicator (MPI.COMM_SELF for rank 0 alone) (source '%s')", ld->rank, s,
            (unsigned long long)epoch, ld->cfg.source);
}

/*
 * Waits for `epoch`'s verdict, answering the other ranks' asks for shards
 * meanwhile: a rank done with its epochs may still owe shards to ranks
 * whose epoch waits for them, and so for this verdict.
 */
static int loader_wait_verdict(sc_loader *ld, uint64_t epoch)
{
    const sc_epoch_summary *rep = sc__loader_report_of(ld, epoch);
    double closed = 0, since = sc__clock_s(), say = LOADER_VERDICT_SAY_S;
#ifdef SC_TESTING
    const char *quick = getenv("SC_TEST_VERDICT_SAY_S"); /* the suite waits seconds, not a minute */
    say = quick && atof(quick) > 0 ? atof(quick) : say;
#endif
    for (;;) {
        int rc = sc__loader_poll_verdicts(ld, 0, 0);
        if (rc != SC_OK || !rep || rep->exactly_once.verified || ld->failed)
            return rc;
        if (sc__clock_s() - since > say) /* a wait that may never end is said, not silent */
            loader_say_waiting(ld, epoch, say), say *= 2;
        /*
         * A rank 0 that closed its loader before this epoch never joins the
         * verdict: it says so in the next plan's broadcast, whose failure
         * ends this wait.  But one that stopped in this epoch (a bad
         * sample) posted its part before closing, and the verdict that
         * names why is on its way: it is given LOADER_CLOSED_GRACE_S.
         */
        sc__loader_rec *next = sc__loader_find_rec(ld, ld->cur + 1);
        if (next && (rc = sc__loader_progress(ld)) == SC_OK && next->status != SC_OK) {
            if (!closed)
                closed = sc__clock_s();
            else if (sc__clock_s() - closed > LOADER_CLOSED_GRACE_S)
                return sc__loader_fail(ld, &next->err);
        }
        if (rc != SC_OK)
            return rc;
        sc_error err = SC_ERROR_INIT;
        if ((rc = sc__peer_pump(ld->peer, &err)) != SC_OK)
            return sc__loader_fail(ld, &err);
        usleep(100);
    }
}

static int loader_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep, int wait)
{
    if (!ld || !rep)
        return SC_EINVAL;
    /* An epoch not begun is refused before its row is made (a far one would be gigabytes). */
    sc_epoch_summary *mine = epoch <= ld->cur ? sc__loader_report_of(ld, epoch) : NULL;
    if (!mine)
        return sc__seterr(&ld->err, SC_EINVAL, "rank %d: epoch %llu has not begun", ld->rank,
                          (unsigned long long)epoch);
    if (wait && epoch >= ld->settled_to)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: epoch %llu is still running (%llu of %llu batches taken)",
                          ld->rank, (unsigned long long)epoch,
                          (unsigned long long)ld->delivered, (unsigned long long)ld->nb);
    if (!ld->failed) {
        uint64_t t0 = sc__tring_now(wait ? ld->tr : NULL);
        int rc = wait ? loader_wait_verdict(ld, epoch) : sc__loader_poll_verdicts(ld, 0, 0);
        sc__tring_span(wait ? ld->tr : NULL, SC__ST_VERIFY, t0, sc__tring_now(ld->tr), epoch,
                       -1, -1, 0);
        if (rc != SC_OK)
            return rc;
    }
    *rep = *sc__loader_report_of(ld, epoch);
    return ld->failed ? sc__loader_stopped(ld) : SC_OK;
}

int sc_epoch_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep)
{
    return loader_report(ld, epoch, rep, 0);
}

int sc_epoch_wait(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep)
{
    return loader_report(ld, epoch, rep, 1);
}
