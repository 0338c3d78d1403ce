/*
 * jobwide.c - the settings every rank must share, compared at open.
 *
 * The plan comes from rank 0 and each rank builds its batches from it with
 * its own settings: a rank with another seed, batch size or decode would
 * build other batches than the plan's, or refuse the plan at the first
 * epoch's begin, after a whole open and a warm-up.  One hash of the
 * settings' texts per rank, reduced; only when they differ is rank 0's text
 * sent, so that the message names the setting and both values.
 */
#include "jobwide.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "config.h"
#include "error.h"
#include "hash.h"
#include "mpierr.h"

/* What a rank's plan, schedule or batches depend on (local ones may differ). */
static const char *const jobwide[] = {
    "SC_SEED",        "SC_BATCH_SIZE",  "SC_SHUFFLE",    "SC_EXCHANGE",
    "SC_REMAINDER",   "SC_SHARD_SIZE",  "SC_FIELDS",     "SC_SAMPLE_AXIS",
    "SC_DECODE",      "SC_DECODE_SIZE", "SC_AUGMENT",    "SC_AUGMENT_LAYOUT",
    "SC_VERIFY",      "SC_PEERS",       "SC_CACHE_SHARE", "SC_PARTITIONS",
    "SC_DECODE_CHANNELS", "SC_DECODE_EXIF", "SC_BAD_SAMPLE",
};
#define NJOBWIDE (sizeof jobwide / sizeof jobwide[0])
#define JOBWIDE_TEXT 1024 /* a setting's text, at most (SC_FIELDS) */

static void jobwide_text(const sc_config *cfg, size_t i, char *buf)
{
    if (sc__config_text(cfg, jobwide[i], buf, JOBWIDE_TEXT) != SC_OK)
        snprintf(buf, JOBWIDE_TEXT, "?");
}

static uint64_t jobwide_hash(const sc_config *cfg)
{
    sc__xxh64_state h;
    sc__xxh64_init(&h, 0);
    char buf[JOBWIDE_TEXT];
    for (size_t i = 0; i < NJOBWIDE; i++) {
        jobwide_text(cfg, i, buf);
        sc__xxh64_update(&h, buf, strlen(buf) + 1);
    }
    return sc__xxh64_final(&h);
}

/* This rank's first setting that differs from rank 0's texts, or -1. */
static int jobwide_first_diff(const sc_config *cfg, const char *theirs, char *mine)
{
    for (size_t i = 0; i < NJOBWIDE; i++) {
        jobwide_text(cfg, i, mine);
        if (strcmp(mine, theirs + i * JOBWIDE_TEXT) != 0)
            return (int)i;
    }
    return -1;
}

/* Rank 0's texts to all, then the first rank that differs names the setting in msg. */
static int jobwide_name_diff(MPI_Comm comm, int rank, const sc_config *cfg, char *theirs,
                             char *mine, char msg[SC_ERROR_MSG_MAX])
{
    int rc = MPI_Bcast(theirs, (int)(NJOBWIDE * JOBWIDE_TEXT), MPI_CHAR, 0, comm);
    int d = jobwide_first_diff(cfg, theirs, mine), bad = d >= 0 ? rank : INT_MAX, first = 0;
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, comm);
    if (rc == MPI_SUCCESS && rank == first)
        snprintf(msg, SC_ERROR_MSG_MAX, "%s is '%.120s' on rank %d and '%.120s' on rank 0: "
                 "every rank of a job needs the same %s",
                 jobwide[d], mine, rank, theirs + (size_t)d * JOBWIDE_TEXT, jobwide[d]);
    if (rc == MPI_SUCCESS && first != INT_MAX)
        rc = MPI_Bcast(msg, SC_ERROR_MSG_MAX, MPI_CHAR, first, comm);
    return rc;
}

int sc__jobwide_check(MPI_Comm comm, const sc_config *cfg, sc_error *err)
{
    uint64_t h = jobwide_hash(cfg), lo = h, hi = h;
    SC_MPI_CHECK(err, sc__agree_range_u64(comm, &h, 1, &lo, &hi));
    if (lo == hi)
        return SC_OK;
    char mine[JOBWIDE_TEXT], msg[sizeof err->msg] = "";
    int rank, have, all;
    MPI_Comm_rank(comm, &rank);
    char *theirs = malloc(NJOBWIDE * JOBWIDE_TEXT); /* only on this rare path */
    have = theirs != NULL;
    SC_MPI_CHECK(err, sc__agree_min(comm, have, &all));
    if (!all) {
        free(theirs);
        return sc__seterr(err, SC_EINVAL, "rank %d: the ranks' job-wide settings differ "
                          "(SC_SEED, SC_BATCH_SIZE, ...: every rank needs the same)", rank);
    }
    for (size_t i = 0; rank == 0 && i < NJOBWIDE; i++)
        jobwide_text(cfg, i, theirs + i * JOBWIDE_TEXT);
    int rc = jobwide_name_diff(comm, rank, cfg, theirs, mine, msg);
    free(theirs);
    if (rc != MPI_SUCCESS)
        return sc__mpi_err(err, rc, "jobwide_name_diff", __FILE__, __LINE__);
    return sc__seterr(err, SC_EINVAL, "rank %d: %s", rank,
                      msg[0] ? msg : "the ranks' job-wide settings differ");
}
