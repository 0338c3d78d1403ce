/*
 * resume.h - checkpoints of where each rank is in an epoch, and the
 * resumption of an interrupted epoch on the same or another number of
 * ranks.
 *
 * A checkpoint is a small self-checking record per rank (epoch, batches
 * consumed, and every input its schedule depends on).  Because a rank's
 * schedule is a pure function of them (sc__schedule), a resuming job can
 * recompute what every old rank delivered and what it had left: on the same
 * number of ranks each rank continues its own schedule at its next batch,
 * and so does every rank of a job of any size with partitions when the
 * old ranks stood at the same batch (the global batches do not depend on
 * the world size); otherwise the samples left are dealt out again in
 * contiguous shares with equal batch counts.  A rank of an epoch dealt out again records
 * what it has left explicitly (a resliced record, ckpt.h), so that such an
 * epoch can be checkpointed and dealt out again in turn, on any number of
 * ranks, any number of times.  This module must never decide anything a rank
 * could not recompute: every rank derives the same resumption from the same
 * checkpoints, with no messages beyond their broadcast.
 */
#ifndef SC_RESUME_H
#define SC_RESUME_H

#include "ckpt.h"
#include "schedule.h"
#include "shardcache.h"

/* The settings a rank's schedule depends on (seed ... window), from a config. */
void sc__ckpt_settings(const sc_config *cfg, sc__ckpt *c);

/*
 * Checks that n checkpoints are one job's, at one moment (same epoch and
 * inputs, every old rank once), and that this job (its dataset and config,
 * on `world` ranks) can resume them; sorts them by rank.
 */
int sc__ckpt_check(sc__ckpt *ck, int n, const sc_dataset *ds, const sc_config *cfg,
                   uint64_t world, sc_error *err);

/* A list of sample ids, grown by appends (room for cap). */
typedef struct sc__ids {
    uint64_t *v;
    uint64_t n;
    size_t cap;
} sc__ids;

/*
 * This rank's share of an epoch dealt out again (after a resume on another
 * number of ranks), kept for its checkpoints: its samples in its order as
 * pieces of the canonical space (ckpt.h), of which the first nreal fill its
 * real slots and the last ndropped are its remainder policy's drops.
 */
typedef struct sc__share {
    sc__piece *pieces;
    uint64_t npieces;
    size_t cap;                         /* room for pieces */
    uint64_t nreal, nslots, ndropped;   /* as its schedule's */
    uint64_t world0, batches0;          /* the epoch's plan */
    uint64_t run;                       /* this run: a hash of the records it resumed */
    /* Rank 0 only, carried in its records: what the runs before this one did. */
    uint64_t padded_before, dropped_before;
} sc__share;

/* What one rank of the resuming job does in the interrupted epoch. */
typedef struct sc__resume {
    uint64_t epoch;
    uint64_t offset;        /* not dealt out again: batches of its plan schedule taken before */
    int resliced;           /* dealt out again: `share` is this rank's */
    sc__sched sched;        /* its slots and drops */
    sc__share share;
    /* Accounted on rank 0 only, so that the epoch's verdict covers both runs: */
    sc__ids before;         /* delivered before the checkpoint */
    sc__ids dropped_old;    /* dropped, in an earlier run's trail already */
    sc__ids dropped_new;    /* dropped, never recorded (another world size) */
    uint64_t padded_before;                /* padding repeats delivered before it */
} sc__resume;

/*
 * From checkpoints checked by sc__ckpt_check, for `rank` of `world`.  Plain
 * records on their own number of ranks: every rank continues its schedule.
 * Otherwise the samples left, S (plain records: each old rank's schedule
 * after what it delivered; resliced ones: their pieces; in record order),
 * are dealt out again in contiguous shares.
 */
int sc__resume_compute(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                       uint32_t world, uint32_t rank, sc__resume *out, sc_error *err);
void sc__resume_free(sc__resume *r);

/*
 * The resliced fields of rank c->rank's record (c->epoch set) after
 * `consumed` of its share's batches of B slots (`done`: its epoch has ended,
 * so its drops are recorded): *left[c->npieces] (to free) is what it has
 * left.  SC_ENOTSUP naming the bound when that needs more than `max` pieces.
 */
int sc__share_record(const sc__share *s, uint64_t consumed, uint64_t B, int done,
                     uint64_t max, sc__ckpt *c, sc__piece **left, sc_error *err);
void sc__share_free(sc__share *s);

#endif /* SC_RESUME_H */
