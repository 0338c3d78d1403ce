/*
 * loader.c - the public loader API: the glue between the plan broadcast,
 * the ownership ledger, the cache and the stream, run from the caller's
 * thread (the only thread of shardcache that calls MPI).
 *
 * Epoch e's life on one rank: its plan's broadcast is posted when epoch e-1
 * begins (rank 0 computes it then), and tested on every sc_next_batch of
 * epoch e-1; as soon as it has arrived and checked out, it is pushed to the
 * stream, whose producers load its shards behind e-1's and build its first
 * batch right after e-1's last.  sc_epoch_begin(e) claims the shards in the
 * ledger and returns; every batch handed out is checked and recorded; the
 * hand-out of the last batch posts the epoch's verification, whose verdict
 * is picked up by later calls without waiting.  An error stops the loader:
 * the epoch is abandoned in the ledger (so no other rank waits on it) and
 * every later call returns the same status.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "augment.h"
#include "decode.h"
#include "device.h"
#include "error.h"
#include "fault.h"
#include "hash.h"
#include "log.h"
#include "mpierr.h"
#include "node.h"
#include "ownership.h"
#include "peer.h"
#include "plan.h"
#include "jobwide.h"
#include "resume.h"
#include "source.h"
#include "stream.h"
#include "trace.h"

/* Epochs a rank can hold state for: the verification lookahead, plus two. */
#define NREC (SC__LEDGER_SLOTS + 5)

/*
 * An epoch's record goes through these states in order (never back):
 * its plan's broadcast is posted, the plan arrives (checked and queued in
 * the stream, or refused: `status`), the epoch is begun, ended (or
 * abandoned), and judged (its verdict is in).  The broadcast itself is a
 * resource of its own (`bc_live`): on rank 0 it is still in flight when
 * the plan could not be made, and at close it is finished in any state.
 */
typedef enum rec_state {
    REC_FREE = 0,
    REC_POSTED,
    REC_ARRIVED,
    REC_BEGUN,
    REC_ENDED,
    REC_JUDGED,
} rec_state;

typedef struct rec {
    rec_state state;
    uint64_t epoch;
    sc__plan_bcast bc;
    int bc_live;      /* posted, not finished */
    int status;       /* SC_OK, or why the plan was refused (err says it) */
    sc_error err;
    sc_plan *plan;    /* what this rank runs (rank 0: its own) */
    sc_plan *extra;   /* a plan kept only for a fault (stale, own seed) */
    const sc_plan *use; /* held back: queued in the stream once its transfers are in */
} rec;

/* Moves a record forward to `s` (a record never goes back). */
static void loader_rec_advance(rec *r, rec_state s)
{
    if (r->state < s)
        r->state = s;
}

/* Where the current epoch is on this rank. */
typedef enum loader_phase {
    LD_NO_EPOCH = 0, /* none begun yet, being begun, or its begin failed */
    LD_RUNNING,      /* begun: batches are being handed out */
    LD_ENDED,        /* its last batch is out (or it was abandoned) */
} loader_phase;

/* Test-only faults (SC_FAULT), read once at open: one bit each. */
enum {
    LF_PLAN_SEED = 1u << 0,   /* this rank plans with another seed */
    LF_WORLD = 1u << 1,       /* ... another world size */
    LF_FINGERPRINT = 1u << 2, /* ... another dataset fingerprint */
    LF_OWN_PLAN = 1u << 3,    /* runs a plan it made itself, not rank 0's */
    LF_STALE_PLAN = 1u << 4,  /* runs the previous epoch's plan */
    LF_DUP_SHARD = 1u << 5,   /* reads its first shard twice */
    LF_SKIP_SHARD = 1u << 6,  /* never reads its last shard */
    LF_MPI_ERROR = 1u << 7,   /* an MPI call on the loader's communicator fails */
};

struct sc_loader {
    MPI_Comm comm, hdr, data;
    int rank, size, local_rank, local_size;
    sc_config cfg;
    sc_dataset *ds;
    sc_cache *cache;
    sc__ledger *ledger;
    sc__peer *peer;          /* moved shards from other nodes' caches */
    sc__dev *dev;
    sc__stream *stream;
    int device;
    uint64_t nshards;
    rec recs[NREC];
    sc_plan *last_made;      /* rank 0: the newest plan computed (sticky's prev) */
    int started;
    uint64_t first, cur, posted_to; /* posted_to: one past the newest posted */
    loader_phase phase;      /* of epoch `cur` */
    uint64_t settled_to;     /* every epoch below it is ended or abandoned here */
    uint64_t delivered, nb;
    double t_begin;
    sc_epoch_summary *reps;   /* [nreps], by epoch - first */
    uint64_t nreps;
    /*
     * Two messages: why the loader stopped (the first fatal error, which
     * every later call returns and close reports, whatever happens after)
     * and the last failed call's (sc_last_error), which may be a caller's
     * mistake the loader survives.
     */
    int failed;
    sc_error fatal;
    sc_error err;
    struct {
        unsigned mask;       /* LF_*: testing builds only, else 0 */
        int rank;            /* SC_FAULT_RANK: the rank they hit */
        uint64_t epoch;      /* SC_FAULT_EPOCH: the epoch they hit */
    } fault;
    sc__trace *trace;        /* NULL: SC_TRACE unset */
    sc__tring *tr;           /* the caller's thread */
    uint64_t t_ret;          /* when sc_next_batch last returned a batch: the step began */
    /* sc_loader_resume: the interrupted epoch, this rank's part of it */
    struct {
        int pending;         /* resumed, its epoch not begun yet */
        sc__resume state;
        uint64_t epoch;
        uint64_t offset;     /* batches of its schedule consumed before (same world) */
        int resliced;        /* dealt out again (another world): `share` is this rank's */
        sc__share share;     /* what its checkpoints name as left */
        int happened;        /* this loader resumed (at `epoch`) */
    } resume;
    uint64_t plan_nb;        /* the current epoch's plan: batches per rank */
    uint64_t ahead_to;       /* 1 + the last epoch the cache's future holds (0: none) */
};

/* Seconds on base's monotonic clock. */
static double loader_now(void)
{
    return 1e-9 * (double)sc__tring_clock();
}

/* A test-only fault aimed at this rank and epoch (SC_FAULT_RANK, SC_FAULT_EPOCH). */
static int loader_fault(const sc_loader *ld, unsigned fault, uint64_t epoch)
{
    return (ld->fault.mask & fault) && ld->rank == ld->fault.rank && epoch == ld->fault.epoch;
}

static rec *loader_find_rec(sc_loader *ld, uint64_t epoch);

/*
 * After an error or at close: the epoch being begun or run is abandoned in
 * the ledger (begun there or not), so no other rank waits for it forever.
 */
static void loader_settle(sc_loader *ld)
{
    if (!ld->started || !ld->ledger || ld->settled_to > ld->cur)
        return;
    sc__ledger_abandon(ld->ledger, ld->cur, NULL);
    ld->settled_to = ld->cur + 1;
    if (ld->phase == LD_RUNNING)
        ld->phase = LD_ENDED;
    rec *r = loader_find_rec(ld, ld->cur);
    if (r)
        loader_rec_advance(r, REC_ENDED);
}

/* Records the loader's first fatal error and stops it; returns its code. */
static int loader_fail(sc_loader *ld, const sc_error *err)
{
    if (!ld->failed) {
        ld->failed = 1;
        ld->fatal = *err;
        loader_settle(ld);
    }
    ld->err = ld->fatal;
    return ld->fatal.code;
}

/* A call on a stopped loader: it fails with why the loader stopped. */
static int loader_stopped(sc_loader *ld)
{
    ld->err = ld->fatal;
    return ld->fatal.code;
}

static rec *loader_find_rec(sc_loader *ld, uint64_t epoch)
{
    for (int i = 0; i < NREC; i++)
        if (ld->recs[i].state != REC_FREE && ld->recs[i].epoch == epoch)
            return &ld->recs[i];
    return NULL;
}

