/*
 * node.c - a rank's node, and the collective halves of opening a source
 * and a cache.
 */
#include "node.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "hash.h"
#include "mpierr.h"
#include "source.h"

int sc__node_local(MPI_Comm comm, int *local_rank, int *local_size, sc_error *err)
{
    int rank = 0, lr = 0, ls = 1;
    MPI_Comm node;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    SC_MPI_CHECK(err, MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                          &node));
    int e = MPI_Comm_rank(node, &lr);
    if (e == MPI_SUCCESS)
        e = MPI_Comm_size(node, &ls);
    MPI_Comm_free(&node); /* a failed free leaks a handle, nothing else */
    if (e != MPI_SUCCESS)
        return sc__mpi_err(err, e, "MPI_Comm_rank/size of the node's communicator", __FILE__,
                           __LINE__);
    if (local_rank)
        *local_rank = lr;
    if (local_size)
        *local_size = ls;
    return SC_OK;
}

/* Every rank's id and comm rank, gathered on its node (free *all). */
static int node_gather(MPI_Comm comm, const char *id, int bytes, char **all, int **ranks,
                       int *n, sc_error *err)
{
    int rank = 0;
    MPI_Comm node;
    *all = NULL;
    *ranks = NULL;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    SC_MPI_CHECK(err, MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                          &node));
    int e = MPI_Comm_size(node, n);
    if (e == MPI_SUCCESS) {
        *all = malloc((size_t)*n * (size_t)bytes);
        *ranks = malloc(sizeof **ranks * (size_t)*n);
    }
    if (e == MPI_SUCCESS && *all && *ranks)
        e = MPI_Allgather(id, bytes, MPI_CHAR, *all, bytes, MPI_CHAR, node);
    if (e == MPI_SUCCESS && *all && *ranks)
        e = MPI_Allgather(&rank, 1, MPI_INT, *ranks, 1, MPI_INT, node);
    MPI_Comm_free(&node);
    if (e != MPI_SUCCESS)
        return sc__mpi_err(err, e, "MPI_Allgather of the node's device ids", __FILE__,
                           __LINE__);
    if (!*all || !*ranks)
        return sc__seterr(err, SC_ENOMEM, "no memory for the node's device ids");
    return SC_OK;
}

int sc__node_same(MPI_Comm comm, const char *id, int bytes, int *distinct, int *twin,
                  sc_error *err)
{
    char *all;
    int *ranks, n = 0, me = 0;
    *distinct = 0;
    *twin = -1;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &me));
    int rc = node_gather(comm, id, bytes, &all, &ranks, &n, err);
    for (int i = 0; rc == SC_OK && i < n; i++) {
        const char *a = all + (size_t)i * (size_t)bytes;
        int first = a[0] != '\0'; /* an empty id is no device: not counted */
        for (int j = 0; j < i && first; j++)
            first = strncmp(a, all + (size_t)j * (size_t)bytes, (size_t)bytes) != 0;
        *distinct += first;
        if (ranks[i] != me && *twin < 0 && id[0] && !strncmp(a, id, (size_t)bytes))
            *twin = ranks[i];
    }
    free(all);
    free(ranks);
    return rc;
}

/* Rank 0's token for this job's cache entries: unique, not secret, never 0. */
static uint64_t node_job_token(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed[3] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid()};
    return sc__xxh64(seed, sizeof seed, UINT64_C(0x6a6f62746f6b656e) /* "jobtoken" */) | 1;
}

int sc_cache_open(sc_dataset *ds, MPI_Comm comm, const sc_config *cfg,
                  sc_cache **out, sc_error *err)
{
    if (!ds || !cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_cache_open: NULL argument");
    *out = NULL;
    sc__cache_site site = {0, 0, 1, 0};
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &site.rank));
    /* Ranks sharing a node share its local disk; their local rank names the dir. */
    int rc = sc__node_local(comm, &site.local_rank, &site.local_size, err);
    if (rc != SC_OK)
        return rc;
    if (site.rank == 0)
        site.job = node_job_token();
    SC_MPI_CHECK(err, MPI_Bcast(&site.job, 1, MPI_UINT64_T, 0, comm));
    return sc__cache_open(ds, &site, cfg, out, err);
}

/*
 * Every rank's status of a step, agreed: a step that failed on one rank
 * fails on all, before the next collective, so that no rank waits in one
 * alone (a source missing on one node, say).
 */
static int node_agree(MPI_Comm comm, int rc, const char *what, sc_error *err)
{
    int worst = rc, rank = 0;
    MPI_Comm_rank(comm, &rank);
    SC_MPI_CHECK(err, MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, comm));
    if (rc == SC_OK && worst != SC_OK)
        return sc__seterr(err, worst, "rank %d: another rank could not %s (%s)", rank, what,
                          sc_status_name(worst));
    return rc;
}

/*
 * Layout B: rank 0's scan, or its error, to every rank in one broadcast
 * (rc is rank 0's status; the others' is what arrives).
 */
static int node_share_manifest(sc_dataset *ds, MPI_Comm comm, int rc, sc_error *err)
{
    int rank = 0;
    void *buf = NULL;
    size_t len = 0;
    uint64_t n = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0 && sc__dataset_manifest(ds, rc, err ? err->msg : NULL, &buf, &len) == SC_OK)
        n = len <= INT_MAX ? len : 0;
    SC_MPI_CHECK(err, MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm));
    /* Every rank has room for the manifest, or none takes part in its broadcast. */
    int got = rank == 0 || !n || (buf = malloc(n)) != NULL, all = got;
    int e = MPI_Allreduce(&got, &all, 1, MPI_INT, MPI_MIN, comm);
    if (e == MPI_SUCCESS && all && n)
        e = MPI_Bcast(buf, (int)n, MPI_BYTE, 0, comm);
    if (e != MPI_SUCCESS) {
        free(buf);
        return sc__mpi_err(err, e, "MPI_Bcast of the source manifest", __FILE__, __LINE__);
    }
    if (!all)
        rc = sc__seterr(err, SC_ENOMEM, "rank %d: source '%s': %s", rank, ds->path,
                        got ? "another rank has no memory for the manifest"
                            : "no memory for the manifest");
    else if (rank != 0 && n)
        rc = sc__dataset_take_manifest(ds, buf, n, err);
    else if (rc == SC_OK && !n)
        rc = sc__seterr(err, SC_ENOMEM, "rank %d: source '%s': the manifest is too large "
                        "or there was no memory for it", rank, ds->path);
    free(buf);
    return rc;
}

int sc_dataset_open(MPI_Comm comm, const sc_config *cfg, sc_dataset **out,
                    sc_error *err)
{
    if (!cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_dataset_open: NULL argument");
    *out = NULL;
    sc_dataset *ds = NULL;
    int rc = node_agree(comm, sc__dataset_new(comm, cfg, &ds, err), "find the source", err);
    if (rc == SC_OK) {
        rc = sc__dataset_scan(ds, cfg, err);
        /* Rank 0's failure to scan travels in the manifest: every rank fails with it. */
        if (sc__dataset_shared(ds))
            rc = node_share_manifest(ds, comm, rc, err);
    }
    if (rc == SC_OK)
        rc = sc__dataset_finish(ds, cfg, err);
    if (rc != SC_OK) {
        sc_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return sc__errok(err);
}
