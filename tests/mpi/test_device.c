/*
 * The device path on the simulated device (SC_DEVICE=sim), under mpiexec
 * -n 1, 2 and 4: no GPU needed, and the same order rules as CUDA.
 *
 * A consumer reads each batch back on its own stream, late (its "kernel"
 * sleeps first), and releases the batch on that stream at once, as a GPU
 * loop does: every byte read back is the host path's, in the host path's
 * order, although the copy engine could overwrite a slot many times over
 * in that delay.  A consumer that releases without naming its stream is
 * caught (poisoned or overwritten bytes).  Ranks keep a device their
 * caller chose; two ranks of a node on one device are refused, on every
 * rank, naming both counts; a thread that never bound the device fails.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_sim.h"
#include "hash.h"
#include "sc_h5test.h"
#include "sc_test.h"

#ifndef SC_TESTING
int main(void)
{
    return 77; /* the simulated device exists only in testing builds */
}
#else

static int rank, size, local_rank, local_size; /* local: this node's ranks */
static char dir[1024], src[1200];

enum { SHARD = 16, W = 5, NSAMPLES = 20 * SHARD - 3, B = 6 };

static const sc__devops *sim = &sc__devops_sim;

static sc_config config(sc_device_mode device)
{
    sc_config c = sc_t_config(src, dir, SHARD, B, 99);
    c.prefetch_batches = 3; /* a small ring: slots are reused often */
    c.device = device;
    return c;
}

/* One batch as the consumer got it: its ids, and the bytes it read back. */
typedef struct taken {
    sc_batch b; /* data[] and ids point at the copies below */
    uint64_t ids[B];
    int32_t x[B * W];
    int64_t y[B];
} taken;

/*
 * Runs one epoch; on the device, reads every batch back on `stream` after
 * delay_us and releases it on `release_on` right away (before the read has
 * run).  Returns the batches, as read.
 */
static taken *run_epoch(sc_loader *ld, void *stream, void *release_on, unsigned delay_us,
                        uint64_t *n)
{
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 0, &info), SC_OK);
    taken *t = calloc(info.batches ? info.batches : 1, sizeof *t);
    sc_batch b;
    sc_error err = SC_ERROR_INIT;
    int rc;
    for (*n = 0; (rc = sc_batch_next(ld, &b)) == SC_OK; (*n)++) {
        taken *k = &t[*n];
        k->b = b;
        memcpy(k->ids, b.ids, sizeof k->ids);
        k->b.ids = k->ids;
        k->b.data[0] = k->x;
        k->b.data[1] = k->y;
        if (b.device < 0) {
            memcpy(k->x, b.data[0], sizeof k->x);
            memcpy(k->y, b.data[1], sizeof k->y);
        } else {
            assert_int_equal(sc_batch_wait_on(ld, &b, stream), SC_OK);
            SC_ASSERT_OK(sc__sim_read(stream, k->x, b.data[0], sizeof k->x, delay_us, &err),
                         &err);
            SC_ASSERT_OK(sc__sim_read(stream, k->y, b.data[1], sizeof k->y, delay_us, &err),
                         &err);
        }
        assert_int_equal(sc_batch_release_on(ld, &b, release_on), SC_OK);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(*n, info.batches);
    sc__sim_stream_sync(stream);
    return t;
}

static uint64_t hash_batches(const taken *t, uint64_t n)
{
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++)
        h = sc__xxh64(&t[i].ids, sizeof t[i].ids + sizeof t[i].x + sizeof t[i].y, h);
    return h;
}

static uint64_t bad_batches(const taken *t, uint64_t n)
{
    uint64_t bad = 0;
    char why[256];
    for (uint64_t i = 0; i < n; i++)
        bad += !sc_t_samples_ok(&t[i].b, W, NSAMPLES, why, sizeof why);
    return bad;
}

/* The host path's batches, for comparison. */
static uint64_t host_hash(void)
{
    sc_config c = config(SC_DEVICE_HOST);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    uint64_t n = 0;
    taken *t = run_epoch(ld, NULL, NULL, 0, &n);
    assert_int_equal(bad_batches(t, n), 0);
    uint64_t h = hash_batches(t, n);
    free(t);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    return h;
}

/*
 * One epoch on the simulated device, read back 2 ms late per field on a
 * consumer stream, released on that stream (ordered) or on the legacy
 * stream (not).  Returns how many batches came back wrong; *hash is what
 * came back.
 */
static uint64_t sim_epoch(int ordered, uint64_t *hash)
{
    sc_config c = config(SC_DEVICE_SIM);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    void *stream = NULL;
    SC_ASSERT_OK(sim->stream_new(&stream, &err), &err);
    uint64_t n = 0;
    taken *t = run_epoch(ld, stream, ordered ? stream : NULL, 2000, &n);
    assert_true(n > c.prefetch_batches); /* slots were reused */
    assert_int_equal(t[0].b.device, local_rank % 8);
    uint64_t bad = bad_batches(t, n);
    *hash = hash_batches(t, n);
    free(t);
    sim->stream_free(stream); /* before close, as CUDA allows: its events live on */
    assert_int_equal(sc_loader_close(ld), SC_OK);
    return bad;
}