static sc_epoch_summary *loader_report_of(sc_loader *ld, uint64_t epoch)
{
    if (!ld->started || epoch < ld->first)
        return NULL;
    uint64_t i = epoch - ld->first;
    if (i >= ld->nreps) {
        uint64_t n = ld->nreps ? ld->nreps : 16;
        while (n <= i)
            n *= 2;
        sc_epoch_summary *r = realloc(ld->reps, sizeof *r * n);
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

static void loader_rec_free(sc_loader *ld, rec *r)
{
    if (r->plan != ld->last_made) /* rank 0 still plans the next epoch from it */
        sc_plan_free(r->plan);
    sc_plan_free(r->extra);
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
        rec *r = &ld->recs[i];
        if (r->state == REC_JUDGED && !r->bc_live && r->epoch + 1 < ld->cur)
            loader_rec_free(ld, r);
    }
}

/* Picks up verdicts that have arrived; waits for `epoch`'s if wait. */
static int loader_poll_verdicts(sc_loader *ld, int wait, uint64_t epoch)
{
    for (int i = 0; i < NREC; i++) {
        rec *r = &ld->recs[i];
        if (r->state != REC_ENDED)
            continue;
        sc_exactly_once v;
        sc_error err = SC_ERROR_INIT;
        int rc = sc__ledger_result(ld->ledger, r->epoch, wait && r->epoch == epoch, &v,
                                   &err);
        if (rc != SC_OK)
            return loader_fail(ld, &err);
        if (v.verified) {
            sc_epoch_summary *rep = loader_report_of(ld, r->epoch);
            if (rep)
                rep->exactly_once = v;
            r->state = REC_JUDGED;
        }
    }
    loader_retire(ld);
    return SC_OK;
}

static sc_plan_params loader_params_for(const sc_loader *ld, uint64_t epoch)
{
    sc_plan_params p;
    sc_dataset_plan_params(ld->ds, &ld->cfg, (uint32_t)ld->size, epoch, &p);
    if (loader_fault(ld, LF_PLAN_SEED, epoch))
        p.seed++; /* as if this rank had its own SC_SEED */
    if (loader_fault(ld, LF_WORLD, epoch))
        p.world_size++;
    if (loader_fault(ld, LF_FINGERPRINT, epoch))
        p.fingerprint++;
    return p;
}

/* Posts the broadcast of `epoch`'s plan (rank 0 computes it first). */
static int loader_post(sc_loader *ld, uint64_t epoch, int closing)
{
    rec *r = NULL;
    for (int i = 0; i < NREC && !r; i++)
        if (ld->recs[i].state == REC_FREE)
            r = &ld->recs[i];
    if (!r) {
        sc_error err;
        sc__seterr(&err, SC_EINVAL,
                   "rank %d: epoch %llu: more than %d epochs in flight (verdicts unread?)",
                   ld->rank, (unsigned long long)epoch, NREC);
        return loader_fail(ld, &err);
    }
    memset(r, 0, sizeof *r);
    r->state = REC_POSTED;
    r->epoch = epoch;
    int made = SC_OK;
    sc_error err = SC_ERROR_INIT;
    if (ld->rank == 0 && !closing) {
        sc_plan_params p = loader_params_for(ld, epoch);
        uint64_t t0 = sc__trace_now(ld->tr);
        /* A sticky job begun at a later epoch replays the chain from epoch 0. */
        made = sc__plan_at(&p, ld->last_made, &r->plan, &err);
        sc__trace_span(ld->tr, SC__ST_PLAN_COMPUTE, t0, sc__trace_now(ld->tr), epoch, -1, -1,
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
    rec *before = loader_find_rec(ld, epoch - 1);
    sc__plan_bcast *after = epoch > 0 && before && before->bc_live ? &before->bc : NULL;
    int rc = sc__plan_bcast_start(&r->bc, after, ld->hdr, ld->data, 0,
                                  ld->rank == 0 ? r->plan : NULL,
                                  closing ? SC_END_OF_EPOCH : made, epoch, &err);
    if (rc != SC_OK)
        return loader_fail(ld, &err);
    r->bc_live = 1;
    ld->posted_to = epoch + 1;
    return SC_OK;
}

/*
 * The resumed epoch in the ledger: this rank's share, and on rank 0 what
 * the run before delivered or dropped, so that the verdict covers both;
 * then its schedule goes to the stream.
 */
static int loader_begin_resumed(sc_loader *ld, sc_error *err)
{
    const sc__resume *r = &ld->resume.state;
    uint64_t e = ld->resume.epoch;
    int rc = sc__ledger_begin_share(ld->ledger, e, r->sched.ids, r->sched.nslots,
                                    r->sched.nreal, r->sched.dropped, r->sched.ndropped, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->before, r->nbefore, 0, 0, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->dropped_old, r->ndropped_old, 1, 0, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->dropped_new, r->ndropped_new, 1, 1, err);
    if (rc == SC_OK && r->padded_before)
        rc = sc__ledger_padded_before(ld->ledger, e, r->padded_before, err);
    ld->nb = r->sched.nslots / ld->cfg.batch_size;
    if (rc == SC_OK)
        rc = sc__stream_push_sched(ld->stream, e, &ld->resume.state.sched, err); /* takes it */
    ld->resume.pending = 0;
    sc__share_free(&ld->resume.share);
    ld->resume.share = ld->resume.state.share; /* for its checkpoints */
    memset(&ld->resume.state.share, 0, sizeof ld->resume.state.share);
    sc__resume_free(&ld->resume.state);
    return rc;
}

#ifdef SC_TESTING
/*
 * The plan-level faults, done on purpose: this rank runs another plan than
 * the one rank 0 broadcast.  *use becomes it; SC_OK or why it failed.
 */
static int loader_fault_plan(sc_loader *ld, rec *r, const sc_plan_params *p,
                             const sc_plan **use, sc_error *err)
{
    int rc = SC_OK;
    if (loader_fault(ld, LF_OWN_PLAN, r->epoch)) {
        /* The classic bug: this rank shuffles with its own RNG. */
        sc_plan_params q = *p;
        q.seed ^= 0x9e3779b97f4a7c15ULL;
        rc = sc_plan_create(&q, NULL, &r->extra, err);
        if (rc == SC_OK) {
            sc_plan_free(r->plan);
            *use = r->plan = r->extra;
            r->extra = NULL;
        }
    }
    rec *old = loader_find_rec(ld, r->epoch - 1);
    if (rc == SC_OK && loader_fault(ld, LF_STALE_PLAN, r->epoch) && old && old->plan) {
        /* Still on the previous epoch's assignment at the handoff. */
        size_t len;
        const void *wire = sc__plan_wire(old->plan, &len);
        if ((rc = sc_plan_decode(wire, len, &r->extra, err)) == SC_OK) {
            r->extra->info.epoch = r->epoch;
            *use = r->extra;
        }
    }
    return rc;
}

/*
 * An MPI call MPI itself refuses (a negative count), on the loader's own
 * communicator: with MPI's default handler the job would abort here; the
 * loader's returns the error, which must become SC_EMPI with MPI's text.
 */
static int loader_fault_mpi(sc_loader *ld, uint64_t epoch, sc_error *err)
{
    if (loader_fault(ld, LF_MPI_ERROR, epoch))
        SC_MPI_CHECK(err, MPI_Send(NULL, -1, MPI_BYTE, 0, 0, ld->comm));
    return SC_OK;
}

/* The schedule-level faults of `epoch` (SC__SCHED_*). */
static unsigned loader_fault_sched(const sc_loader *ld, uint64_t epoch)
{
    return (loader_fault(ld, LF_DUP_SHARD, epoch) ? SC__SCHED_DUP_SHARD : 0) |
           (loader_fault(ld, LF_SKIP_SHARD, epoch) ? SC__SCHED_SKIP_SHARD : 0);
}
#else
#define loader_fault_plan(ld, r, p, use, err) SC_OK
#define loader_fault_sched(ld, epoch) 0u
#define loader_fault_mpi(ld, epoch, err) SC_OK
#endif

static int loader_release(sc_loader *ld, rec *r, int wait);

/* Transfers from other nodes: at close, the exchange must end within 30 s. */
#define LOADER_PEER_WAIT_S 30.0
/*
 * At an epoch's begin: its transfers are given up after this long without
 * a reply.  Short, because an owner may be unable to answer at all: asks
 * posted late (a plan that arrived only now) can miss an owner's last call
 * into the loader before it waits in the training loop's next collective
 * for this very rank.
 */
#define LOADER_PEER_QUIET_S 0.5

/*
 * The next epoch's plan has come while this one runs: the cache's Belady
 * learns of it now, not at its begin, so that the shards transfers bring
 * for it are kept, and room for them is known (sc__cache_spare).
 */
static void loader_plan_next(sc_loader *ld, const rec *r)
{
    uint32_t *mine = NULL;
    uint64_t n;
    if (!ld->ahead_to || r->epoch != ld->ahead_to)
        return; /* no epoch runs, or the cache knows it already */
    if (sc__plan_reads(r->plan, (uint32_t)ld->rank, &mine, &n) == SC_OK &&
        sc__cache_plan_extend(ld->cache, mine, n) == SC_OK)
        ld->ahead_to = r->epoch + 1;
    free(mine);
}

/* Finishes `r`'s broadcast and, on success, queues the epoch in the stream. */
static int loader_arrive(sc_loader *ld, rec *r)
{
    sc_error err = SC_ERROR_INIT;
    sc_plan_params p = loader_params_for(ld, r->epoch);
    sc_plan *got = NULL;
    int rc = sc__plan_bcast_finish(&r->bc, &p, &got, &err);
    r->bc_live = 0;
    loader_rec_advance(r, REC_ARRIVED);
    if (r->status != SC_OK) /* rank 0 could not make it: its own reason stands */
        return SC_OK;
    if (got)
        r->plan = got;
    const sc_plan *use = r->plan;
    if (rc == SC_OK && got)
        rc = sc__plan_check_pieces(got, ld->ds->shard_sizes, ld->ds->shard_first, &err);
    if (rc == SC_OK)
        rc = loader_fault_plan(ld, r, &p, &use, &err);
    if (rc == SC_OK)
        loader_plan_next(ld, r);
    /*
     * Shards moving here from other nodes are asked for, and the epoch goes
     * to the stream once they are in (loader_release): producers never wait
     * for a transfer, so an owner busy with this epoch cannot stall ours.
     * (After a resumed epoch, the shards its schedule read are not its plan's.)
     */
    rec *prev = loader_find_rec(ld, r->epoch - 1);
    int after_resume = ld->resume.happened && ld->resume.epoch + 1 == r->epoch;
    if (rc == SC_OK && r->epoch > 0 && prev && prev->plan && !ld->resume.pending &&
        !after_resume)
        rc = sc__peer_want(ld->peer, prev->plan, use, &err);
    /* A resumed epoch's schedule is not its plan's: begin_resumed pushes it. */
    if (rc == SC_OK && !(ld->resume.pending && r->epoch == ld->resume.epoch))
        r->use = use;
    if (rc != SC_OK)
        r->status = rc, r->err = err;
    return loader_release(ld, r, 0);
}

/*
 * Queues a held-back epoch in the stream once its transfers are in; with
 * `wait`, first waits for them (answering the others' asks meanwhile) up
 * to the transfer timeout, then withdraws the rest: the source serves them.
 */
static int loader_release(sc_loader *ld, rec *r, int wait)
{
    sc_error err = SC_ERROR_INIT;
    if (!r->use || r->status != SC_OK)
        return SC_OK;
    int rc = SC_OK, left = sc__peer_pending(ld->peer, r->epoch);
    /* Waits while replies keep coming; an owner silent for a while is given up. */
    for (double seen = loader_now(); rc == SC_OK && left;) {
        if (!wait)
            return SC_OK;
        if (loader_now() - seen > LOADER_PEER_QUIET_S) {
            rc = sc__peer_give_up(ld->peer, r->epoch, &err);
            break;
        }
        rc = sc__peer_pump(ld->peer, &err);
        int now = sc__peer_pending(ld->peer, r->epoch);
        if (now < left)
            seen = loader_now(), left = now;
        if (rc == SC_OK && left)
            rc = sc__ledger_progress(ld->ledger, &err), usleep(200);
    }
    if (rc == SC_OK)
        rc = sc__stream_push(ld->stream, r->use, loader_fault_sched(ld, r->epoch), &err);
    r->use = NULL;
    if (rc != SC_OK)
        r->status = rc, r->err = err;
    return SC_OK;
}

/* The held-back epoch after the current one, if its transfers are in. */
static void loader_release_next(sc_loader *ld)
{
    rec *r = loader_find_rec(ld, ld->cur + 1);
    if (r)
        loader_release(ld, r, 0);
}

/* Lets the next epoch's plan arrive while this one runs; never waits. */
static int loader_progress(sc_loader *ld)
{
    rec *r = loader_find_rec(ld, ld->cur + 1);
    if (!r || !r->bc_live)
        return SC_OK;
    int done = 0;
    sc_error err = SC_ERROR_INIT;
    if (sc__plan_bcast_test(&r->bc, &done, &err) != SC_OK)
        return loader_fail(ld, &err);
    return done ? loader_arrive(ld, r) : SC_OK;
}

/* Tells the cache what this rank reads from now on, for Belady eviction. */
static void loader_plan_ahead(sc_loader *ld)
{
    uint32_t *seq = NULL;
    uint64_t n = 0;
    for (uint64_t e = ld->cur; e <= ld->cur + 1; e++) {
        rec *r = loader_find_rec(ld, e);
        if (!r || !r->plan)
            break;
        ld->ahead_to = e + 1;
        uint32_t *mine = NULL;
        uint64_t k;
        uint32_t *grown = sc__plan_reads(r->plan, (uint32_t)ld->rank, &mine, &k) == SC_OK
                              ? realloc(seq, sizeof *seq * (n + k + 1))
                              : NULL;
        if (grown) {
            seq = grown;
            memcpy(seq + n, mine, sizeof *seq * k);
            n += k;
        }
        free(mine);
        if (!grown)
            break;
    }
    sc_cache_plan_ahead(ld->cache, seq, n);
    free(seq);
}

/* ---- open --------------------------------------------------------------------- */

/*
 * Open is collective step by step: a step that fails on one rank fails on
 * all before the next collective step, so no rank waits in one alone.
 */
static int loader_agree(const sc_loader *ld, int rc, sc_error *err)
{
    int worst = rc;
    SC_MPI_CHECK(err, MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, ld->comm));
    if (rc == SC_OK && worst != SC_OK)
        return sc__seterr(err, worst, "rank %d: another rank failed to open its loader (%s)",
                          ld->rank, sc_status_name(worst));
    return rc;
}

/*
 * This rank's share of the cores it may run on: the cores of its affinity
 * mask over the node-local ranks whose masks meet it (a launcher that gives
 * each rank a block of cores leaves it the whole block; Open MPI's default
 * binding to a socket shares the socket).  At least 2: a lone producer
 * stalls the ring while it maps or reads a shard (bench/deliver, 4 ranks on
 * 2 cores: 4.0 GB/s with one producer per rank, 12.2 GB/s with two), and at
 * most 8.  Collective.
 */
static int loader_default_producers(const sc_loader *ld, int *producers, sc_error *err)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (online > 0 ? online : 1) && c < CPU_SETSIZE; c++)
            CPU_SET(c, &mask);
    }
    int sharers = 1;
    int rc = sc__node_overlap(ld->comm, &mask, (int)sizeof mask, &sharers, err);
    int n = CPU_COUNT(&mask) / (sharers > 0 ? sharers : 1);
    *producers = n < 2 ? 2 : n > 8 ? 8 : n;
    return rc;
}

