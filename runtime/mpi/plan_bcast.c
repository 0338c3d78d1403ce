/*
 * plan_bcast.c - the plan broadcast.
 */
#include "plan_bcast.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "mpierr.h"
#include "plan_state.h"

#define WORD 8

enum { IDLE = 0, HEADER_POSTED = 1, PAYLOAD_POSTED = 2, DONE = 3 };

static size_t plan_bcast_words(size_t len)
{
    return (len + WORD - 1) / WORD;
}

static int plan_bcast_begin(sc__plan_bcast *b, sc__plan_bcast *after, MPI_Comm comm,
                            MPI_Comm data, int root, const sc_plan *plan, int root_status,
                            uint64_t note, uint64_t epoch, sc_error *err)
{
    memset(b, 0, sizeof *b);
    b->comm = comm;
    b->data = data;
    b->after = after;
    b->root = root;
    b->word = MPI_DATATYPE_NULL;
    b->req[0] = b->req[1] = MPI_REQUEST_NULL;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &b->rank));
    SC_MPI_CHECK(err, MPI_Type_contiguous(WORD, MPI_BYTE, &b->word));
    SC_MPI_CHECK(err, MPI_Type_commit(&b->word));

    b->head[3] = epoch;
    b->plan = plan;
    if (b->rank == root) {
        if (plan) {
            size_t len = 0;
            const void *wire = sc__plan_wire(plan, &len);
            /* The payload travels in whole words; copy to pad the tail. */
            if (plan_bcast_words(len) > INT_MAX)
                root_status = SC_EOVERFLOW;
            else if (!(b->buf = calloc(plan_bcast_words(len), WORD)))
                root_status = SC_ENOMEM;
            else {
                memcpy(b->buf, wire, len);
                b->len = len;
                b->head[0] = len;
                b->head[1] = plan->info.hash;
            }
        }
        b->head[2] = (uint64_t)(-(int64_t)(b->len ? SC_OK : root_status));
        if (!plan)
            b->head[1] = note;
    }
    SC_MPI_CHECK(err, MPI_Ibcast(b->head, 4, MPI_UINT64_T, root, comm, &b->req[0]));
    b->stage = HEADER_POSTED;
    if (b->rank == root && b->len) {
        SC_MPI_CHECK(err, MPI_Ibcast(b->buf, (int)plan_bcast_words(b->len), b->word, root,
                                     data, &b->req[1]));
        b->stage = PAYLOAD_POSTED;
    }
    return SC_OK;
}

int sc__plan_bcast_start(sc__plan_bcast *b, sc__plan_bcast *after, MPI_Comm comm,
                         MPI_Comm data, int root, const sc_plan *plan, int root_status,
                         uint64_t epoch, sc_error *err)
{
    return plan_bcast_begin(b, after, comm, data, root, plan, root_status, 0, epoch, err);
}

int sc__plan_bcast_closing(sc__plan_bcast *b, sc__plan_bcast *after, MPI_Comm comm,
                           MPI_Comm data, int root, uint64_t begun, uint64_t epoch,
                           sc_error *err)
{
    return plan_bcast_begin(b, after, comm, data, root, NULL, SC_END_OF_EPOCH, begun, epoch,
                            err);
}

static int plan_bcast_post_payload(sc__plan_bcast *b, sc_error *err);

/*
 * Payloads are posted in the order the broadcasts started: before posting
 * its own, a broadcast makes the one before it post (waiting for that
 * one's header, which was posted earlier on the same communicator).
 */
static int plan_bcast_post_previous(sc__plan_bcast *b, sc_error *err)
{
    sc__plan_bcast *a = b->after;
    if (!a || a->stage != HEADER_POSTED)
        return SC_OK;
    SC_MPI_CHECK(err, MPI_Wait(&a->req[0], MPI_STATUS_IGNORE));
    return plan_bcast_post_payload(a, err);
}

/* Header is here: a non-root allocates and posts the payload. */
static int plan_bcast_post_payload(sc__plan_bcast *b, sc_error *err)
{
    int rc = plan_bcast_post_previous(b, err);
    if (rc != SC_OK)
        return rc;
    b->stage = PAYLOAD_POSTED;
    if (b->rank == b->root || b->head[0] == 0)
        return SC_OK;
    if (plan_bcast_words(b->head[0]) > INT_MAX)
        return sc__seterr(err, SC_EOVERFLOW,
                          "rank %d: plan for epoch %llu announced as %llu "
                          "bytes, more than MPI can broadcast",
                          b->rank, (unsigned long long)b->head[3],
                          (unsigned long long)b->head[0]);
    b->len = (size_t)b->head[0];
    if (!(b->buf = calloc(plan_bcast_words(b->len), WORD)))
        return sc__seterr(err, SC_ENOMEM,
                          "rank %d: no memory for the %zu-byte plan of epoch "
                          "%llu",
                          b->rank, b->len, (unsigned long long)b->head[3]);
    SC_MPI_CHECK(err, MPI_Ibcast(b->buf, (int)plan_bcast_words(b->len), b->word, b->root,
                                 b->data, &b->req[1]));
    return SC_OK;
}

