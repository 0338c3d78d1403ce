/*
 * bench/gpu - batches delivered to the GPU against the bus's limit, in one
 * run on one GPU: host-to-device bandwidth of cudaMemcpyAsync from pinned
 * memory alone (the PCIe/NVLink-C2C limit), then sc_next_batch with
 * SC_DEVICE=cuda from a warm cache (shuffle, assembly into pinned slots,
 * the copy on the loader's stream, waiting on each batch's event as a
 * kernel would).  Needs a GPU: without one it says so and exits 1.
 *
 *   bench_gpu [--size MiB] [--batch B] [--producers LIST] [--runs N] [--doc FILE]
 *             [--label TEXT] [--note TEXT]
 *
 * --producers 2,4,8 (the default) gives a row per count: on a machine with
 * more cores than this one, more producers keep up with a faster bus.
 *
 * --label (the date and the GPU) heads the table; --note follows it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "device.h"
#include "shardcache.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_gpu: %s: %s\n", what, msg);
    exit(1);
}

/* GB/s of pinned host -> device copies of `bytes`, `n` times, one stream. */
static double h2d_limit(sc__dev *dev, size_t bytes, int n)
{
    sc_error err = SC_ERROR_INIT;
    void *host = sc__dev_host_alloc(dev, bytes), *devbuf = NULL, *ev = NULL;
    if (!host || sc__dev_alloc(dev, bytes, &devbuf, &err) || sc__dev_event(dev, &ev, &err))
        die("device memory", err.msg);
    memset(host, 1, bytes);
    size_t len[1] = {bytes};
    double t0 = 0;
    for (int i = -1; i < n; i++) { /* one copy first, untimed */
        if (i == 0)
            t0 = bench_now();
        if (sc__dev_copy(dev, &devbuf, &host, len, 1, ev, &err) ||
            sc__dev_event_wait(dev, ev, &err))
            die("copy", err.msg);
    }
    double secs = bench_now() - t0;
    sc__dev_event_free(dev, ev);
    sc__dev_free(dev, devbuf);
    sc__dev_host_free(dev, host);
    return (double)bytes * n / secs / 1e9;
}

/* Median GB/s delivered to the device over `runs` epochs with p producers (and the limit's, interleaved). */
static double deliver(sc_config *c, int p, int runs, sc__dev *dev, double *limits)
{
    double deliv[21];
    sc_error err = SC_ERROR_INIT;
    sc_loader *ld = NULL;
    c->producers = p;
    if (sc_loader_open_err(MPI_COMM_WORLD, c, &ld, &err) != SC_OK)
        die("open", err.msg);
    for (int r = -1; r < runs; r++) { /* the first epoch warms the cache, untimed */
        if (sc_epoch_begin(ld, (uint64_t)(r + 1), NULL) != SC_OK)
            die("epoch", sc_last_error(ld));
        double bytes = 0, t0 = bench_now();
        sc_batch b;
        int rc;
        while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
            if (sc__dev_event_wait(dev, b.ready, &err) != SC_OK) /* as a kernel would */
                die("event", err.msg);
            for (int f = 0; f < b.nfields; f++)
                bytes += (double)b.bytes[f];
            sc_batch_release(ld, &b);
        }
        if (rc != SC_END_OF_EPOCH)
            die("next batch", sc_last_error(ld));
        if (r >= 0) {
            deliv[r] = bytes / (bench_now() - t0) / 1e9;
            limits[r] = h2d_limit(dev, (size_t)(c->batch_size * BENCH_SAMPLE_BYTES), 200);
        }
    }
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
    sc_error err = SC_ERROR_INIT;
    sc__dev *dev = NULL;
    int device = -1;
    if (sc__dev_open(SC_DEVICE_CUDA, 0, &dev, &device, &err) != SC_OK)
        die("no GPU", err.msg);

    char dir[2048], data[2200];
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
    double gd[8], limits[8 * 21];
    for (int i = 0; i < np; i++)
        gd[i] = deliver(&c, plist[i], runs, dev, limits + i * runs);
    double gl = bench_median(limits, np * runs);

    char text[8192];
    int len = snprintf(text, sizeof text,
                       "%s%s`bench_gpu --size %llu --batch %llu --producers %s --runs %d` "
                       "(device %d, median of %d epochs each)\n\n"
                       "| delivery | GB/s | ratio to the limit |\n| --- | ---: | ---: |\n"
                       "| cudaMemcpyAsync, pinned host to device, one stream (the limit) "
                       "| %.2f | 1.00 |\n",
                       label, *label ? ": " : "", (unsigned long long)mib,
                       (unsigned long long)batch, prod_arg, runs, device, runs, gl);
    for (int i = 0; i < np && len < (int)sizeof text; i++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "| sc_next_batch to the device, warm cache, %d producers | %.2f | %.2f |\n",
                        plist[i], gd[i], gd[i] / gl);
    if (*note && len < (int)sizeof text)
        snprintf(text + len, sizeof text - (size_t)len, "\n%s\n", note);
    printf("%s", text);
    int rc = 0;
    if (doc && bench_doc_write(doc, "gpu", text) != 0)
        rc = 1;
    sc__dev_close(dev);
    bench_rmtree("bench_gpu", dir);
    MPI_Finalize();
    return rc;
}