/* The test-only faults this rank was asked for, read once (SC_FAULT*). */
static void loader_read_faults(sc_loader *ld)
{
    ld->fault.rank = ld->size - 1;
    ld->fault.epoch = 1;
#ifdef SC_TESTING
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"plan-seed", LF_PLAN_SEED},   {"world", LF_WORLD},
                 {"fingerprint", LF_FINGERPRINT}, {"own-plan", LF_OWN_PLAN},
                 {"stale-plan", LF_STALE_PLAN}, {"dup-shard", LF_DUP_SHARD},
                 {"skip-shard", LF_SKIP_SHARD},  {"mpi-error", LF_MPI_ERROR}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (sc__fault(names[i].name))
            ld->fault.mask |= names[i].bit;
    const char *fr = getenv("SC_FAULT_RANK"), *fe = getenv("SC_FAULT_EPOCH");
    if (fr && *fr)
        ld->fault.rank = atoi(fr);
    if (fe && *fe)
        ld->fault.epoch = strtoull(fe, NULL, 10);
#endif
}

/* A loader with its own communicators, nothing opened yet. */
static int loader_new(MPI_Comm comm, const sc_config *cfg, sc_loader **out, sc_error *err)
{
    sc_loader *ld = *out = calloc(1, sizeof *ld);
    if (!ld)
        return sc__seterr(err, SC_ENOMEM, "no memory for a loader");
    ld->cfg = *cfg;
    ld->comm = ld->hdr = ld->data = MPI_COMM_NULL;
    ld->device = -1;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &ld->rank));
    SC_MPI_CHECK(err, MPI_Comm_size(comm, &ld->size));
    loader_read_faults(ld);
    int level = MPI_THREAD_SINGLE;
    SC_MPI_CHECK(err, MPI_Query_thread(&level));
    if (level == MPI_THREAD_SINGLE)
        sc__log(cfg->log_level, SC__LOG_WARN, ld->rank,
                "MPI was initialized with MPI_THREAD_SINGLE; the loader runs producer "
                "threads (which never call MPI): MPI_THREAD_FUNNELED says so");
    MPI_Comm *own[3] = {&ld->comm, &ld->hdr, &ld->data};
    for (int i = 0; i < 3; i++)
        SC_MPI_CHECK(err, sc__comm_own(comm, own[i], NULL, NULL));
    return sc__node_local(ld->comm, &ld->local_rank, &ld->local_size, err);
}

