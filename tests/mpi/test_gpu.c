/*
 * The CUDA device path on a real GPU, under mpiexec -n 1, 2 and 4; skipped
 * (exit 77) where no GPU is visible, which is every CI machine:
 * scripts/gpu-check runs it where one is lent.
 *
 * A fresh process (no device chosen) gets device node-local rank; every
 * batch of two epochs is on the device, and its bytes, copied back, are
 * its ids' samples (a variable-length field's too: its values on the
 * device, its offsets in host memory); the verdicts are exactly-once; auto picks the GPU; a
 * device the caller made current is kept; more ranks than GPUs on a node
 * are refused on every rank, naming both counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_h5test.h"
#include "sc_test.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_HEADERS 1
#endif

static int rank, size, ngpu;
static char dir[1024], src[1200];

enum { SHARD = 16, W = 5, NSAMPLES = 40 * SHARD - 3, B = 8 };

static sc_config config(sc_device_mode device)
{
    sc_config c = sc_t_config(src, dir, SHARD, B, 5);
    c.prefetch_batches = 3;
    c.device = device;
    return c;
}

/* More ranks on this node (one node here) than GPUs: refused, every rank. */
static int refused(int rc, const sc_error *err)
{
    if (size <= ngpu)
        return 0;
    assert_int_equal(rc, SC_ECUDA);
    char want[64];
    snprintf(want, sizeof want, "%d ranks on this node share", size);
    if (!strstr(err->msg, want))
        fail_msg("rank %d: %s", rank, err->msg);
    return 1;
}

/* A device batch copied back to the host: the samples of its ids. */
static void check_device_batch(sc_loader *ld, const sc_batch *b)
{
    assert_true(b->device >= 0);
    assert_non_null(b->ready);
    assert_int_equal(sc_batch_wait(ld, b), SC_OK);
#ifdef HAVE_CUDA_HEADERS
    static int32_t x[B * W], z[B * 8];
    static int64_t y[B];
    assert_int_equal(b->nfields, 3);
    assert_true(b->bytes[2] == b->offsets[2][B] && b->bytes[2] <= sizeof z);
    assert_int_equal(cudaMemcpy(x, b->data[0], sizeof x, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(y, b->data[1], sizeof y, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(z, b->data[2], b->bytes[2], cudaMemcpyDeviceToHost), cudaSuccess);
    sc_batch host = *b;
    host.data[0] = x;
    host.data[1] = y;
    host.data[2] = z;
    char why[256];
    if (!sc_t_samples_ok(&host, W, NSAMPLES, why, sizeof why))
        fail_msg("%s", why);
#endif
}

static void run(sc_device_mode mode, int want_device)
{
    sc_config c = config(mode);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err);
    if (refused(rc, &err))
        return;
    SC_ASSERT_OK(rc, &err);
    for (uint64_t e = 0; e < 2; e++) {
        sc_epoch_info info;
        assert_int_equal(sc_epoch_begin(ld, e, &info), SC_OK);
        sc_batch b;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            assert_int_equal(b.device, want_device);
            check_device_batch(ld, &b);
            assert_int_equal(sc_batch_release(ld, &b), SC_OK);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, e, &rep), SC_OK);
        if (!rep.exactly_once.ok)
            fail_msg("epoch %llu: %s", (unsigned long long)e, rep.exactly_once.detail);
    }
    assert_int_equal(sc_loader_close(ld), SC_OK);
}

/* First, in a fresh process: no device chosen, so the node-local rank's. */
static void test_cuda_uses_the_local_rank(void **state)
{
    (void)state;
    run(SC_DEVICE_CUDA, rank);
}

static void test_auto_takes_the_gpu(void **state)
{
    (void)state;
    run(SC_DEVICE_AUTO, rank);
}

static void test_callers_device_is_kept(void **state)
{
    (void)state;
#ifdef HAVE_CUDA_HEADERS
    if (ngpu < 2 * size)
        skip(); /* needs a device that is no rank's by default */
    int want = size + rank;
    assert_int_equal(cudaSetDevice(want), cudaSuccess);
    run(SC_DEVICE_CUDA, want);
#else
    skip();
#endif
}

int main(int argc, char **argv)
{
    sc_features f;
    if (sc_features_get(&f) != SC_OK || f.cuda_devices == 0) {
        printf("skipped: no GPU visible\n");
        return 77;
    }
    ngpu = f.cuda_devices;
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "gpu");
    snprintf(src, sizeof src, "%s/src.h5", dir);
    if (rank == 0)
        assert_int_equal(sc_t_write_samples(src, 0, NSAMPLES, W) ||
                             sc_t_write_vlen(src, 0, NSAMPLES), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_uses_the_local_rank),
        cmocka_unit_test(test_auto_takes_the_gpu),
        cmocka_unit_test(test_callers_device_is_kept),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
