/*
 * node.c - a rank's node: the ranks that share it, and what they hold
 * alike or apart.
 */
#include "node.h"

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "mpierr.h"

/*
 * The ranks of comm on this rank's node.  Testing builds: SC_TEST_NODES=N
 * deals the ranks into N pretend nodes in blocks (rank * N / size), so
 * that what only happens between nodes runs on one host.
 */
static int node_split(MPI_Comm comm, MPI_Comm *node)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
#ifdef SC_TESTING
    const char *s = getenv("SC_TEST_NODES");
    long n = s ? strtol(s, NULL, 10) : 0;
    MPI_Comm_size(comm, &size);
    if (n > 0)
        return MPI_Comm_split(comm, (int)((long)rank * n / size), rank, node);
#endif
    (void)size;
    return MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node);
}

int sc__node_local(MPI_Comm comm, int *local_rank, int *local_size, sc_error *err)
{
    int lr = 0, ls = 1;
    MPI_Comm node;
    SC_MPI_CHECK(err, node_split(comm, &node));
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

/*
 * Every node-local rank's `bytes` of `mine`, in node-rank order, into *all
 * (free it).  A rank without memory (mine NULL, or no room for *all) says
 * so before the gather, so that no rank skips a collective the others enter.
 */
static int node_gather(MPI_Comm comm, const void *mine, int bytes, unsigned char **all,
                       int *n, sc_error *err)
{
    int have = 0, every = 0;
    MPI_Comm node;
    *all = NULL;
    SC_MPI_CHECK(err, node_split(comm, &node));
    int e = MPI_Comm_size(node, n);
    if (e == MPI_SUCCESS && mine)
        have = (*all = malloc((size_t)*n * (size_t)bytes)) != NULL;
    if (e == MPI_SUCCESS)
        e = sc__agree_min(node, have, &every);
    if (e == MPI_SUCCESS && every)
        e = MPI_Allgather(mine, bytes, MPI_BYTE, *all, bytes, MPI_BYTE, node);
    MPI_Comm_free(&node);
    if (e != MPI_SUCCESS)
        return sc__mpi_err(err, e, "MPI_Allgather on the node's communicator", __FILE__,
                           __LINE__);
    if (!every)
        return sc__seterr(err, SC_ENOMEM, "a rank of this node has no memory for %d bytes "
                          "per rank", bytes);
    return SC_OK;
}

int sc__node_same(MPI_Comm comm, const char *id, int bytes, int *distinct, int *twin,
                  sc_error *err)
{
    int me = 0, n = 0, rec = bytes + (int)sizeof(int);
    unsigned char *all = NULL, *mine = malloc((size_t)rec);
    *distinct = 0;
    *twin = -1;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &me));
    if (mine) { /* a record: the id, then the rank */
        memcpy(mine, id, (size_t)bytes);
        memcpy(mine + bytes, &me, sizeof me);
    }
    int rc = node_gather(comm, mine, rec, &all, &n, err);
    for (int i = 0; rc == SC_OK && i < n; i++) {
        const char *a = (const char *)all + (size_t)i * (size_t)rec;
        int first = a[0] != '\0', r; /* an empty id is no device: not counted */
        for (int j = 0; j < i && first; j++)
            first = strncmp(a, (const char *)all + (size_t)j * (size_t)rec, (size_t)bytes) != 0;
        *distinct += first;
        memcpy(&r, a + bytes, sizeof r);
        if (r != me && *twin < 0 && id[0] && !strncmp(a, id, (size_t)bytes))
            *twin = r;
    }
    free(all);
    free(mine);
    return rc;
}

int sc__node_ids(MPI_Comm comm, int *node_of, sc_error *err)
{
    int rank = 0, lowest = 0;
    MPI_Comm node;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &rank));
    SC_MPI_CHECK(err, node_split(comm, &node));
    int e = MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    if (e != MPI_SUCCESS)
        return sc__mpi_err(err, e, "MPI_Allreduce on the node's communicator", __FILE__,
                           __LINE__);
    SC_MPI_CHECK(err, MPI_Allgather(&lowest, 1, MPI_INT, node_of, 1, MPI_INT, comm));
    return SC_OK;
}

int sc__node_overlap(MPI_Comm comm, const void *mask, int bytes, int *sharers, sc_error *err)
{
    unsigned char *all = NULL;
    int n = 0;
    *sharers = 1;
    int rc = node_gather(comm, mask, bytes, &all, &n, err);
    if (rc == SC_OK) {
        *sharers = 0;
        for (int i = 0; i < n; i++) {
            int common = 0;
            for (int k = 0; k < bytes && !common; k++)
                common = (all[(size_t)i * (size_t)bytes + (size_t)k] &
                          ((const unsigned char *)mask)[k]) != 0;
            *sharers += common;
        }
    }
    free(all);
    return rc;
}
