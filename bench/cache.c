/*
 * bench/cache - whole-shard reads from a warm node-local cache against the
 * machine's limit for the same bytes: pread() of the entry files from the
 * page cache, measured side by side in the same run.
 *
 *   bench_cache [--size MiB] [--shard-size K] [--runs N] [--dir DIR] [--doc FILE]
 *
 * Three cache figures: steady state (entries this process has verified),
 * first read in a new process (checksum verified, SC_CACHE_CHECK=first),
 * and SC_CACHE_CHECK=always.  Each is the median of N runs, interleaved
 * with the pread runs so that machine noise hits both alike.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_doc.h"
#include "shardcache.h"

static void die(const char *what, const sc_error *err)
{
    fprintf(stderr, "bench_cache: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static double read_all_cache(sc_cache *c, uint64_t nshards, void **bufs)
{
    sc_error err;
    double t0 = bench_now();
    for (uint64_t k = 0; k < nshards; k++)
        if (sc_cache_read(c, k, bufs, &err) != SC_OK)
            die("cache read", &err);
    return bench_now() - t0;
}

static double read_all_pread(const char *dir, uint64_t nshards, unsigned char *buf,
                             size_t cap, uint64_t *bytes)
{
    char path[8192];
    *bytes = 0;
    double t0 = bench_now();
    for (uint64_t k = 0; k < nshards; k++) {
        snprintf(path, sizeof path, "%s/s%llu.h5", dir, (unsigned long long)k);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            die(path, NULL);
        ssize_t n;
        off_t off = 0;
        while ((n = pread(fd, buf, cap, off)) > 0) {
            off += n;
            *bytes += (uint64_t)n;
        }
        close(fd);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    uint64_t mib = 256, shard = 256;
    int runs = 5;
    const char *doc = NULL, *base = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--shard-size") && i + 1 < argc)
            shard = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            base = argv[++i];
        else if (!strcmp(argv[i], "--doc") && i + 1 < argc)
            doc = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cache [--size MiB] [--shard-size K] [--runs N] "
                            "[--dir DIR] [--doc FILE]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 21 || mib == 0 || shard == 0)
        return 2;
    MPI_Init(&argc, &argv);
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s/sc-bench-cache-%ld", base ? base : "/tmp",
                 (long)getpid()) >= (int)sizeof dir)
        die("--dir is too long", NULL);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0)
        die("mkdir", NULL);

    /* ~mib MiB of 3x64x64 uint8 images plus int64 labels. */
    char src[1100];
    snprintf(src, sizeof src, "%s/src.h5", dir);
    sc_error err = SC_ERROR_INIT;
    if (!bench_images(src, mib, 0, &err))
        die("make-dataset", &err);

    sc_config cfg;
    sc_config_init(&cfg, &err);
    snprintf(cfg.source, sizeof cfg.source, "%s", src);
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/cache", dir);
    cfg.shard_size = shard;
    sc_dataset *ds;
    sc_cache *c;
    if (sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err) != SC_OK)
        die("open", &err);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    void *bufs[2];
    for (int i = 0; i < 2; i++) {
        sc_field_info f;
        sc_dataset_field(ds, i, &f);
        bufs[i] = malloc(shard * f.sample_bytes);
    }
    size_t cap = 64u << 20;
    unsigned char *raw = malloc(cap);
    if (sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err) != SC_OK)
        die("cache", &err);
    read_all_cache(c, di.nshards, bufs); /* cold: fills the cache */
    char cdir[4096];
    snprintf(cdir, sizeof cdir, "%s", sc_cache_dir(c));

    double t_steady[21], t_first[21], t_always[21], t_raw[21];
    uint64_t raw_bytes = 0;
    for (int r = 0; r < runs; r++) {
        t_raw[r] = read_all_pread(cdir, di.nshards, raw, cap, &raw_bytes);
        t_steady[r] = read_all_cache(c, di.nshards, bufs);
        /* A new handle has verified nothing yet: the first read checks. */
        sc_cache_close(c);
        if (sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, &err) != SC_OK)
            die("cache", &err);
        t_first[r] = read_all_cache(c, di.nshards, bufs);
        cfg.cache_check = SC_CACHE_CHECK_ALWAYS;
        sc_cache *a;
        if (sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &a, &err) != SC_OK)
            die("cache", &err);
        t_always[r] = read_all_cache(a, di.nshards, bufs);
        sc_cache_close(a);
        cfg.cache_check = SC_CACHE_CHECK_FIRST;
    }
    sc_cache_stats st;
    sc_cache_get_stats(c, &st);
    uint64_t bytes = di.nsamples * di.sample_bytes;
    double mraw = bench_median(t_raw, runs), ms = bench_median(t_steady, runs),
           mf = bench_median(t_first, runs), ma = bench_median(t_always, runs);
    double gb_raw = (double)raw_bytes / mraw / 1e9;

    char text[4096];
    snprintf(text, sizeof text,
             "`bench_cache --size %" PRIu64 " --shard-size %" PRIu64 " --runs %d` "
             "(%" PRIu64 " shards of %.1f MiB, median of %d, %ld cores online)\n\n"
             "| read path | GB/s | ratio to pread |\n"
             "| --- | ---: | ---: |\n"
             "| pread of the entry files (page cache), the limit | %.2f | 1.00 |\n"
             "| sc_cache_read, steady state (entries verified) | %.2f | %.2f |\n"
             "| sc_cache_read, first read in a process (XXH64 checked) | %.2f | %.2f |\n"
             "| sc_cache_read, SC_CACHE_CHECK=always | %.2f | %.2f |\n",
             mib, shard, runs, di.nshards, (double)shard * (double)di.sample_bytes / 1048576.0,
             runs, sysconf(_SC_NPROCESSORS_ONLN), gb_raw,
             (double)bytes / ms / 1e9, mraw / ms * (double)bytes / (double)raw_bytes,
             (double)bytes / mf / 1e9, mraw / mf * (double)bytes / (double)raw_bytes,
             (double)bytes / ma / 1e9, mraw / ma * (double)bytes / (double)raw_bytes);
    fputs(text, stdout);
    if (st.repairs || st.misses)
        fprintf(stderr, "bench_cache: unexpected repairs %" PRIu64 " or misses %" PRIu64 "\n",
                st.repairs, st.misses);
    sc_cache_close(c);
    sc_dataset_close(ds);
    free(raw);
    free(bufs[0]);
    free(bufs[1]);
    bench_rmtree("bench_cache", dir);
    int rc = doc && bench_doc_write(doc, "cache", text) != 0;
    MPI_Finalize();
    return rc;
}
