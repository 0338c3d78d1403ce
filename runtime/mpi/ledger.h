/*
 * ledger.h - the ownership ledger: who owns which shard in which epoch, checked
 * on every batch and verified exactly-once at every epoch's end.
 *
 * Claims go into an MPI RMA window of epoch-tagged owner words, one per
 * shard and epoch slot, spread over the ranks (shard s lives on rank
 * s mod R), updated with MPI_Fetch_and_op / MPI_Compare_and_swap under a
 * passive-target lock_all: no barrier, and a rank that claims a shard
 * another rank already holds for the same epoch learns who.  Each batch's
 * sample ids are checked against the plan of that batch's epoch.  At the
 * end of an epoch each rank folds what it delivered into a sketch and posts
 * a non-blocking reduction whose result is read later, so fast ranks never
 * wait for slow ones.  This module must never block in claim, check,
 * consume or end, except for the RMA flushes of a claim; and it must never
 * report ok for an epoch whose reduction has not completed.
 */
#ifndef SC_LEDGER_H
#define SC_LEDGER_H

#include <stdio.h>

#include "shardcache.h"

/* Epochs that can be open at once on a rank (the current, the next, and
 * one whose verification is still in flight). */
#define SC__LEDGER_SLOTS 3

typedef struct sc__ledger sc__ledger;

typedef struct sc__ledger_opts {
    int full;              /* SC_VERIFY=full: per-sample counts */
    const char *audit_dir; /* SC_AUDIT_DIR, or NULL */
} sc__ledger_opts;

/*
 * Collective over comm (which it duplicates).  `shard_first` ([nshards+1],
 * the first sample id of each shard) must outlive the ledger; `ncuts` is
 * the most cuts a plan of the job makes (SC__PLAN_MAX_CUTS): each has a
 * word of its own, claimed by the rank it is cut to.
 */
int sc__ledger_open(MPI_Comm comm, uint64_t nshards, uint64_t ncuts,
                    const uint64_t *shard_first, const sc__ledger_opts *opts, sc__ledger **out,
                    sc_error *err);
void sc__ledger_close(sc__ledger *l);

/*
 * Starts an epoch on this rank: claims its home shards and the cuts made to
 * it in `plan` (which must outlive the epoch's verification) in the window.  SC_EOWNERSHIP names the
 * epoch, shard, this rank and the owner on a conflict.  Needs no other
 * rank to be in this epoch.
 */
int sc__ledger_begin(sc__ledger *l, const sc_plan *plan, sc_error *err);

/*
 * A resumed epoch (sc_loader_resume): no plan, no claims; this rank's share
 * is given as its slots (the first nreal real, the rest padding repeats)
 * and the samples it drops.  Every batch is checked against the share
 * instead of shard owners; the real slots and the drops are expected in
 * the sketch.
 */
int sc__ledger_begin_share(sc__ledger *l, uint64_t epoch, const uint64_t *slots,
                           uint64_t nslots, uint64_t nreal, const uint64_t *dropped,
                           uint64_t ndropped, sc_error *err);

/*
 * Accounts ids in `epoch` that this run does not deliver: delivered before
 * the checkpoint it resumed from (dropped = 0), or dropped by the remainder
 * policy (1).  They count as expected and accounted on this rank; `audit`
 * writes the drops to this run's trail (0: the earlier run's has them).
 */
int sc__ledger_account(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                       int dropped, int audit, sc_error *err);

/* Writes the audit trail through, e.g. when a checkpoint is taken. */
void sc__ledger_flush(sc__ledger *l);

/*
 * Lets MPI progress other ranks' claims on the words this rank holds:
 * where the transport has no remote atomics (TCP between nodes) they
 * complete only while this rank is inside MPI.  Called once per batch.
 */
int sc__ledger_progress(sc__ledger *l, sc_error *err);

/* Counts n padding repeats an earlier run delivered in `epoch` (a resume). */
int sc__ledger_padded_before(sc__ledger *l, uint64_t epoch, uint64_t n, sc_error *err);

/* Every id must lie in a piece this rank serves in `epoch`; else SC_EOWNERSHIP. */
int sc__ledger_check(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                     sc_error *err);

/*
 * Records deliveries (padded: repeats flagged for padding, not counted) or
 * drops by the remainder policy, which count as accounted for.
 */
int sc__ledger_consume(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                       int padded, sc_error *err);
int sc__ledger_drop(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                    sc_error *err);
/*
 * Samples already recorded as delivered that the caller did not use (taken
 * ahead, or their processing failed): counted as skipped by the caller.
 * SC_EINVAL once the epoch has ended here.
 */
int sc__ledger_unused(sc__ledger *l, uint64_t epoch, uint64_t n, sc_error *err);
/* Records samples the caller skipped (never handed out): accounted for, not delivered. */
int sc__ledger_skip(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                    sc_error *err);

/*
 * Slot of a batch whose sample `id` was skipped for `why` (SC_REPLACED_*),
 * `by` in its place: id is accounted for, skipped with its reason, and `by`
 * counts as a replacement, not a delivery (`delivered` 0: the slot was
 * never handed out, the caller ended the epoch early).  Both go to the
 * audit trail, flagged.
 */
int sc__ledger_replaced(sc__ledger *l, uint64_t epoch, uint64_t id, uint64_t by, int why,
                        int delivered, sc_error *err);

/*
 * After an error in `epoch` (begun or not), still posts this rank's part of
 * the reduction, marked failed, so that no other rank waits forever and
 * every rank's verdict says the epoch is not exactly-once.  `bad`: the
 * sample whose image did not decode that stopped this rank (the verdict
 * names it and this rank), or UINT64_MAX.
 */
int sc__ledger_abandon(sc__ledger *l, uint64_t epoch, uint64_t bad, sc_error *err);

/* Why a rank stopped on a bad sample: which, in what epoch, under what policy. */
typedef struct sc__ledger_stopped {
    uint64_t sample; /* UINT64_MAX: not on a bad sample */
    uint64_t epoch;  /* the epoch it stopped in */
    int skip;        /* SC_BAD_SAMPLE=skip, and nothing could take its place */
} sc__ledger_stopped;

/*
 * sc__ledger_abandon of `epoch` by a rank that stopped as `why` says, in
 * `epoch` or in an earlier one (an epoch whose plan other ranks have and
 * may run while this rank never will: their verdict on it names the stop).
 */
int sc__ledger_stop(sc__ledger *l, uint64_t epoch, const sc__ledger_stopped *why,
                    sc_error *err);

/* This rank is done with `epoch`: posts the reduction, returns at once. */
int sc__ledger_end(sc__ledger *l, uint64_t epoch, sc_error *err);

/*
 * The verdict on `epoch`: with wait=0, out->verified is 0 while the
 * reduction is in flight.  An epoch's slot is released once its verdict
 * has been read with verified=1.
 */
int sc__ledger_result(sc__ledger *l, uint64_t epoch, int wait, sc_exactly_once *out,
                      sc_error *err);

/* The hash the sketches sum, exposed for tests: strong, keyed by epoch. */
uint64_t sc__ledger_sample_hash(uint64_t epoch, uint64_t id);

#endif /* SC_LEDGER_H */
