/*
 * bench/gpu - batches delivered to the GPU against the link's limit, in one
 * run on one GPU.
 *
 * The limit is the host-to-device bandwidth of cudaMemcpyAsync from pinned
 * memory when the link is driven as hard as a copy engine can be: 256 MiB
 * split into 8 MiB and 32 MiB pieces, every piece queued before any wait,
 * on one stream and spread over two (two copy engines, where the GPU has
 * them); the best of the four is the limit.  One small copy at a time,
 * each waited for, measures the latency of a round trip, not the link.
 *
 * Delivery is sc_batch_next with SC_DEVICE=cuda from a warm cache, for each
 * producer count (SC_PRODUCERS; --producers 2,4,8 by default) in the same
 * run, consumed as a GPU training loop does: a stream waits on each batch's
 * ready event and the batch is released on that stream
 * (sc_batch_release_on), so the CPU never waits per batch; the epoch's time
 * ends when that stream has caught up.  The table gives each as a ratio of
 * the limit.  Needs a GPU: without one it says so and exits 1.
 *
 *   bench_gpu [--size MiB] [--batch B] [--producers LIST] [--runs N] [--doc FILE]
 *             [--label TEXT] [--note TEXT]
 *
 * --label (the date and the GPU) heads the table; --note follows it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "shardcache.h"

#ifdef BENCH_HAVE_CUDA
#include <cuda_runtime_api.h>

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, msg);
    exit(1);
}

#define CU(call)                                                              \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess)                                                \
            die(#call, cudaGetErrorString(e_));                               \
    } while (0)

#define LINK_BYTES ((size_t)256 << 20) /* per measurement */
#define LINK_KINDS 4
static const size_t link_piece[LINK_KINDS] = {(size_t)8 << 20, (size_t)32 << 20,
                                              (size_t)8 << 20, (size_t)32 << 20};
static const int link_streams[LINK_KINDS] = {1, 1, 2, 2};

/*
 * GB/s of one pass over LINK_BYTES of pinned host memory into device
 * memory, in `piece`-byte copies queued round-robin on `ns` streams, timed
 * on the GPU from before the first copy to after the last on every stream.
 */
static double link_pass(const char *host, char *dev, size_t piece, int ns, cudaStream_t *s)
{
    cudaEvent_t start, stop, tail;
    CU(cudaEventCreate(&start));
    CU(cudaEventCreate(&stop));
    CU(cudaEventCreateWithFlags(&tail, cudaEventDisableTiming));
    CU(cudaEventRecord(start, s[0]));
    for (int i = 1; i < ns; i++) /* every stream starts after `start` */
        CU(cudaStreamWaitEvent(s[i], start, 0));
    for (size_t off = 0, i = 0; off < LINK_BYTES; off += piece, i++)
        CU(cudaMemcpyAsync(dev + off, host + off, piece, cudaMemcpyHostToDevice,
                           s[i % (size_t)ns]));
    for (int i = 1; i < ns; i++) { /* and `stop` after every stream's last copy */
        CU(cudaEventRecord(tail, s[i]));
        CU(cudaStreamWaitEvent(s[0], tail, 0));
    }
    CU(cudaEventRecord(stop, s[0]));
    CU(cudaEventSynchronize(stop));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, start, stop));
    CU(cudaEventDestroy(start));
    CU(cudaEventDestroy(stop));
    CU(cudaEventDestroy(tail));
    return (double)LINK_BYTES / (ms / 1e3) / 1e9;
}

/* The median GB/s of `runs` passes of each kind into gbs[LINK_KINDS], kinds interleaved. */
static void link_limit(int runs, double *gbs)
{
    char *host = NULL, *dev = NULL;
    cudaStream_t s[2];
    CU(cudaHostAlloc((void **)&host, LINK_BYTES, cudaHostAllocDefault));
    CU(cudaMalloc((void **)&dev, LINK_BYTES));
    memset(host, 1, LINK_BYTES); /* touched: no page faults in the timed copies */
    for (int i = 0; i < 2; i++)
        CU(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    double v[LINK_KINDS][21];
    for (int r = -1; r < runs; r++) /* one untimed pass of each first */
        for (int k = 0; k < LINK_KINDS; k++) {
            double g = link_pass(host, dev, link_piece[k], link_streams[k], s);
            if (r >= 0)
                v[k][r] = g;
        }
    for (int k = 0; k < LINK_KINDS; k++)
        gbs[k] = bench_median(v[k], runs);
    for (int i = 0; i < 2; i++)
        CU(cudaStreamDestroy(s[i]));
    CU(cudaFree(dev));
    CU(cudaFreeHost(host));
}

/* Median GB/s delivered to the device over `runs` epochs with p producers. */
static double deliver(sc_config *c, int p, int runs, int *device)
{
    double deliv[21];
    sc_error err = SC_ERROR_INIT;
    sc_loader *ld = NULL;
    c->producers = p;
    if (sc_loader_open(MPI_COMM_WORLD, c, &ld, &err) != SC_OK)
        die("open", err.msg);
    /* The consumer's stream, on the device the loader made current. */
    cudaStream_t s;
    CU(cudaGetDevice(device));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int r = -1; r < runs; r++) { /* the first epoch warms the cache, untimed */
        if (sc_epoch_begin(ld, (uint64_t)(r + 1), NULL) != SC_OK)
            die("epoch", sc_loader_last_error(ld));
        double bytes = 0, t0 = bench_now();
        sc_batch b;
        int rc;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            /* As a training step would: the GPU waits for the batch, not the CPU. */
            CU(cudaStreamWaitEvent(s, (cudaEvent_t)b.ready, 0));
            for (int f = 0; f < b.nfields; f++)
                bytes += (double)b.bytes[f];
            if (sc_batch_release_on(ld, &b, s) != SC_OK)
                die("release", sc_loader_last_error(ld));
        }
        if (rc != SC_END_OF_EPOCH)
            die("next batch", sc_loader_last_error(ld));
        CU(cudaStreamSynchronize(s)); /* every batch has arrived */
        if (r >= 0)
            deliv[r] = bytes / (bench_now() - t0) / 1e9;
    }
    CU(cudaStreamDestroy(s));
    sc_loader_close(ld);
    return bench_median(deliv, runs);
}

