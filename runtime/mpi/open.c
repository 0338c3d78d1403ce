/*
 * open.c - the collective halves of sc_dataset_open and sc_cache_open:
 * rank 0 lists a source once and tells everyone; rank 0 draws the job's
 * cache token; one rank a node makes room first.  storage/ opens, this
 * file carries what ranks must agree on, so that storage/ sends no
 * message between ranks.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"
#include "cache.h"
#include "hash.h"
#include "mpierr.h"
#include "node.h"
#include "source.h"

/* Rank 0's token for this job's cache entries: unique, not secret, never 0. */
static uint64_t open_job_token(void)
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
        site.job = open_job_token();
    /* Room first, by one rank a node, so that every rank then sizes its cache from it. */
    if (site.local_rank == 0)
        sc__cache_make_room(ds, &site, cfg);
    SC_MPI_CHECK(err, MPI_Bcast(&site.job, 1, MPI_UINT64_T, 0, comm));
    SC_MPI_CHECK(err, MPI_Barrier(comm));
    return sc__cache_open(ds, &site, cfg, out, err);
}

/*
 * Layout B: rank 0's scan, or its error, to every rank in one broadcast
 * (rc is rank 0's status; the others' is what arrives).
 */
static int open_share_manifest(sc_dataset *ds, MPI_Comm comm, int rc, sc_error *err)
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
    int e = sc__agree_min(comm, got, &all);
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

/*
 * Every rank must read one source.  A copy on each node at one path
 * (sbcast, a prolog's staging, a node-local disk) has its own inode and
 * change time, so its stamp and fingerprint differ from rank 0's: that
 * surfaced at the first plan ("plan for epoch 0 has dataset fingerprint
 * ...") or read ("changed since the dataset was opened").  Collective,
 * whatever rc each rank brings (a failed rank's is left to its error).
 */
static int open_check_one_source(const sc_dataset *ds, MPI_Comm comm, int rc, sc_error *err)
{
    int rank = 0;
    uint64_t mine[2] = {rc == SC_OK, rc == SC_OK ? sc__dataset_view(ds) : 0}, lo[2], hi[2];
    MPI_Comm_rank(comm, &rank);
    SC_MPI_CHECK(err, sc__agree_range_u64(comm, mine, 2, lo, hi));
    if (rc != SC_OK || !lo[0] || lo[1] == hi[1])
        return rc;
    return sc__seterr(err, SC_EINVAL, "rank %d: source '%s' is not %s on every rank (%s size, "
                      "modification time, inode or change time differ between ranks, or some "
                      "cannot stat it), as when each node has its own copy at one path (sbcast, "
                      "a prolog's staging, a node-local disk): give every rank one shared copy; "
                      "SC_CACHE_DIR keeps each node's shards on its local disk", rank, ds->path,
                      ds->layout == 'B' ? "the same files" : "the same file",
                      ds->layout == 'B' ? "their first, middle or last file's" : "its");
}

int sc_dataset_open(MPI_Comm comm, const sc_config *cfg, sc_dataset **out,
                    sc_error *err)
{
    if (!cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_dataset_open: NULL argument");
    *out = NULL;
    sc_dataset *ds = NULL;
    int rc = sc__agree(comm, sc__dataset_new(comm, cfg, &ds, err), "could not find the source", err);
    if (rc == SC_OK) { /* on every rank alike: sc__agree */
        rc = sc__dataset_scan(ds, cfg, err);
        /* Rank 0's failure to scan travels in the manifest: every rank fails with it. */
        if (sc__dataset_shared(ds))
            rc = open_share_manifest(ds, comm, rc, err);
        if (rc == SC_OK)
            rc = sc__dataset_finish(ds, cfg, err);
        rc = open_check_one_source(ds, comm, rc, err);
    }
    if (rc != SC_OK) {
        sc_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return sc__errok(err);
}
