/*
 * Shards that move between nodes (mpi/peer.c) under mpiexec -n 1, 2 and 4,
 * each rank its own pretend node (SC_TEST_NODES) with its own cache
 * directory: in global and sticky mode no shard comes from the source
 * twice, the moved shards come from their old owners' caches, every
 * batch carries the source's bytes and every epoch is exactly-once; a
 * transfer whose checksum does not match is not served: the shard comes
 * from the source, and the job goes on exactly-once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static char dir[1024], src[1200];

enum { NSAMPLES = 576, W = 3, EPOCHS = 4 };
enum { DATASET_BYTES = NSAMPLES * (W * 4 + 8) }; /* int32 x[W], int64 y */

/* What a job's epochs read, summed over the ranks. */
typedef struct totals {
    uint64_t source[EPOCHS], peers[EPOCHS];
} totals;

static sc_config config(sc_shuffle_mode mode, uint64_t shard, uint64_t seed)
{
    sc_config c = sc_t_config(src, dir, shard, 8, seed);
    c.mode = mode;
    c.exchange = 0.4;
    /* A node of its own: its own cache directory. */
    size_t n = strlen(c.cache_dir);
    snprintf(c.cache_dir + n, sizeof c.cache_dir - n, "/node%d", rank);
    return c;
}

/* EPOCHS epochs of `c`, every batch checked against the source; the job's totals. */
static totals run(const sc_config *c)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, c, &ld, &err), &err);
    uint64_t mine[2 * EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(sc_epoch_begin(ld, (uint64_t)e, NULL), SC_OK);
        sc_batch b;
        int rc;
        char why[256];
        while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
            if (!sc_t_samples_ok(&b, W, NSAMPLES, why, sizeof why))
                fail_msg("rank %d: epoch %d: %s", rank, e, why);
            sc_batch_release(ld, &b);
        }
        if (rc != SC_END_OF_EPOCH)
            fail_msg("rank %d: epoch %d: %s: %s", rank, e, sc_status_name(rc), sc_last_error(ld));
    }
    for (int e = 0; e < EPOCHS; e++) {
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, (uint64_t)e, &rep), SC_OK);
        if (!rep.exactly_once.ok)
            fail_msg("epoch %d: %s", e, rep.exactly_once.detail);
        mine[e] = rep.bytes_from_source;
        mine[EPOCHS + e] = rep.bytes_from_peers;
    }
    assert_int_equal(sc_loader_close(ld), SC_OK);
    uint64_t all[2 * EPOCHS];
    MPI_Allreduce(mine, all, 2 * EPOCHS, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    totals t;
    for (int e = 0; e < EPOCHS; e++)
        t.source[e] = all[e], t.peers[e] = all[EPOCHS + e];
    return t;
}

static uint64_t sum(const uint64_t *v, int from)
{
    uint64_t s = 0;
    for (int e = from; e < EPOCHS; e++)
        s += v[e];
    return s;
}

/*
 * Random shard sizes and seeds: no shard comes from the source twice in a
 * job (epoch 0 reads nearly all of them; one it dropped by policy may
 * first be read later).
 */
static void check_mode(sc_shuffle_mode mode)
{
    uint64_t seed = sc_test_seed();
    for (unsigned k = 0; k < sc_test_cases(3); k++) {
        uint64_t shard = 4 + (seed + k) % 9;
        sc_config c = config(mode, shard, seed + k);
        totals t = run(&c);
        if (t.source[0] == 0 || sum(t.source, 0) > DATASET_BYTES)
            fail_msg("seed %llu, shard %llu: %llu bytes from the source in epoch 0, %llu "
                     "after, of a %d-byte dataset", (unsigned long long)(seed + k),
                     (unsigned long long)shard, (unsigned long long)t.source[0],
                     (unsigned long long)sum(t.source, 1), DATASET_BYTES);
        /* One node has nothing to send; several move shards every epoch. */
        if ((size > 1) != (sum(t.peers, 0) > 0))
            fail_msg("%d ranks: %llu bytes from other nodes", size,
                     (unsigned long long)sum(t.peers, 0));
    }
}

static void test_global_reads_the_source_once(void **state)
{
    (void)state;
    check_mode(SC_SHUFFLE_GLOBAL);
}

static void test_sticky_reads_the_source_once(void **state)
{
    (void)state;
    check_mode(SC_SHUFFLE_STICKY);
}

/* A transfer that fails its checksum is never served: the source serves it. */
static void test_corrupt_transfer_is_not_served(void **state)
{
    (void)state;
    if (size == 1)
        skip(); /* nothing moves between nodes */
    setenv("SC_FAULT", "peer-corrupt", 1);
    sc_config c = config(SC_SHUFFLE_GLOBAL, 6, 7);
    totals t = run(&c);
    unsetenv("SC_FAULT");
    assert_int_equal(sum(t.peers, 0), 0);
    assert_true(sum(t.source, 1) > 0);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "peer");
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", size);
    setenv("SC_TEST_NODES", nodes, 1); /* every rank a node */
    sc_t_shared_source(src, sizeof src, dir, NSAMPLES, W);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_reads_the_source_once),
        cmocka_unit_test(test_sticky_reads_the_source_once),
        cmocka_unit_test(test_corrupt_transfer_is_not_served),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
