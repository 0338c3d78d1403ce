/*
 * loader_state.h - what the loader's files share (private to runtime/api/).
 *
 * The public loader (include/shardcache.h: sc_loader_*, sc_epoch_*,
 * sc_batch_next, sc_batch_*) is the glue between the plan broadcast, the
 * ownership ledger, the cache and the stream, run from the caller's thread
 * (the only thread of shardcache that calls MPI).  Its files, lowest first,
 * each calling only those above it in this list:
 *
 *   loader_faults.c  the test-only faults (SC_FAULT), in testing builds only
 *   loader_plans.c   epoch records: plan broadcasts, their arrival and
 *                    release to the stream, verdicts; failing and settling
 *   loader_resume.c  sc_loader_checkpoint and sc_loader_resume, and the
 *                    resumed epoch's begin (the computation: resume.c)
 *   loader.c         the epoch and batch API
 *   loader_open.c    open (collective, agreed step by step) and close
 *
 * Epoch e's life on one rank: its plan's broadcast is posted when epoch e-1
 * begins (rank 0 computes it then), and tested on every sc_batch_next of
 * epoch e-1; as soon as it has arrived and checked out, it is pushed to the
 * stream, whose producers load its shards behind e-1's and build its first
 * batch right after e-1's last.  sc_epoch_begin(e) claims the shards in the
 * ledger and returns; every batch handed out is checked and recorded; the
 * hand-out of the last batch posts the epoch's verification, whose verdict
 * is picked up by later calls without waiting.  An error stops the loader:
 * the epoch is abandoned in the ledger (so no other rank waits on it) and
 * every later call returns the same status.
 */
#ifndef SC_LOADER_STATE_H
#define SC_LOADER_STATE_H

#include <stdint.h>

#include "plan_bcast.h"
#include "device.h"
#include "invariant.h"
#include "ledger.h"
#include "peer.h"
#include "resume.h"
#include "skiplist.h"
#include "source.h"
#include "stream.h"
#include "trace.h"
#include "tring.h"

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
typedef enum sc__loader_rec_state {
    REC_FREE = 0,
    REC_POSTED,
    REC_ARRIVED,
    REC_BEGUN,
    REC_ENDED,
    REC_JUDGED,
} sc__loader_rec_state;

typedef struct sc__loader_rec {
    sc__loader_rec_state state;
    uint64_t epoch;
    sc__plan_bcast bc;
    int bc_live;      /* posted, not finished */
    int status;       /* SC_OK, or why the plan was refused (err says it) */
    sc_error err;
    sc_plan *plan;    /* what this rank runs (rank 0: its own) */
    sc_plan *extra;   /* a plan kept only for a fault (stale, own seed) */
    const sc_plan *use; /* held back: queued in the stream once its transfers are in */
    sc__sched sched;  /* use's schedule, computed on arrival; the stream takes it */
    uint32_t *reads;  /* the shards it reads, in order of first use: the cache's future */
    uint64_t nreads;
} sc__loader_rec;

/* Moves a record forward to `s` (a record never goes back). */
static inline void sc__loader_rec_advance(sc__loader_rec *r, sc__loader_rec_state s)
{
    if (r->state < s)
        r->state = s;
}

/* Where the current epoch is on this rank. */
typedef enum sc__loader_phase {
    LD_NO_EPOCH = 0, /* none begun yet, being begun, or its begin failed */
    LD_RUNNING,      /* begun: batches are being handed out */
    LD_ENDED,        /* its last batch is out (or it was abandoned) */
} sc__loader_phase;

/*
 * Waiting for a verdict after rank 0 closed: how long its part may take to
 * arrive (it posted it before closing if it stopped in that epoch).
 */
#define LOADER_CLOSED_GRACE_S 2.0
/* A verdict's wait says it is waiting after this long, then at each doubling. */
#define LOADER_VERDICT_SAY_S 60.0

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
    sc__loader_rec recs[NREC];
    sc_plan *last_made;      /* rank 0: the newest plan computed (sticky's prev) */
    int started;
    uint64_t first, cur, posted_to; /* posted_to: one past the newest posted */
    sc__loader_phase phase;  /* of epoch `cur` */
    uint64_t settled_to;     /* every epoch below it is ended or abandoned here */
    uint64_t delivered, nb;
    double t_begin;
    sc_epoch_summary *reps;   /* [nreps], by epoch - first */
    uint64_t nreps;
    /*
     * Two messages: why the loader stopped (the first fatal error, which
     * every later call returns and close reports, whatever happens after)
     * and the last failed call's (sc_loader_last_error), which may be a caller's
     * mistake the loader survives.
     */
    int failed;
    sc_error fatal;
    sc_error err;
