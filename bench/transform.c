/*
 * bench/transform - transform once and cache the result, against running
 * the transform every epoch (the Petastorm-before case: the conversion on
 * the training loop's path), side by side in one run: the same
 * normalize-and-crop (examples/transforms.c) on uint8 3x64x64 images,
 * epochs 2+ (warm caches), samples/s delivered as float32 [3][56][56].
 *
 *   bench_transform [--size MiB] [--runs N] [--doc FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "shardcache.h"
#include "transforms.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_transform: %s: %s\n", what, msg);
    exit(1);
}

static sc_loader *open_loader(const char *data, const char *cache, const sc_transform *tf)
{
    sc_config c;
    sc_error err = SC_ERROR_INIT;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", data);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s", cache);
    c.batch_size = 256;
    c.producers = 2;
    c.device = SC_DEVICE_HOST;
    c.log_level = 0;
    c.transform = tf;
    sc_loader *ld = NULL;
    if (sc_loader_open(MPI_COMM_SELF, &c, &ld, &err) != SC_OK)
        die("open", err.msg);
    return ld;
}

/* Samples/s of one epoch; with `crop`, the consumer runs the transform itself. */
static double epoch(sc_loader *ld, uint64_t e, const ex_crop *crop, float *out)
{
    if (sc_epoch_begin(ld, e, NULL) != SC_OK)
        die("epoch", sc_loader_last_error(ld));
    double n = 0, t0 = bench_now();
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        if (crop)
            ex_crop_run(crop, b.data[0], b.size, out);
        n += (double)b.size;
        sc_batch_release(ld, &b);
    }
    if (rc != SC_END_OF_EPOCH)
        die("next batch", sc_loader_last_error(ld));
    return n / (bench_now() - t0);
}

int main(int argc, char **argv)
{
    uint64_t mib = 256;
    int runs = 5;
    const char *doc = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--doc"))
            doc = argv[i + 1];
    }
    if (runs < 1 || runs > 21 || mib < 16)
        return 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    char dir[1024], data[1100], c1[1100], c2[1100];
    if (bench_scratch(NULL, "transform", dir, sizeof dir) != 0)
        die("mkdtemp", dir);
    snprintf(data, sizeof data, "%s/data.h5", dir);
    snprintf(c1, sizeof c1, "%s/cached", dir);
    snprintf(c2, sizeof c2, "%s/raw", dir);
    sc_error err = SC_ERROR_INIT;
    if (!bench_images(data, mib, 0, &err))
        die("make-dataset", err.msg);

    ex_crop crop = {3, 64, 64, 4};
    sc_transform tf;
    ex_crop_transform(&crop, 0, &tf);
    sc_loader *cached = open_loader(data, c1, &tf), *raw = open_loader(data, c2, NULL);
    float *out = malloc(sizeof *out * 256 * 3 * 56 * 56);
    epoch(cached, 0, NULL, out); /* epoch 0 fills both caches */
    epoch(raw, 0, &crop, out);
    double a[21], b[21];
    for (int r = 0; r < runs; r++) {
        a[r] = epoch(cached, (uint64_t)r + 1, NULL, out);
        b[r] = epoch(raw, (uint64_t)r + 1, &crop, out);
    }
    sc_loader_close(cached);
    sc_loader_close(raw);
    double ma = bench_median(a, runs), mb = bench_median(b, runs);
    char text[1024];
    snprintf(text, sizeof text,
             "`bench_transform --size %llu --runs %d` (one rank, 2 producers, uint8 3x64x64 -> "
             "float32 3x56x56, median of %d warm epochs, interleaved)\n\n"
             "| where the transform runs | samples/s | ratio |\n| --- | ---: | ---: |\n"
             "| every epoch, in the training loop (the Petastorm-before case) | %.0f | 1.00 |\n"
             "| once per shard, cached (sc_transform) | %.0f | %.2f |\n",
             (unsigned long long)mib, runs, runs, mb, ma, ma / mb);
    printf("%s", text);
    int rc = doc && bench_doc_write(doc, "transform", text) != 0;
    free(out);
    bench_rmtree("bench_transform", dir);
    MPI_Finalize();
    return rc;
}