static void loader_idle(void *arg);

/*
 * What the data, the world size and the settings rule out for every epoch
 * (more ranks than shards, too few samples for a batch a rank with drop),
 * refused here, not at an epoch's begin: sc_plan_params_check's words,
 * after the source and its shards.  Agreed on, so that no rank waits alone.
 */
static int loader_check_plans(const sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    sc_plan_params p;
    sc_dataset_info di;
    sc_dataset_plan_params(ld->ds, cfg, (uint32_t)ld->size, 0, &p);
    sc_dataset_get_info(ld->ds, &di);
    int rc = sc_plan_params_check(&p, err);
    if (rc != SC_OK)
        sc__errctx(err, rc, "rank %d: source '%s' (%llu samples, SC_SHARD_SIZE=%llu%s) on %d ranks",
                   ld->rank, cfg->source, (unsigned long long)di.nsamples,
                   (unsigned long long)di.shard_size,
                   cfg->shard_size == SC_SHARD_AUTO ? " by auto" : "", ld->size);
    return loader_agree(ld, rc, err);
}

/* The source, the cache and the ownership ledger, each agreed on by every rank. */
static int loader_open_data(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int rc = loader_agree(ld, sc_dataset_open(ld->comm, cfg, &ld->ds, err), err);
    if (rc == SC_OK)
        rc = loader_check_plans(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_agree(ld, sc_cache_open(ld->ds, ld->comm, cfg, &ld->cache, err), err);
    if (rc != SC_OK)
        return rc;
    sc__ledger_opts lo = {cfg->verify == SC_VERIFY_FULL,
                          cfg->audit_dir[0] ? cfg->audit_dir : NULL};
    ld->nshards = ld->ds->nshards;
    uint64_t units = cfg->partitions ? cfg->partitions : (uint64_t)ld->size;
    return loader_agree(ld, sc__ledger_open(ld->comm, ld->nshards, SC__PLAN_MAX_CUTS(units),
                                            ld->ds->shard_first, &lo, &ld->ledger, err),
                        err);
}

static const char *loader_device_name(int mode)
{
    static const char *names[] = {"auto", "host", "cuda", "sim"};
    return mode >= 0 && mode < 4 ? names[mode] : "unknown";
}

/* The least and the greatest of every rank's v, in one reduction. */
static int loader_range(const sc_loader *ld, int v, int *lo, int *hi, sc_error *err)
{
    int mine[2] = {v, -v}, job[2];
    SC_MPI_CHECK(err, MPI_Allreduce(mine, job, 2, MPI_INT, MPI_MIN, ld->comm));
    *lo = job[0];
    *hi = -job[1];
    return SC_OK;
}

/*
 * Every rank must ask for the same device, and "auto" means the GPU only
 * when every rank has one: a rank left on host memory beside ranks on GPUs
 * would meet their NCCL set-up with its own MPI all-reduce, and the job
 * would hang.
 */
static int loader_resolve_device(sc_loader *ld, const sc_config *cfg, sc_device_mode *mode,
                                 sc_error *err)
{
    /* Ranks on different paths would meet each other's collectives. */
    int lo = 0, hi = 0, rc = loader_range(ld, (int)*mode, &lo, &hi, err);
    if (rc == SC_OK && lo != hi)
        rc = sc__seterr(err, SC_EINVAL,
                        "rank %d: SC_DEVICE is %s here, and differs between ranks (from %s "
                        "to %s): every rank must ask for the same",
                        ld->rank, loader_device_name(*mode), loader_device_name(lo),
                        loader_device_name(hi));
    if (rc != SC_OK || *mode != SC_DEVICE_AUTO)
        return rc;
    int n = 0;
    rc = loader_agree(ld, sc__dev_probe(*mode, &n, err), err);
    if (rc == SC_OK) /* lo: every rank has a GPU; hi: some rank has one */
        rc = loader_range(ld, n > 0, &lo, &hi, err);
    if (rc != SC_OK)
        return rc;
    if (ld->rank == 0 && lo != hi)
        sc__log(cfg->log_level, SC__LOG_WARN, ld->rank,
                "SC_DEVICE=auto: some ranks see a GPU and some do not; batches stay in host "
                "memory on every rank (SC_DEVICE=cuda makes this an error)");
    *mode = lo ? SC_DEVICE_CUDA : SC_DEVICE_HOST;
    return SC_OK;
}

/* Two ranks of a node on one GPU is an error: NCCL refuses it later, worse. */
static int loader_own_device(sc_loader *ld, sc_error *err)
{
    char id[SC__DEV_ID_BYTES] = "";
    int distinct = 0, twin = -1;
    int rc = ld->device >= 0 ? sc__dev_identity(ld->dev, id, err) : SC_OK;
    rc = loader_agree(ld, rc, err);
    if (rc == SC_OK) /* every rank, on a device or not: it is collective */
        rc = sc__node_same(ld->comm, id, (int)sizeof id, &distinct, &twin, err);
    if (rc == SC_OK && twin >= 0 && ld->device >= 0)
        rc = sc__seterr(err, SC_ECUDA,
                        "rank %d: %d ranks on this node share %d GPU%s of %d visible (GPU %d, "
                        "%s, is rank %d's too): each rank needs its own; select a different "
                        "device on each rank before opening (or none: the loader takes "
                        "node-local rank modulo the visible count), start at most %d ranks "
                        "per node, or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
                        ld->rank, ld->local_size, distinct, distinct == 1 ? "" : "s",
                        sc__dev_visible(ld->dev), ld->device, id, twin,
                        sc__dev_visible(ld->dev));
    return loader_agree(ld, rc, err);
}

/* Where batches land, agreed on by every rank. */
static int loader_open_device(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    sc_device_mode mode = cfg->device;
    int rc = loader_resolve_device(ld, cfg, &mode, err);
    if (rc == SC_OK) {
        rc = sc__dev_open(mode, ld->local_rank, &ld->dev, &ld->device, err);
        if (rc != SC_OK)
            sc__errctx(err, rc, "rank %d", ld->rank);
        rc = loader_agree(ld, rc, err);
    }
    if (rc == SC_OK)
        rc = loader_own_device(ld, err);
    return rc;
}

/* Transfers between nodes, unless SC_PEERS=off (which every rank must say alike). */
static int loader_open_peers(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int lo = 0, hi = 0, rc = loader_range(ld, (int)cfg->peers, &lo, &hi, err);
    if (rc == SC_OK && cfg->peers != SC_PEERS_ON && cfg->peers != SC_PEERS_OFF)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: sc_config.peers is %d, neither SC_PEERS_ON "
                        "nor SC_PEERS_OFF", ld->rank, (int)cfg->peers);
    else if (rc == SC_OK && lo != hi)
        rc = sc__seterr(err, SC_EINVAL,
                        "rank %d: SC_PEERS is %s here, and differs between ranks: every rank "
                        "must say the same (a rank asking another that does not answer would "
                        "wait for nothing)",
                        ld->rank, cfg->peers == SC_PEERS_ON ? "on" : "off");
    if (rc != SC_OK || cfg->peers != SC_PEERS_ON)
        return rc;
    sc__peer_opts po = {cfg->peer_bytes, LOADER_PEER_WAIT_S, cfg->log_level, ld->tr};
    return loader_agree(ld, sc__peer_open(ld->comm, ld->ds, ld->cache, &po, &ld->peer, err),
                        err);
}