int main(int argc, char **argv)
{
    uint64_t mib = 1024, batch = 256;
    int runs = 3, plist[8] = {2, 4, 8}, np = 3;
    const char *doc = NULL, *label = "", *note = "", *prod_arg = "2,4,8";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--producers"))
            np = bench_int_list(prod_arg = argv[i + 1], plist, 8);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--doc"))
            doc = argv[i + 1];
        else if (!strcmp(argv[i], "--label"))
            label = argv[i + 1];
        else if (!strcmp(argv[i], "--note"))
            note = argv[i + 1];
    }
    if (runs < 1 || runs > 21 || np < 1 || batch < 1 || mib < 16) {
        fprintf(stderr, "bench_gpu: --runs 1..21, --batch >= 1, --size >= 16, "
                        "--producers N[,N...]\n");
        return 2;
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1)
        die("no GPU", "no CUDA device is visible");

    char dir[2048], data[2200];
    sc_error err = SC_ERROR_INIT;
    if (bench_scratch(NULL, "gpu", dir, sizeof dir) != 0)
        die("mkdtemp", dir);
    snprintf(data, sizeof data, "%s/data.h5", dir);
    if (!bench_images(data, mib, 0, &err))
        die("make-dataset", err.msg);

    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", data);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache", dir);
    c.batch_size = batch;
    c.device = SC_DEVICE_CUDA;
    c.log_level = 0;
    int device = -1;
    double gd[8];
    for (int i = 0; i < np; i++)
        gd[i] = deliver(&c, plist[i], runs, &device);
    /* The limit after the deliveries, on the device they used (current now). */
    double link[LINK_KINDS], gl = 0;
    link_limit(runs, link);
    for (int k = 0; k < LINK_KINDS; k++)
        gl = link[k] > gl ? link[k] : gl;

    char text[8192];
    int len = snprintf(text, sizeof text,
                       "%s%s`bench_gpu --size %llu --batch %llu --producers %s --runs %d` "
                       "(device %d, median of %d epochs or passes each)\n\n"
                       "| delivery | GB/s | ratio to the limit |\n| --- | ---: | ---: |\n",
                       label, *label ? ": " : "", (unsigned long long)mib,
                       (unsigned long long)batch, prod_arg, runs, device, runs);
    for (int k = 0; k < LINK_KINDS && len < (int)sizeof text; k++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "| cudaMemcpyAsync, pinned host to device, %zu MiB in %zu MiB pieces "
                        "queued on %d stream%s%s | %.2f | %.2f |\n",
                        LINK_BYTES >> 20, link_piece[k] >> 20, link_streams[k],
                        link_streams[k] > 1 ? "s" : "", link[k] == gl ? " (the limit)" : "",
                        link[k], link[k] / gl);
    for (int i = 0; i < np && len < (int)sizeof text; i++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "| sc_batch_next to the device, warm cache, %d producers | %.2f | %.2f |\n",
                        plist[i], gd[i], gd[i] / gl);
    if (*note && len < (int)sizeof text)
        snprintf(text + len, sizeof text - (size_t)len, "\n%s\n", note);
    printf("%s", text);
    int rc = 0;
    if (doc && bench_doc_write(doc, "gpu", text) != 0)
        rc = 1;
    bench_rmtree("bench_gpu", dir);
    MPI_Finalize();
    return rc;
}

#else /* a build without CUDA */

int main(void)
{
    fprintf(stderr, "bench_gpu: this build of shardcache has no CUDA "
                    "(configure with -DSC_WITH_CUDA=ON)\n");
    return 1;
}

#endif