static void test_late_consumer_reads_the_host_bytes(void **state)
{
    (void)state;
    uint64_t want = host_hash(), got = 0;
    setenv("SC_SIM_COPY_US", "50", 1);
    assert_int_equal(sim_epoch(1, &got), 0);
    assert_int_equal(got, want);
    unsetenv("SC_SIM_COPY_US");
}

/* The race of releasing at once: the simulation must catch it. */
static void test_unordered_release_is_caught(void **state)
{
    (void)state;
    uint64_t got = 0;
    assert_true(sim_epoch(0, &got) > 0);
}

/* A framework picks each rank's device; the loader keeps it. */
static void test_callers_device_is_kept(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    int want = (local_rank + 1) % 8; /* never the one the loader would pick */
    SC_ASSERT_OK(sim->bind(want, &err), &err);
    sc_config c = config(SC_DEVICE_SIM);
    sc_loader *ld = NULL;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 0, &info), SC_OK);
    sc_batch b;
    assert_int_equal(sc_batch_next(ld, &b), SC_OK);
    assert_int_equal(b.device, want);
    assert_int_equal(sc_batch_wait(ld, &b), SC_OK);
    char why[256];
    if (!sc_t_samples_ok(&b, W, NSAMPLES, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(sc_batch_release(ld, &b), SC_OK);
    assert_int_equal(sc_loader_close(ld), SC_OK);
}

static void test_shared_device_is_refused(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sim->bind(0, &err), &err); /* every rank on device 0 */
    sc_config c = config(SC_DEVICE_SIM);
    sc_loader *ld = NULL;
    int rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), most = 0;
    MPI_Allreduce(&local_size, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (most == 1) { /* one rank a node: nothing shared */
        SC_ASSERT_OK(rc, &err);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        return;
    }
    assert_int_equal(rc, SC_ECUDA);
    assert_null(ld);
    char want[64]; /* every rank with a twin on its node says so itself */
    snprintf(want, sizeof want, "%d ranks on this node share 1 GPU of 8 visible", local_size);
    if (local_size > 1 && !strstr(err.msg, want))
        fail_msg("rank %d: %s", rank, err.msg);
}

/* Ranks asking for different devices would take different paths: refused. */
static void test_ranks_must_agree_on_the_device(void **state)
{
    (void)state;
    if (size == 1)
        skip();
    sc_config c = config(rank == 0 ? SC_DEVICE_SIM : SC_DEVICE_HOST);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_null(ld);
    if (!strstr(err.msg, "differs between ranks (from host to sim)"))
        fail_msg("rank %d: %s", rank, err.msg);
}

static void *unbound_thread(void *arg)
{
    sc_error *err = arg;
    void *event = NULL;
    if (sim->event_new(&event, err) == SC_OK)
        sim->event_free(event);
    return NULL;
}

static void test_unbound_thread_fails(void **state)
{
    (void)state;
    sc_error err = SC_ERROR_INIT;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, unbound_thread, &err), 0);
    pthread_join(t, NULL);
    assert_int_equal(err.code, SC_ECUDA);
    assert_non_null(strstr(err.msg, "has not bound a device"));
}

static void test_device_modes(void **state)
{
    (void)state;
    sc_features f;
    assert_int_equal(sc_features_get(&f), SC_OK);
    sc_error err = SC_ERROR_INIT;
    sc_loader *ld = NULL;
    /* auto: the GPU only when every rank sees one; none here means host. */
    sc_config c = config(SC_DEVICE_AUTO);
    if (f.cuda_devices > 0)
        return; /* a GPU is here: tests/mpi/test_gpu.c tests cuda and auto */
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 0, &info), SC_OK);
    sc_batch b;
    assert_int_equal(sc_batch_next(ld, &b), SC_OK);
    assert_int_equal(b.device, -1);
    assert_int_equal(sc_batch_release(ld, &b), SC_OK);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    c = config(SC_DEVICE_CUDA);
    int rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err);
    assert_true(rc == SC_ECUDA || rc == SC_ENOTSUP);
    assert_null(ld);
    if (!strstr(err.msg, f.cuda ? "no device" : "SC_DEVICE=cuda"))
        fail_msg("%s", err.msg);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "device");
    snprintf(src, sizeof src, "%s/src.h5", dir);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    if (rank == 0)
        assert_int_equal(sc_t_write_samples(src, 0, NSAMPLES, W), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_consumer_reads_the_host_bytes),
        cmocka_unit_test(test_unordered_release_is_caught),
        cmocka_unit_test(test_unbound_thread_fails),
        cmocka_unit_test(test_device_modes),
        cmocka_unit_test(test_callers_device_is_kept),
        cmocka_unit_test(test_shared_device_is_refused),
        cmocka_unit_test(test_ranks_must_agree_on_the_device),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
#endif /* SC_TESTING */