/* Tracing, the device ring and the producers, each agreed on by every rank. */
static int loader_open_pipeline(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int rc = sc__trace_open(ld->comm, cfg->trace, cfg->trace_events, &ld->trace, err);
    rc = loader_agree(ld, rc, err);
    ld->tr = sc__trace_ring(ld->trace, "consumer");
    if (rc == SC_OK)
        rc = loader_open_peers(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_device(ld, cfg, err);
    int producers = 2;
    if (rc == SC_OK) /* collective: every rank, whatever SC_PRODUCERS says */
        rc = loader_agree(ld, loader_default_producers(ld, &producers, err), err);
    if (rc != SC_OK)
        return rc;
    /* Resolved here, so that checkpoints record (and resumes compare) samples. */
    ld->cfg.shuffle_window = sc_config_window(cfg, ld->ds->sample_bytes);
    if (ld->rank == 0)
        sc__log(cfg->log_level, SC__LOG_INFO, 0, "shuffle window: %llu samples%s",
                (unsigned long long)ld->cfg.shuffle_window,
                cfg->shuffle_window == SC_WINDOW_AUTO
                    ? " (auto: half of SC_STREAM_BYTES' samples, at least 4096)" : "");
    /*
     * Each partition shuffles within window / P (core/schedule.c): say when
     * that holds fewer than two of the blocks it gives each batch.
     */
    uint64_t block = cfg->partitions ? cfg->batch_size * (uint64_t)ld->size / cfg->partitions : 0;
    if (ld->rank == 0 && block && ld->cfg.shuffle_window &&
        ld->cfg.shuffle_window / cfg->partitions < 2 * block)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "SC_SHUFFLE_WINDOW of %llu samples over SC_PARTITIONS=%llu leaves each "
                "partition a window of %llu, fewer than two of the %llu-sample blocks it "
                "gives each global batch: batches mix little; a window of %llu or more would",
                (unsigned long long)ld->cfg.shuffle_window, (unsigned long long)cfg->partitions,
                (unsigned long long)(ld->cfg.shuffle_window / cfg->partitions),
                (unsigned long long)block,
                (unsigned long long)(2 * block * cfg->partitions));
    sc__stream_opts so = {
        .producers = cfg->producers > 0 ? cfg->producers : producers,
        .depth = cfg->prefetch_batches,
        .batch_size = cfg->batch_size,
        .window = ld->cfg.shuffle_window,
        .mem_bytes = cfg->stream_bytes,
        .seed = cfg->seed,
        .rank = ld->rank,
        .dev = ld->dev,
        .device = ld->device,
        .trace = ld->trace,
        .tf = sc__decode_transform(ld->ds, cfg),
        .idle = loader_idle,
        .idle_arg = ld,
    };
    int decodes = 0;
    for (int f = 0; f < ld->ds->nfields; f++)
        so.crop[f] = sc__decode_crop(ld->ds, f), decodes |= so.crop[f].width > 0;
    /* A producer builds one batch at a time into a free slot: fewer slots than
       producers leave producers idle, which a decode-bound loader shows. */
    if (decodes && ld->rank == 0 && so.depth < (uint64_t)so.producers)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "SC_DECODE decodes in the producers as they build batches, and "
                "SC_PREFETCH_BATCHES=%llu lets only %llu of the %d producers build at once: "
                "SC_PREFETCH_BATCHES=%d keeps them all busy",
                (unsigned long long)so.depth, (unsigned long long)so.depth, so.producers,
                2 * so.producers);
    return loader_agree(ld, sc__stream_open(ld->ds, ld->cache, &so, &ld->stream, err), err);
}

