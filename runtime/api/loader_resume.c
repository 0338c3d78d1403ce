/*
 * loader_resume.c - the loader's checkpoints and resumption: a rank's
 * record of where it is in an epoch (sc_loader_checkpoint), and the
 * records of an interrupted job, checked on rank 0, shared with every rank
 * and turned into this rank's part of the resumed epoch (sc_loader_resume),
 * which its begin then claims (sc__loader_begin_resumed).  The resumption
 * itself, a pure function of the records, is resume.c's; the records'
 * bytes are ckpt.c's.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "error.h"
#include "hash.h"
#include "loader_state.h"
#include "mpierr.h"

int sc_loader_checkpoint(sc_loader *ld, void *buf, size_t cap, size_t *len)
{
    if (!ld || !buf || !len)
        return SC_EINVAL;
    if (ld->failed)
        return sc__loader_stopped(ld);
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
        /* Its schedule is not its plan's: the record names what it has left. */
        uint64_t max = sc__loader_ckpt_max_pieces();
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
    SC_MPI_CHECK(err, sc__agree_min(ld->comm, have, &have));
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
    int rc = ld->failed ? sc__loader_stopped(ld) : SC_OK, n = 0;
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
        rc = sc__agree(ld->comm, rc, "could not resume from the checkpoints", &err);
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

/*
 * The resumed epoch in the ledger: this rank's share, and on rank 0 what
 * the run before delivered or dropped, so that the verdict covers both;
 * then its schedule goes to the stream.
 */
int sc__loader_begin_resumed(sc_loader *ld, sc_error *err)
{
    SC__ASSERT(ld->resume.pending); /* once, at the resumed epoch's begin */
    const sc__resume *r = &ld->resume.state;
    uint64_t e = ld->resume.epoch;
    int rc = sc__ledger_begin_share(ld->ledger, e, r->sched.ids, r->sched.nslots,
                                    r->sched.nreal, r->sched.dropped, r->sched.ndropped, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->before.v, r->before.n, 0, 0, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->dropped_old.v, r->dropped_old.n, 1, 0, err);
    if (rc == SC_OK)
        rc = sc__ledger_account(ld->ledger, e, r->dropped_new.v, r->dropped_new.n, 1, 1, err);
    if (rc == SC_OK && r->padded_before)
        rc = sc__ledger_padded_before(ld->ledger, e, r->padded_before, err);
    ld->nb = r->sched.nslots / ld->cfg.batch_size;
    if (rc == SC_OK)
        rc = sc__loader_note_reads(ld, e, sc__loader_find_rec(ld, e), &ld->resume.state.sched,
                                   NULL, err);
    if (rc == SC_OK)
        sc__loader_plan_ahead(ld); /* before the stream reads a shard of it */
    if (rc == SC_OK)
        rc = sc__stream_push(ld->stream, e, &ld->resume.state.sched, err); /* takes it */
    ld->resume.pending = 0;
    sc__share_free(&ld->resume.share);
    ld->resume.share = ld->resume.state.share; /* for its checkpoints */
    memset(&ld->resume.state.share, 0, sizeof ld->resume.state.share);
    sc__resume_free(&ld->resume.state);
    return rc;
}