#ifdef SC_TESTING
    struct {
        unsigned mask;       /* loader_faults.c's LF_* */
        int rank;            /* SC_FAULT_RANK: the rank they hit */
        uint64_t epoch;      /* SC_FAULT_EPOCH: the epoch they hit */
    } fault;
#endif
    sc__trace *trace;        /* NULL: SC_TRACE unset */
    sc__tring *tr;           /* the caller's thread */
    uint64_t t_ret;          /* when sc_batch_next last returned a batch: the step began */
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

/* ---- loader_plans.c: epoch records, broadcasts, verdicts ---------------------- */

/* Records the loader's first fatal error and stops it; returns its code. */
int sc__loader_fail(sc_loader *ld, const sc_error *err);
/* A call on a stopped loader: it fails with why the loader stopped. */
int sc__loader_stopped(sc_loader *ld);
/* After an error or at close: the epoch being begun or run is abandoned. */
void sc__loader_settle(sc_loader *ld);
/*
 * Orders the shards `epoch`'s schedule `sc` reads (sc__sched_order; plan:
 * the one it came from, or NULL) for the stream, and copies them into
 * r->reads unless r is NULL: what the cache's Belady is told.
 */
int sc__loader_note_reads(sc_loader *ld, uint64_t epoch, sc__loader_rec *r, sc__sched *sc,
                          const sc_plan *plan, sc_error *err);
/* `epoch`'s record, or NULL. */
sc__loader_rec *sc__loader_find_rec(sc_loader *ld, uint64_t epoch);
/* Frees a record's plans and clears it. */
void sc__loader_rec_free(sc_loader *ld, sc__loader_rec *r);
/* `epoch`'s summary, made on first use (NULL: before the first epoch, or no memory). */
sc_epoch_summary *sc__loader_report_of(sc_loader *ld, uint64_t epoch);
/* Picks up verdicts that have arrived; waits for `epoch`'s if wait. */
int sc__loader_poll_verdicts(sc_loader *ld, int wait, uint64_t epoch);
/* Posts the broadcast of `epoch`'s plan (rank 0 computes it first). */
int sc__loader_post(sc_loader *ld, uint64_t epoch, int closing);
/* Finishes `r`'s broadcast and, on success, queues the epoch in the stream. */
int sc__loader_arrive(sc_loader *ld, sc__loader_rec *r);
/* Queues a held-back epoch in the stream once its transfers are in (waits if `wait`). */
int sc__loader_release(sc_loader *ld, sc__loader_rec *r, int wait);
/* The held-back epoch after the current one, if its transfers are in. */
void sc__loader_release_next(sc_loader *ld);
/* Lets the next epoch's plan arrive while this one runs; never waits. */
int sc__loader_progress(sc_loader *ld);
/* Tells the cache what this rank reads from now on, for Belady eviction. */
void sc__loader_plan_ahead(sc_loader *ld);

/* ---- loader_resume.c ------------------------------------------------------------ */

/* The resumed epoch in the ledger and its schedule in the stream; sets ld->nb. */
int sc__loader_begin_resumed(sc_loader *ld, sc_error *err);

/* ---- loader_faults.c: test-only faults (SC_FAULT), testing builds only -------- */

#ifdef SC_TESTING
/* The faults this rank was asked for, read once at open (SC_FAULT*). */
void sc__loader_read_faults(sc_loader *ld);
/* `epoch`'s plan parameters as a faulty rank would compute them. */
void sc__loader_fault_params(const sc_loader *ld, uint64_t epoch, sc_plan_params *p);
/* The plan-level faults: this rank runs another plan than rank 0's (*use). */
int sc__loader_fault_plan(const sc_loader *ld, sc__loader_rec *r, const sc__loader_rec *prev,
                          const sc_plan_params *p, const sc_plan **use, sc_error *err);
/* An MPI call MPI itself refuses, on the loader's communicator. */
int sc__loader_fault_mpi(const sc_loader *ld, uint64_t epoch, sc_error *err);
/* The schedule-level faults of `epoch` (SC__SCHED_*). */
unsigned sc__loader_fault_sched(const sc_loader *ld, uint64_t epoch);
/* The most pieces a resliced checkpoint may name (SC_FAULT=ckpt-2-pieces: 2). */
uint64_t sc__loader_ckpt_max_pieces(void);
#else
#define sc__loader_read_faults(ld) ((void)(ld))
#define sc__loader_fault_params(ld, epoch, p) ((void)0)
#define sc__loader_fault_plan(ld, r, prev, p, use, err) SC_OK
#define sc__loader_fault_mpi(ld, epoch, err) SC_OK
#define sc__loader_fault_sched(ld, epoch) 0u
#define sc__loader_ckpt_max_pieces() ((uint64_t)SC__CKPT_MAX_PIECES)
#endif

#endif /* SC_LOADER_STATE_H */