int sc_loader_open_err(MPI_Comm comm, const sc_config *cfg, sc_loader **out,
                       sc_error *err)
{
    if (!cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_loader_open: NULL argument");
    *out = NULL;
    sc_loader *ld = NULL;
    int rc = loader_new(comm, cfg, &ld, err);
    if (rc == SC_OK) /* before any work, on every rank: a rank refused alone would hang the rest */
        rc = loader_agree(ld, sc_launcher_check(cfg, err), err);
    if (rc == SC_OK)
        rc = sc__jobwide_check(ld->comm, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_data(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_pipeline(ld, cfg, err);
    if (rc != SC_OK) {
        sc_error keep = err ? *err : (sc_error)SC_ERROR_INIT;
        if (ld) {
            ld->failed = 1; /* nothing is in flight yet: close frees, it does not abandon */
            sc_loader_close(ld);
        }
        if (err)
            *err = keep;
        return rc;
    }
    *out = ld;
    return sc__errok(err);
}

int sc_loader_open(MPI_Comm comm, const sc_config *cfg, sc_loader **out)
{
    sc_error err = SC_ERROR_INIT;
    int rc = sc_loader_open_err(comm, cfg, out, &err);
    if (rc != SC_OK) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        fprintf(stderr, "shardcache[rank %d]: %s: %s\n", rank, sc_status_name(rc), err.msg);
    }
    return rc;
}

/* ---- epochs ------------------------------------------------------------------- */

/*
 * While the caller waits for a batch: transfers from peers go on (a batch
 * may need one), and this rank answers the others' asks and claims.  Errors
 * wait for the next call that can return them.
 */
static void loader_idle(void *arg)
{
    sc_loader *ld = arg;
    sc__peer_pump(ld->peer, NULL);
    sc__ledger_progress(ld->ledger, NULL);
    loader_release_next(ld);
}

/* The end of `ld->cur` on this rank: its verification goes out, never waited for. */
static int loader_end_epoch(sc_loader *ld)
{
    sc_error err = SC_ERROR_INIT;
    const uint64_t *dropped;
    uint64_t nd;
    sc__stream_counts c;
    uint64_t t0 = sc__trace_now(ld->tr);
    int rc = sc__stream_finish_epoch(ld->stream, ld->cur, &dropped, &nd, &c, &err);
    if (rc == SC_OK)
        rc = sc__ledger_drop(ld->ledger, ld->cur, dropped, nd, &err);
    if (rc == SC_OK)
        rc = sc__ledger_end(ld->ledger, ld->cur, &err);
    if (rc != SC_OK)
        return loader_fail(ld, &err);
    uint64_t t1 = sc__trace_now(ld->tr);
    sc__trace_span(ld->tr, SC__ST_VERIFY, t0, t1, ld->cur, -1, -1, 0);
    sc__trace_epoch_end(ld->tr, t1, ld->cur);
    if (c.hits + c.misses)
        sc__trace_counter(ld->tr, SC__CT_HIT_RATE, t1,
                          100.0 * (double)c.hits / (double)(c.hits + c.misses));
    double spread = c.full_batches ? (double)c.batch_shards / (double)c.full_batches : 0.0;
    if (c.full_batches)
        sc__trace_counter(ld->tr, SC__CT_SHARDS, t1, spread);
    ld->phase = LD_ENDED;
    ld->settled_to = ld->cur + 1;
    rec *r = loader_find_rec(ld, ld->cur);
    if (r)
        loader_rec_advance(r, REC_ENDED);
    sc_epoch_summary *rep = loader_report_of(ld, ld->cur);
    sc__peer_ended(ld->peer, ld->cur);
    if (rep) {
        rep->cache_hits = c.hits;
        rep->cache_misses = c.misses;
        rep->bytes_from_cache = c.bytes_from_cache;
        rep->bytes_from_source = c.bytes_from_source;
        rep->bytes_from_peers = sc__peer_received(ld->peer, ld->cur);
        rep->shards_per_batch = spread;
    }
    return SC_OK;
}

/* Closes the wall clock of the current epoch, once. */
static void loader_stop_clock(sc_loader *ld)
{
    sc_epoch_summary *rep = loader_report_of(ld, ld->cur);
    if (ld->phase != LD_NO_EPOCH && ld->t_begin > 0 && rep) {
        rep->wall_s = loader_now() - ld->t_begin;
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
 * `epoch`'s plan, waited for: its broadcast (posted one epoch ahead, or
 * now for the first epoch) is finished and checked; the next epoch's is
 * posted.  *out is its record.
 */
static int loader_wait_plan(sc_loader *ld, uint64_t epoch, rec **out)
{
    int rc;
    if (!ld->started) {
        ld->started = 1;
        ld->first = ld->settled_to = epoch;
        if ((rc = loader_post(ld, epoch, 0)) != SC_OK)
            return rc;
    }
    if ((rc = loader_post(ld, epoch + 1, 0)) != SC_OK)
        return rc;
    rec *r = *out = loader_find_rec(ld, epoch);
    if (!r) {
        sc_error err;
        sc__seterr(&err, SC_EINVAL, "rank %d: epoch %llu has no plan record", ld->rank,
                   (unsigned long long)epoch);
        return loader_fail(ld, &err);
    }
    if (r->bc_live && (rc = loader_arrive(ld, r)) != SC_OK)
        return rc;
    return r->status != SC_OK ? loader_fail(ld, &r->err) : SC_OK;
}

/*
 * The epoch in the ledger and the stream: a fresh one claims its plan's
 * shards; a resumed one takes the share its checkpoints left.  Sets the
 * batch count; *samples: this rank's samples in it.
 */
static int loader_begin_ledger(sc_loader *ld, const rec *r, uint64_t *samples)
{
    sc_error err = SC_ERROR_INIT;
    sc_plan_info pi;
    sc_plan_get_info(r->plan, &pi);
    ld->nb = ld->plan_nb = pi.batches_per_rank;
    int rc;
    if (ld->resume.pending) {
        *samples = ld->resume.state.sched.nreal;
        rc = loader_begin_resumed(ld, &err); /* sets ld->nb */
    } else {
        ld->resume.offset = 0, ld->resume.resliced = 0;
        sc__share_free(&ld->resume.share);
        rc = sc__ledger_begin(ld->ledger, r->plan, &err);
    }
    return rc != SC_OK ? loader_fail(ld, &err) : SC_OK;
}

static void loader_fill_info(const sc_loader *ld, const rec *r, uint64_t samples,
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
        return loader_stopped(ld);
    int rc = loader_begin_allowed(ld, epoch);
    if (rc != SC_OK)
        return rc;
    loader_stop_clock(ld);
    double t0 = loader_now();
    uint64_t tw = sc__trace_now(ld->tr);
    sc_error terr = SC_ERROR_INIT;
    /* The rings drain here: memory stays bounded, and a crash keeps past epochs. */
    if ((rc = sc__trace_flush(ld->trace, &terr)) != SC_OK)
        return loader_fail(ld, &terr);
    ld->t_ret = 0;
    ld->cur = epoch;
    ld->phase = LD_NO_EPOCH;
    if ((rc = loader_fault_mpi(ld, epoch, &terr)) != SC_OK)
        return loader_fail(ld, &terr);
    rec *r = NULL;
    if ((rc = loader_wait_plan(ld, epoch, &r)) != SC_OK)
        return rc;
    /* Its shards from other nodes in (or given up), it goes to the stream. */
    loader_release(ld, r, 1);
    if (r->status != SC_OK)
        return loader_fail(ld, &r->err);
    double waited = loader_now() - t0;
    sc__trace_span(ld->tr, SC__ST_PLAN_WAIT, tw, sc__trace_now(ld->tr), epoch, -1, -1, 0);

    ld->phase = LD_RUNNING;
    loader_rec_advance(r, REC_BEGUN);
    uint64_t samples = 0;
    sc_plan_rank(r->plan, (uint32_t)ld->rank, NULL, NULL, &samples);
    if ((rc = loader_begin_ledger(ld, r, &samples)) != SC_OK)
        return rc;
    loader_plan_ahead(ld);
    ld->delivered = 0;
    ld->t_begin = t0;
    sc_epoch_summary *rep = loader_report_of(ld, epoch);
    if (!rep) {
        sc_error err;
        sc__seterr(&err, SC_ENOMEM, "rank %d: no memory for epoch reports", ld->rank);
        return loader_fail(ld, &err);
    }
    rep->epoch = epoch;
    if ((rc = loader_poll_verdicts(ld, 0, 0)) != SC_OK)
        return rc;
    if (info)
        loader_fill_info(ld, r, samples, waited, info);
    /* An epoch without batches ends as it begins. */
    return ld->nb == 0 ? loader_end_epoch(ld) : SC_OK;
}

/*
 * The next batch, or SC_END_OF_EPOCH; `skip`: the caller ends the epoch
 * early, so its samples are recorded as skipped by the caller, not
 * delivered, and the batch is not counted as the consumer's.
 */
static int loader_take(sc_loader *ld, sc_batch *batch, int skip)
{
    if (ld->failed)
        return loader_stopped(ld);
    if (ld->phase == LD_NO_EPOCH)
        return sc__seterr(&ld->err, SC_EINVAL, "rank %d: %s before sc_epoch_begin", ld->rank,
                          skip ? "sc_epoch_skip_rest" : "sc_next_batch");
    /* The time since the last batch was handed out is the training step. */
    if (ld->t_ret)
        sc__trace_span(ld->tr, SC__ST_COMPUTE, ld->t_ret, sc__trace_now(ld->tr), ld->cur, -1,
                       (int64_t)ld->delivered - 1, 0);
    ld->t_ret = 0;
    int rc = loader_progress(ld);
    if (rc != SC_OK)
        return rc;
    if (ld->delivered == ld->nb) {
        loader_stop_clock(ld);
        sc_error perr = SC_ERROR_INIT; /* the asks it deferred to its epoch's end */
        if (sc__peer_pump(ld->peer, &perr) != SC_OK)
            return loader_fail(ld, &perr);
        return SC_END_OF_EPOCH;
    }
    sc_error err = SC_ERROR_INIT;
    double waited = 0;
    rc = sc__stream_next(ld->stream, batch, &waited, &err);
    if (ld->tr && rc == SC_OK) {
        uint64_t t = sc__trace_now(ld->tr);
        if (waited > 0)
            sc__trace_span(ld->tr, SC__ST_CONSUMER_WAIT, t - (uint64_t)(waited * 1e9), t,
                           ld->cur, -1, (int64_t)batch->index, 0);
        sc__trace_counter(ld->tr, SC__CT_RING, t, (double)sc__stream_ready(ld->stream));
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
    uint64_t real = batch->size - batch->padded;
    if (rc == SC_OK)
        rc = sc__ledger_progress(ld->ledger, &err);
    if (rc == SC_OK)
        rc = sc__peer_pump(ld->peer, &err);
    if (rc == SC_OK)
        loader_release_next(ld);
    if (rc == SC_OK)
        rc = sc__ledger_check(ld->ledger, ld->cur, batch->ids, batch->size, &err);
    if (rc == SC_OK && skip)
        rc = sc__ledger_skip(ld->ledger, ld->cur, batch->ids, real, &err);
    else if (rc == SC_OK)
        rc = sc__ledger_consume(ld->ledger, ld->cur, batch->ids, real, 0, &err);
    if (rc == SC_OK && batch->padded && !skip)
        rc = sc__ledger_consume(ld->ledger, ld->cur, batch->ids + real, batch->padded, 1,
                                &err);
    if (rc != SC_OK) {
        memset(batch, 0, sizeof *batch);
        return loader_fail(ld, &err);
    }
    sc_epoch_summary *rep = loader_report_of(ld, ld->cur);
    rep->wait_s += waited;
    rep->batches += !skip;
    rep->samples += skip ? 0 : batch->size;
    if (++ld->delivered == ld->nb && (rc = loader_end_epoch(ld)) != SC_OK)
        return rc;
    if ((rc = loader_poll_verdicts(ld, 0, 0)) != SC_OK)
        return rc;
    ld->t_ret = sc__trace_now(ld->tr);
    return SC_OK;
}

int sc_next_batch(sc_loader *ld, sc_batch *batch)
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
        return loader_stopped(ld);
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
 * Waits for `epoch`'s verdict, answering the other ranks' asks for shards
 * meanwhile: a rank done with its epochs may still owe shards to ranks
 * whose epoch waits for them, and so for this verdict.
 */
static int loader_wait_verdict(sc_loader *ld, uint64_t epoch)
{
    const sc_epoch_summary *rep = loader_report_of(ld, epoch);
    for (;;) {
        int rc = loader_poll_verdicts(ld, 0, 0);
        if (rc != SC_OK || !rep || rep->exactly_once.verified || ld->failed)
            return rc;
        /* A rank 0 that closed its loader never joins the verdict: it says so in
           the next plan's broadcast, whose failure ends this wait. */
        rec *next = loader_find_rec(ld, ld->cur + 1);
        if (next && (rc = loader_progress(ld)) == SC_OK && next->status != SC_OK)
            return loader_fail(ld, &next->err);
        if (rc != SC_OK)
            return rc;
        sc_error err = SC_ERROR_INIT;
        if ((rc = sc__peer_pump(ld->peer, &err)) != SC_OK)
            return loader_fail(ld, &err);
        usleep(100);
    }
}

static int loader_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep, int wait)
{
    if (!ld || !rep)
        return SC_EINVAL;
    sc_epoch_summary *mine = loader_report_of(ld, epoch);
    if (!mine || epoch > ld->cur)
        return sc__seterr(&ld->err, SC_EINVAL, "rank %d: epoch %llu has not begun", ld->rank,
                          (unsigned long long)epoch);
    if (wait && epoch >= ld->settled_to)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: epoch %llu is still running (%llu of %llu batches taken)",
                          ld->rank, (unsigned long long)epoch,
                          (unsigned long long)ld->delivered, (unsigned long long)ld->nb);
    if (!ld->failed) {
        uint64_t t0 = sc__trace_now(wait ? ld->tr : NULL);
        int rc = wait ? loader_wait_verdict(ld, epoch) : loader_poll_verdicts(ld, 0, 0);
        sc__trace_span(wait ? ld->tr : NULL, SC__ST_VERIFY, t0, sc__trace_now(ld->tr), epoch,
                       -1, -1, 0);
        if (rc != SC_OK)
            return rc;
    }
    *rep = *loader_report_of(ld, epoch);
    return ld->failed ? loader_stopped(ld) : SC_OK;
}

int sc_epoch_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep)
{
    return loader_report(ld, epoch, rep, 0);
}

int sc_epoch_wait(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep)
{
    return loader_report(ld, epoch, rep, 1);
}

int sc_loader_device(const sc_loader *ld)
{
    return ld ? ld->device : -1;
}

const sc_dataset *sc_loader_dataset(const sc_loader *ld)
{
    return ld ? ld->ds : NULL;
}

int sc_loader_field(const sc_loader *ld, int i, sc_field_info *out)
{
    if (!ld || !out || i < 0 || i >= ld->ds->nfields)
        return SC_EINVAL;
    sc__field f;
    sc__decode_field(ld->ds, i, &f);
    sc__augment_field(ld->ds, i, &f);
    sc__field_info(&f, out);
    return SC_OK;
}

/* ---- checkpoint and resume ------------------------------------------------------ */

int sc_loader_checkpoint(sc_loader *ld, void *buf, size_t cap, size_t *len)
{
    if (!ld || !buf || !len)
        return SC_EINVAL;
    if (ld->failed)
        return loader_stopped(ld);
    if (!ld->started)
        return sc__seterr(&ld->err, SC_EINVAL,
                          "rank %d: no epoch begun yet: nothing to checkpoint", ld->rank);
    int done = ld->phase != LD_NO_EPOCH && ld->delivered == ld->nb, rc = SC_OK;
    sc__ckpt c = {.epoch = ld->cur,
                  .consumed = ld->resume.offset + ld->delivered,
                  .rank = (uint64_t)ld->rank,
                  .world = (uint64_t)ld->size,
                  .fingerprint = ld->ds->fingerprint,
                  .nshards = ld->nshards,
                  .batches = ld->resume.resliced ? ld->nb : ld->plan_nb};
    sc__ckpt_settings(&ld->cfg, &c);
    sc__piece *left = NULL;
    if (ld->resume.resliced) {
        /* Its schedule is not its plan's: the record names what it has left.
           Testing builds can shrink the bound to reach it (SC_FAULT=ckpt-2-pieces). */
        uint64_t max = sc__fault("ckpt-2-pieces") ? 2 : SC__CKPT_MAX_PIECES;
        rc = sc__share_record(&ld->resume.share, ld->delivered, ld->cfg.batch_size, done, max,
                              &c, &left, &ld->err);
    }
    size_t need = sc__ckpt_size(&c);
    if (rc == SC_OK && cap < need) {
        *len = need;
        rc = sc__seterr(&ld->err, SC_EINVAL,
                        "rank %d: this checkpoint needs %zu bytes, not %zu "
                        "(SC_CHECKPOINT_MAX_BYTES always suffice)",
                        ld->rank, need, cap);
    } else if (rc == SC_OK) {
        sc__ledger_flush(ld->ledger); /* the audit trail covers what the checkpoint says */
        sc__ckpt_encode(&c, left, buf);
        *len = need;
    }
    free(left);
    return rc;
}

/* 1 if every record was taken after its epoch's last batch. */
static int loader_all_ended(const sc__ckpt *ck, int n)
{
    for (int i = 0; i < n; i++)
        if (ck[i].consumed != ck[i].batches)
            return 0;
    return n > 0;
}

/*
 * Rank 0's status and checked records to every rank (`rc`: this rank's
 * status so far), back to back in *wire, lens[i] bytes each (rank 0's
 * already).  *shared: the records went out, so every rank goes on to
 * compute the resumption (and agree on it); else rank 0 refused them.
 */
static int loader_share_records(sc_loader *ld, int rc, int *n, sc__ckpt **ck, uint64_t **lens,
                                unsigned char **wire, int *shared, sc_error *err)
{
    long long head[3] = {rc, *n, 0};
    for (int i = 0; ld->rank == 0 && rc == SC_OK && i < *n; i++)
        head[2] += (long long)(*lens)[i];
    SC_MPI_CHECK(err, MPI_Bcast(head, 3, MPI_LONG_LONG, 0, ld->comm));
    if (head[0] != SC_OK)
        return rc != SC_OK ? rc
                           : sc__seterr(err, (int)head[0], "rank %d: rank 0 refused the "
                                        "checkpoints (%s); its own error says why",
                                        ld->rank, sc_status_name((int)head[0]));
    *n = (int)head[1];
    if (ld->rank != 0) {
        *ck = calloc((size_t)*n, sizeof **ck);
        *lens = malloc(sizeof **lens * (size_t)*n);
        *wire = malloc((size_t)head[2] + 1);
    }
    int have = *ck && *lens && *wire;
    SC_MPI_CHECK(err, MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, ld->comm));
    *shared = 1;
    if (!have)
        return rc != SC_OK ? rc
                           : sc__seterr(err, SC_ENOMEM, "rank %d: no memory for %d checkpoints",
                                        ld->rank, *n);
    SC_MPI_CHECK(err, MPI_Bcast(*lens, *n, MPI_UINT64_T, 0, ld->comm));
    SC_MPI_CHECK(err, MPI_Bcast(*wire, (int)head[2], MPI_BYTE, 0, ld->comm));
    return rc;
}

