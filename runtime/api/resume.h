/*
 * resume.h - checkpoints of where each rank is in an epoch, and the
 * resumption of an interrupted epoch on the same or another number of
 * ranks.
 *
 * A checkpoint is a small self-checking record per rank (epoch, batches
 * consumed, and every input its schedule depends on).  Because a rank's
 * schedule is a pure function of them (sc__schedule), a resuming job can
 * recompute what every old rank delivered and what it had left: on the same
 * number of ranks each rank continues its own schedule at its next batch;
 * on another, the samples left are dealt out again in contiguous shares
 * with equal batch counts.  This module must never decide anything a rank
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
 * inputs, every old rank once), and that this job (its dataset and config)
 * can resume them; sorts them by rank.
 */
int sc__ckpt_check(sc__ckpt *ck, int n, const sc_dataset *ds, const sc_config *cfg,
                   sc_error *err);

/* What one rank of the resuming job does in the interrupted epoch. */
typedef struct sc__resume {
    uint64_t epoch;
    sc__sched sched;        /* its slots and drops */
    /* Accounted on rank 0 only, so that the epoch's verdict covers both runs: */
    uint64_t *before, nbefore;             /* delivered before the checkpoint */
    uint64_t *dropped_old, ndropped_old;   /* dropped, in the old run's trail already */
    uint64_t *dropped_new, ndropped_new;   /* dropped, never recorded (another world size) */
    uint64_t padded_before;                /* padding repeats delivered before it */
} sc__resume;

/* From checkpoints checked by sc__ckpt_check, for `rank` of `world`. */
int sc__resume_compute(const sc_dataset *ds, const sc_config *cfg, const sc__ckpt *ck,
                       uint32_t world, uint32_t rank, sc__resume *out, sc_error *err);
void sc__resume_free(sc__resume *r);

#endif /* SC_RESUME_H */