int sc__plan_bcast_test(sc__plan_bcast *b, int *done, sc_error *err)
{
    int flag = 0, rc;
    *done = 0;
    if (b->stage == HEADER_POSTED) {
        SC_MPI_CHECK(err, MPI_Test(&b->req[0], &flag, MPI_STATUS_IGNORE));
        if (!flag)
            return SC_OK;
        if ((rc = plan_bcast_post_payload(b, err)) != SC_OK)
            return rc;
    }
    SC_MPI_CHECK(err, MPI_Testall(2, b->req, &flag, MPI_STATUSES_IGNORE));
    *done = flag;
    return SC_OK;
}

static void plan_bcast_release(sc__plan_bcast *b)
{
    free(b->buf);
    b->buf = NULL;
    if (b->word != MPI_DATATYPE_NULL)
        MPI_Type_free(&b->word);
    b->stage = DONE; /* a later broadcast may still look at it via `after` */
}

int sc__plan_bcast_finish(sc__plan_bcast *b, const sc_plan_params *expect,
                          sc_plan **out, sc_error *err)
{
    int rc = SC_OK, size = 0;
    unsigned long long e = (unsigned long long)b->head[3];
    sc_plan *plan = NULL;

    *out = NULL;
    if (b->stage == HEADER_POSTED) {
        int m = MPI_Wait(&b->req[0], MPI_STATUS_IGNORE);
        if (m != MPI_SUCCESS)
            rc = sc__mpi_err(err, m, "MPI_Wait", __FILE__, __LINE__);
        else
            rc = plan_bcast_post_payload(b, err);
    }
    if (rc == SC_OK) {
        int m = MPI_Waitall(2, b->req, MPI_STATUSES_IGNORE);
        if (m != MPI_SUCCESS)
            rc = sc__mpi_err(err, m, "MPI_Waitall", __FILE__, __LINE__);
    }
    if (rc != SC_OK) {
        plan_bcast_release(b);
        return rc;
    }

    int root_status = -(int)(int64_t)b->head[2];
    if (b->head[0] == 0 && root_status == SC_END_OF_EPOCH) {
        plan_bcast_release(b);
        unsigned long long begun = (unsigned long long)b->head[1];
        if (!begun)
            return sc__seterr(err, SC_EPLAN, "rank %d: rank %d closed its loader before "
                              "beginning any epoch", b->rank, b->root);
        return sc__seterr(err, SC_EPLAN, "rank %d: rank %d closed its loader after beginning "
                          "epoch %llu, its last (this rank waited for epoch %llu's plan)",
                          b->rank, b->root, begun - 1, e);
    }
    if (b->head[0] == 0) {
        plan_bcast_release(b);
        return sc__seterr(err, SC_EPLAN,
                          "rank %d: rank %d could not compute the plan for "
                          "epoch %llu (%s: %s); its own error says why",
                          b->rank, b->root, e, sc_status_name(root_status),
                          sc_strerror(root_status));
    }
    if (b->rank != b->root) {
        rc = sc_plan_decode(b->buf, b->len, &plan, err);
        if (rc != SC_OK) {
            plan_bcast_release(b);
            return sc__errctx(err, rc, "rank %d: plan for epoch %llu from rank %d",
                              b->rank, e, b->root);
        }
        if (plan->info.hash != b->head[1]) {
            rc = sc__seterr(err, SC_EPLAN,
                            "rank %d: plan for epoch %llu hashes to %016llx, "
                            "rank %d announced %016llx",
                            b->rank, e, (unsigned long long)plan->info.hash,
                            b->root, (unsigned long long)b->head[1]);
            sc_plan_free(plan);
            plan_bcast_release(b);
            return rc;
        }
    }
    plan_bcast_release(b);

    const sc_plan *check = plan ? plan : b->plan;
    MPI_Comm_size(b->comm, &size);
    if (expect && (uint32_t)size != expect->world_size)
        rc = sc__seterr(err, SC_EPLAN,
                        "rank %d: epoch %llu: the communicator has %d ranks, "
                        "this rank was configured for %u",
                        b->rank, e, size, expect->world_size);
    else if (expect && check)
        rc = sc__plan_matches(check, expect, b->rank, err);
    if (rc != SC_OK) {
        sc_plan_free(plan);
        return rc;
    }
    *out = plan;
    return SC_OK;
}

int sc_plan_share(MPI_Comm comm, const sc_plan_params *params,
                  const sc_plan *prev, sc_plan **out, sc_error *err)
{
    sc__plan_bcast b;
    sc_plan *mine = NULL, *got = NULL;
    sc_error local = SC_ERROR_INIT;
    int rank = 0, rc, made = SC_OK;

    if (!params || !out)
        return sc__seterr(err, SC_EINVAL, "sc_plan_share: NULL argument");
    *out = NULL;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    if (rank == 0)
        made = sc_plan_create(params, prev, &mine, &local);
    /* One broadcast in flight: headers and payload can share `comm`. */
    rc = sc__plan_bcast_start(&b, NULL, comm, comm, 0, mine, made, params->epoch,
                              err);
    if (rc == SC_OK)
        rc = sc__plan_bcast_finish(&b, params, &got, err);
    if (made != SC_OK) {
        /* Rank 0's own reason beats the generic "rank 0 failed". */
        if (err)
            *err = local;
        return made;
    }
    if (rc != SC_OK) {
        sc_plan_free(mine);
        return rc;
    }
    *out = rank == 0 ? mine : got;
    return sc__errok(err);
}