/*
 * Rank 0: the callers' records decoded and checked (sorted by rank), then
 * copied back to back into *wire for the others, lens[i] bytes each.
 */
static int loader_read_records(sc_loader *ld, const void *const *blobs, const size_t *lens,
                               int n, sc__ckpt **ck, uint64_t **sizes, unsigned char **wire,
                               sc_error *err)
{
    *ck = calloc((size_t)(n > 0 ? n : 1), sizeof **ck);
    *sizes = malloc(sizeof **sizes * (size_t)(n > 0 ? n : 1));
    if (!*ck || !*sizes)
        return sc__seterr(err, SC_ENOMEM, "rank 0: no memory for %d checkpoints", n);
    int rc = SC_OK;
    size_t total = 0;
    for (int i = 0; rc == SC_OK && i < n; i++) {
        rc = sc__ckpt_decode(blobs ? blobs[i] : NULL, lens ? lens[i] : 0, i, &(*ck)[i], err);
        total += rc == SC_OK ? (*ck)[i].nraw : 0;
    }
    if (rc == SC_OK && total > INT_MAX)
        rc = sc__seterr(err, SC_EINVAL, "%d checkpoints of %zu bytes: more than one broadcast "
                        "carries", n, total);
    if (rc == SC_OK)
        rc = sc__ckpt_check(*ck, n, ld->ds, &ld->cfg, (uint64_t)ld->size, err);
    if (rc == SC_OK && !(*wire = malloc(total + 1)))
        rc = sc__seterr(err, SC_ENOMEM, "rank 0: no memory for %d checkpoints", n);
    for (size_t i = 0, at = 0; rc == SC_OK && i < (size_t)n; at += (*ck)[i++].nraw) {
        memcpy(*wire + at, (*ck)[i].raw, (*ck)[i].nraw);
        (*sizes)[i] = (*ck)[i].nraw;
    }
    return rc;
}

int sc_loader_resume(sc_loader *ld, const void *const *blobs, const size_t *lens, int nblobs,
                     uint64_t *epoch)
{
    if (!ld || !epoch)
        return SC_EINVAL;
    sc_error err = SC_ERROR_INIT;
    int rc = ld->failed ? loader_stopped(ld) : SC_OK, n = 0;
    if (rc == SC_OK && (ld->started || ld->resume.pending))
        rc = sc__seterr(&err, SC_EINVAL,
                        "rank %d: sc_loader_resume comes right after sc_loader_open, before "
                        "any epoch", ld->rank);
    /* Rank 0's records count: it checks them, then every rank gets them. */
    sc__ckpt *ck = NULL;
    uint64_t *sizes = NULL;
    unsigned char *wire = NULL;
    if (ld->rank == 0 && rc == SC_OK) {
        n = nblobs;
        rc = loader_read_records(ld, blobs, lens, n, &ck, &sizes, &wire, &err);
    }
    int shared = 0;
    rc = loader_share_records(ld, rc, &n, &ck, &sizes, &wire, &shared, &err);
    if (shared) {
        /* Rank 0 holds them decoded and checked already. */
        size_t at = 0;
        for (int i = 0; rc == SC_OK && i < n; at += sizes[i++])
            if (ld->rank != 0)
                rc = sc__ckpt_decode(wire + at, sizes[i], i, &ck[i], &err);
        if (rc == SC_OK)
            rc = sc__resume_compute(ld->ds, &ld->cfg, ck, (uint32_t)ld->size,
                                    (uint32_t)ld->rank, &ld->resume.state, &err);
        /* The run its records name: records of another run may not be mixed in. */
        ld->resume.state.share.run = sc__xxh64(wire, at, 0x72756e);
        rc = loader_agree(ld, rc, &err);
    }
    if (rc == SC_OK && loader_all_ended(ck, n)) {
        /* Every rank had taken its last batch: nothing of the epoch is left. */
        *epoch = ld->resume.state.epoch + 1;
        sc__resume_free(&ld->resume.state);
    } else if (rc == SC_OK) {
        ld->resume.pending = 1;
        ld->resume.happened = 1;
        ld->resume.epoch = *epoch = ld->resume.state.epoch;
        ld->resume.resliced = ld->resume.state.resliced;
        ld->resume.offset = ld->resume.state.offset;
    } else {
        sc__resume_free(&ld->resume.state);
        if (!ld->failed) /* a stopped loader's message is why it stopped */
            ld->err = err;
    }
    free(ck);
    free(sizes);
    free(wire);
    return rc;
}

const char *sc_last_error(const sc_loader *ld)
{
    return ld ? ld->err.msg : "no loader";
}

/* ---- close -------------------------------------------------------------------- */

/*
 * At close, rank 0 names every epoch that was not exactly-once, so that a
 * job whose loop never asked for a verdict (a rank that ran fewer epochs,
 * an epoch left in the middle) does not end as if all were well.
 */
static void loader_say_failed_epochs(sc_loader *ld)
{
    for (uint64_t i = 0; ld->rank == 0 && ld->started && i < ld->nreps; i++) {
        const sc_exactly_once *v = &ld->reps[i].exactly_once;
        if (v->verified && !v->ok)
            sc__log(ld->cfg.log_level, SC__LOG_WARN, 0, "at close: epoch %llu was not "
                    "exactly-once in this run: %s (an epoch left at a checkpoint is completed "
                    "by the job that resumes from it)", (unsigned long long)v->epoch, v->detail);
    }
}

int sc_loader_close(sc_loader *ld)
{
    if (!ld)
        return SC_OK;
    int rc = ld->failed ? ld->fatal.code : SC_OK;
    /* No producer may wait for a transfer while it is joined: reservations withdrawn. */
    sc__peer_give_up(ld->peer, UINT64_MAX, NULL);
    sc__stream_close(ld->stream);
    ld->stream = NULL;
    /* The producers are joined: every ring can be drained and the file finished. */
    sc_error terr = SC_ERROR_INIT;
    if (sc__trace_close(ld->trace, &terr) != SC_OK && rc == SC_OK) {
        rc = terr.code;
        ld->err = terr;
    }
    ld->trace = NULL;
    if (ld->ledger) {
        /*
         * Ranks may close in different epochs.  First what this rank can
         * post alone: its unfinished epoch, abandoned; and on rank 0 one
         * more (empty) plan broadcast, for a rank already waiting on it.
         */
        loader_settle(ld);
        if (ld->rank == 0 && ld->started)
            loader_post(ld, ld->posted_to, 1);
        /* Then the same broadcasts and verifications on every rank. */
        unsigned long long mine[2] = {ld->posted_to, ld->settled_to}, all[2] = {mine[0], mine[1]};
        int e = MPI_Allreduce(mine, all, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, ld->comm);
        if (e != MPI_SUCCESS && rc == SC_OK) /* then this rank finishes only its own */
            rc = sc__mpi_err(&ld->err, e, "MPI_Allreduce of the epochs in flight at close",
                             __FILE__, __LINE__);
        for (uint64_t e = ld->posted_to; e < all[0]; e++)
            loader_post(ld, e, 1);
        for (uint64_t e = ld->settled_to; e < all[1]; e++)
            sc__ledger_abandon(ld->ledger, e, NULL);
        for (int i = 0; i < NREC; i++) {
            rec *r = &ld->recs[i];
            if (r->state != REC_FREE && r->bc_live) {
                sc_plan *got = NULL;
                sc__plan_bcast_finish(&r->bc, NULL, &got, NULL);
                sc_plan_free(got);
                r->bc_live = 0;
            }
        }
        for (uint64_t e = ld->started ? ld->first : 0; e < all[1]; e++) {
            sc_exactly_once v;
            sc_epoch_summary *rep = loader_report_of(ld, e);
            if (sc__ledger_result(ld->ledger, e, 1, &v, NULL) == SC_OK && v.verified && rep)
                rep->exactly_once = v;
        }
        loader_say_failed_epochs(ld);
        /* Every rank is here: the transfers end together (a collective). */
        sc__peer_close(ld->peer);
        ld->peer = NULL;
        sc__ledger_close(ld->ledger);
    }
    for (int i = 0; i < NREC; i++)
        loader_rec_free(ld, &ld->recs[i]);
    sc__resume_free(&ld->resume.state);
    sc__share_free(&ld->resume.share);
    sc_plan_free(ld->last_made);
    sc__dev_close(ld->dev);
    sc_cache_close(ld->cache);
    if (ld->ds)
        sc_dataset_close(ld->ds);
    if (ld->comm != MPI_COMM_NULL)
        MPI_Comm_free(&ld->comm);
    if (ld->hdr != MPI_COMM_NULL)
        MPI_Comm_free(&ld->hdr);
    if (ld->data != MPI_COMM_NULL)
        MPI_Comm_free(&ld->data);
    free(ld->reps);
    free(ld);
    return rc;
}
