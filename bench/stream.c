/*
 * bench/stream - what the training loop receives: batches delivered by the
 * loader (sc_batch_next, warm node-local cache, sample-level window
 * shuffle, batch assembly, ownership checks on) against the machine's
 * memcpy bandwidth for the same bytes, measured side by side in one run;
 * then the consumer's wait when each step computes for as long as one
 * batch takes to produce.
 *
 *   bench_stream [--size MiB] [--batch B] [--producers LIST] [--runs N]
 *                [--dir DIR] [--cache-dir DIR] [--doc FILE] [--drop-caches] [--cold-only]
 *
 * One rank (an MPI singleton): the figures are per process.  Last, the
 * cost of leaving tracing on (SC_TRACE).  The copy limit copies the same
 * number of bytes, batch by batch, from a source the size of the dataset
 * (so it comes from DRAM, as a cache read does), with one thread, both by
 * memcpy and as the loader copies into a ring that large (past the cache:
 * sc__copy_nt); the limit is the faster of the two.  Each figure is the
 * median of N epochs, interleaved with the copies so that machine noise
 * hits both alike.  The cold epoch
 * (source read, checksum, cache write, delivery; a fresh cache each time)
 * is set against reading the source file itself, interleaved likewise,
 * from the page cache, and with --drop-caches (root) also from storage:
 * the page cache dropped before each cold epoch and each read, as a first
 * epoch over a dataset on disk finds it, and against the storage's own
 * read limit (O_DIRECT at the producers' concurrency).  --cold-only: the
 * cold epochs alone, printed, for runs side by side with another build.
 * --cache-dir: the cold epochs' caches there (a tmpfs standing in for a
 * node's NVMe) rather than beside the source, whose disk their writes
 * would otherwise share with its reads.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_doc.h"
#include "mem.h"
#include "shardcache.h"
#include "trace.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_stream: %s: %s\n", what, msg);
    exit(1);
}

typedef struct epoch_fig {
    double secs, wait, bytes;
    double written; /* of the misses, the share whose entries were written (not skipped) */
} epoch_fig;

static epoch_fig run_epoch(sc_loader *ld, uint64_t epoch, double step_s, int spin)
{
    epoch_fig f = {0, 0, 0, 0};
    sc_batch b;
    int rc;
    if (sc_epoch_begin(ld, epoch, NULL) != SC_OK)
        die("epoch begin", sc_loader_last_error(ld));
    double t0 = bench_now();
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        for (int i = 0; i < b.nfields; i++)
            f.bytes += (double)b.bytes[i];
        if (step_s > 0)
            bench_step(step_s, spin);
        sc_batch_release(ld, &b);
    }
    f.secs = bench_now() - t0;
    if (rc != SC_END_OF_EPOCH)
        die("next batch", sc_loader_last_error(ld));
    sc_epoch_summary rep;
    if (sc_epoch_wait(ld, epoch, &rep) != SC_OK || !rep.exactly_once.ok)
        die("exactly-once", rep.exactly_once.detail);
    f.wait = rep.wait_s;
    f.written = rep.cache_misses ? 1.0 - (double)rep.cache_writes_skipped /
                                             (double)rep.cache_misses
                                 : 1.0;
    return f;
}

/*
 * The limit: the same bytes, batch by batch, one thread, from a source the
 * size of the dataset into a ring of as many batch buffers as the loader's
 * (SC_PREFETCH_BATCHES), so both read and write memory alike: by `copy`,
 * memcpy or the loader's copy for a ring that large (sc__copy_for).
 */
static double memcpy_run(sc__copy_fn copy, const unsigned char *src, size_t total,
                         unsigned char *ring, size_t batch_bytes, size_t depth)
{
    double t0 = bench_now();
    size_t k = 0;
    for (size_t at = 0; at + batch_bytes <= total; at += batch_bytes, k++)
        copy(ring + (k % depth) * batch_bytes, src + at, batch_bytes);
    sc__copy_fence();
    double t = bench_now() - t0;
    if (ring[batch_bytes / 2] != src[batch_bytes / 2]) /* keep the copies */
        die("memcpy", "copy mismatch");
    return t;
}

/* Seconds to record one span and write it out (ring, drain, JSON line). */
static double event_cost(const char *dir)
{
    enum { N = 1 << 20, RING = 1 << 16 };
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s/cost", dir);
    sc__trace *t = NULL;
    sc_error err = SC_ERROR_INIT;
    if (sc__trace_open(MPI_COMM_SELF, prefix, RING, &t, &err) != SC_OK)
        die("trace", err.msg);
    sc__tring *r = sc__trace_ring(t, "bench");
    double t0 = bench_now();
    for (int i = 0; i < N; i++) {
        uint64_t a = sc__tring_now(r);
        sc__tring_span(r, SC__ST_ASSEMBLY, a, sc__tring_now(r), 1, -1, i, 4096);
        if (i % (RING / 2) == 0 && sc__trace_flush(t, &err) != SC_OK)
            die("trace", err.msg);
    }
    if (sc__trace_close(t, &err) != SC_OK)
        die("trace", err.msg);
    return (bench_now() - t0) / N;
}

/*
 * The cold epoch's limit: the source file read as a program with nothing
 * else to do reads it, pread in 8 MiB pieces into one reused buffer, one
 * thread; its pages are in the page cache, as the cold epoch finds them.
 * Bytes per second.
 */
static double file_read_run(const char *path)
{
    enum { PIECE = 8 << 20 };
    static unsigned char buf[PIECE];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die("open", path);
    double t0 = bench_now(), bytes = 0;
    ssize_t got;
    while ((got = pread(fd, buf, PIECE, (off_t)bytes)) > 0)
        bytes += (double)got;
    double t = bench_now() - t0;
    close(fd);
    if (got < 0)
        die("read", path);
    return bytes / t;
}

/*
 * The storage's own read limit at the cold epoch's concurrency (as MLPerf
 * Storage measures it): `threads` readers, each with one reused 8 MiB
 * buffer, touched before the clock starts, reading every threads-th 8 MiB
 * piece of the file with O_DIRECT (buffered where the filesystem refuses:
 * *direct says which).  Bytes per second.
 */
enum { DIRECT_PIECE = 8 << 20 };
typedef struct direct_part {
    const char *path;
    int k, n, direct;
    double bytes;
} direct_part;

static void *direct_reader(void *arg)
{
    direct_part *p = arg;
    void *buf = NULL;
    int fd = open(p->path, O_RDONLY | O_DIRECT);
    p->direct = fd >= 0;
    if (fd < 0)
        fd = open(p->path, O_RDONLY);
    if (fd < 0 || posix_memalign(&buf, 4096, DIRECT_PIECE) != 0)
        die("open", p->path);
    memset(buf, 0, DIRECT_PIECE);
    ssize_t got = 0;
    for (off_t at = (off_t)p->k * DIRECT_PIECE;; at += (off_t)p->n * DIRECT_PIECE) {
        if ((got = pread(fd, buf, DIRECT_PIECE, at)) <= 0)
            break;
        p->bytes += (double)got;
    }
    if (got < 0)
        die("read", p->path);
    close(fd);
    free(buf);
    return NULL;
}

static double direct_read_run(const char *path, int threads, int *direct)
{
    direct_part part[64];
    pthread_t th[64];
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    double t0 = bench_now(), bytes = 0;
    for (int k = 0; k < threads; k++) {
        part[k] = (direct_part){path, k, threads, 0, 0};
        if (pthread_create(&th[k], NULL, direct_reader, &part[k]) != 0)
            die("read", "no thread");
    }
    for (int k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        bytes += part[k].bytes;
    }
    *direct = part[0].direct;
    return bytes / (bench_now() - t0);
}

static sc_loader *open_loader(const char *data, const char *cache, uint64_t batch,
                              int producers, const char *trace)
{
    sc_config c;
    sc_error err = SC_ERROR_INIT;
    if (sc_config_init(&c, &err) != SC_OK)
        die("config", err.msg);
    if ((size_t)snprintf(c.source, sizeof c.source, "%s", data) >= sizeof c.source ||
        (size_t)snprintf(c.cache_dir, sizeof c.cache_dir, "%s", cache) >= sizeof c.cache_dir ||
        (size_t)snprintf(c.trace, sizeof c.trace, "%s", trace ? trace : "") >= sizeof c.trace)
        die("open", "a path too long for sc_config");
    c.shard_size = 1024;
    c.batch_size = batch;
    c.producers = producers;
    c.device = SC_DEVICE_HOST;
    c.log_level = 0;
    sc_loader *ld = NULL;
    if (sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err) != SC_OK)
        die("open", err.msg);
    return ld;
}

/* --drop-caches: the page cache written out and dropped (root only). */
static void drop_caches(void)
{
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (!f || fputs("3\n", f) == EOF || fclose(f) != 0)
        die("--drop-caches", "cannot write /proc/sys/vm/drop_caches (run as root)");
}

/*
 * Cold epochs into fresh caches, each followed by a read of the source
 * file (the page cache dropped before each when `drop`, and then also
 * the storage's limit: direct_read_run at the producers' concurrency):
 * their medians, in bytes per second.
 */
/* A cold epoch's medians: its rate, the file's buffered read, the O_DIRECT limit, entries written. */
typedef struct cold_fig {
    double rate, file, limit, written;
} cold_fig;

static cold_fig cold_runs(const char *data, const char *dir, uint64_t batch, int producers,
                          int runs, int drop, int *direct)
{
    double c[21], f[21], l[21], w[21];
    for (int r = 0; r < runs; r++) {
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/cold%d", dir, r);
        if (drop)
            drop_caches();
        sc_loader *ld = open_loader(data, cache, batch, producers, NULL);
        epoch_fig e = run_epoch(ld, 0, 0, 0);
        sc_loader_close(ld);
        bench_rmtree("bench_stream", cache);
        c[r] = e.bytes / e.secs;
        w[r] = e.written;
        if (drop)
            drop_caches();
        f[r] = file_read_run(data);
        if (drop) {
            drop_caches();
            l[r] = direct_read_run(data, producers, direct);
        }
    }
    return (cold_fig){bench_median(c, runs), bench_median(f, runs),
                      drop ? bench_median(l, runs) : 0, bench_median(w, runs)};
}

int main(int argc, char **argv)
{
    uint64_t mib = 512, batch = 256;
    int runs = 3, plist[8] = {1, 2, 4}, np = 3;
    const char *doc = NULL, *base = NULL, *cache_base = NULL; /* NULL: $TMPDIR or /tmp */
    int drop = 0, cold_only = 0;
    char prod_arg[64] = "1,2,4";
    for (int i = 1; i < argc; i++) /* the flags without a value, taken out first */
        if (!strcmp(argv[i], "--drop-caches") || !strcmp(argv[i], "--cold-only")) {
            drop |= !strcmp(argv[i], "--drop-caches");
            cold_only |= !strcmp(argv[i], "--cold-only");
            memmove(&argv[i], &argv[i + 1], sizeof *argv * (size_t)(argc - i));
            argc--, i--;
        }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            base = argv[i + 1];
        else if (!strcmp(argv[i], "--cache-dir"))
            cache_base = argv[i + 1];
        else if (!strcmp(argv[i], "--doc"))
            doc = argv[i + 1];
        else if (!strcmp(argv[i], "--producers")) {
            snprintf(prod_arg, sizeof prod_arg, "%s", argv[i + 1]);
            np = bench_int_list(argv[i + 1], plist, 8);
        } else {
            fprintf(stderr, "bench_stream: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (runs < 1 || runs > 21 || batch < 1 || mib < 16 || np < 1) {
        fprintf(stderr, "bench_stream: --runs 1..21, --batch >= 1, --size >= 16, "
                        "--producers N[,N...]\n");
        return 2;
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);

    char dir[4096], data[4200], cache[4200], cdir[4096];
    if (bench_scratch(base, "stream", dir, sizeof dir) != 0)
        die(dir, strerror(errno));
    if (bench_scratch(cache_base ? cache_base : dir, "stream-cold", cdir, sizeof cdir) != 0)
        die(cdir, strerror(errno));
    snprintf(data, sizeof data, "%s/data.h5", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    const uint64_t sample = BENCH_SAMPLE_BYTES;
    sc_error err = SC_ERROR_INIT;
    const uint64_t samples = bench_images(data, mib, 1, &err);
    if (!samples)
        die("make-dataset", err.msg);

    /* Warm the cache and verify every entry once (what epoch 0 of a job does). */
    sc_loader *ld = open_loader(data, cache, batch, plist[np - 1], NULL);
    run_epoch(ld, 0, 0, 0);
    sc_loader_close(ld);
    int direct = 0;
    cold_fig warm = cold_runs(data, cdir, batch, plist[np - 1], runs, 0, &direct);
    cold_fig disk = drop ? cold_runs(data, cdir, batch, plist[np - 1], runs, 1, &direct)
                         : (cold_fig){0, 0, 0, 0};
    double cold = warm.rate, file = warm.file, dcold = disk.rate, dfile = disk.file;
    double limit = disk.limit;
    if (cache_base)
        bench_rmtree("bench_stream", cdir);
    if (cold_only) {
        printf("cold epoch, %d producers, page cache warm: %.2f GB/s, %.2f of reading the file "
               "(%.2f GB/s); entries written for %.2f of the misses\n", plist[np - 1],
               cold / 1e9, cold / file, file / 1e9, warm.written);
        if (drop)
            printf("cold epoch from storage: %.2f GB/s, %.2f of the file read (%.2f GB/s), "
                   "%.2f of the O_DIRECT limit (%.2f GB/s, %d threads%s); entries written "
                   "for %.2f of the misses\n", dcold / 1e9, dcold / dfile, dfile / 1e9,
                   dcold / limit, limit / 1e9, plist[np - 1],
                   direct ? "" : ", buffered: O_DIRECT refused", disk.written);
        bench_rmtree("bench_stream", dir);
        MPI_Finalize();
        return 0;
    }

    size_t total = (size_t)samples * sample, bb = (size_t)(batch * sample);
    /* SC_PREFETCH_BATCHES=auto's, which the loaders use: 8 for batches up to 128 MiB */
    size_t depth = SC_PREFETCH_AUTO_MAX;
    unsigned char *src = malloc(total), *dst = malloc(bb * depth);
    if (!src || !dst)
        die("memory", "for the copy limit");
    memset(src, 1, total);
    memset(dst, 0, bb * depth);
    /* both copies, interleaved with the epochs; the limit is the faster */
    double mem[2][8 * 21], deliv[8][21], gbps_copy[2], gbps_mem, gbps[8];
    sc__copy_fn copies[2] = {memcpy, sc__copy_for(bb * depth)};
    int nmem = 0;
    double bytes = 0;
    for (int i = 0; i < np; i++) {
        ld = open_loader(data, cache, batch, plist[i], NULL);
        run_epoch(ld, 0, 0, 0); /* the producers' buffers come from the pool after it */
        for (int r = 0; r < runs; r++) {
            epoch_fig f = run_epoch(ld, (uint64_t)r + 1, 0, 0);
            deliv[i][r] = f.bytes / f.secs;
            bytes = f.bytes;
            for (int c = 0; c < 2; c++)
                mem[c][nmem] = (double)(total - total % bb) /
                               memcpy_run(copies[c], src, total, dst, bb, depth);
            nmem++;
        }
        sc_loader_close(ld);
        gbps[i] = bench_median(deliv[i], runs) / 1e9;
    }
    for (int c = 0; c < 2; c++)
        gbps_copy[c] = bench_median(mem[c], nmem) / 1e9;
    gbps_mem = gbps_copy[0] > gbps_copy[1] ? gbps_copy[0] : gbps_copy[1];

    /*
     * Starvation: a step that computes exactly as long as the pipeline
     * takes to produce one batch (its best producer count, from the runs
     * above) must still find its next batch ready: the consumer's wait is
     * the pipeline's failure to overlap.
     */
    int best = 0;
    for (int i = 1; i < np; i++)
        best = gbps[i] > gbps[best] ? i : best;
    double per_batch = (double)bb / (gbps[best] * 1e9);
    double waitpct[2][21], wait_med[2];
    ld = open_loader(data, cache, batch, plist[best], NULL);
    run_epoch(ld, 0, 0, 0);
    for (int r = 0; r < runs; r++)
        for (int spin = 0; spin < 2; spin++) {
            epoch_fig f = run_epoch(ld, 2 * (uint64_t)r + 1 + (uint64_t)spin, per_batch, spin);
            waitpct[spin][r] = 100.0 * f.wait / f.secs;
        }
    sc_loader_close(ld);
    wait_med[0] = bench_median(waitpct[0], runs);
    wait_med[1] = bench_median(waitpct[1], runs);

    /*
     * Tracing on (SC_TRACE) against off, epochs interleaved between two
     * loaders so that noise hits both alike: what it costs to leave on.
     */
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s/trace", dir);
    sc_loader *off = open_loader(data, cache, batch, plist[best], NULL);
    sc_loader *on = open_loader(data, cache, batch, plist[best], prefix);
    double t_off[21], t_on[21];
    run_epoch(off, 0, 0, 0);
    run_epoch(on, 0, 0, 0);
    for (int r = 0; r < runs; r++) {
        epoch_fig a = run_epoch(off, (uint64_t)r + 1, 0, 0);
        epoch_fig b = run_epoch(on, (uint64_t)r + 1, 0, 0);
        t_off[r] = a.bytes / a.secs;
        t_on[r] = b.bytes / b.secs;
    }
    sc_loader_close(off);
    sc_loader_close(on);
    double gb_off = bench_median(t_off, runs) / 1e9, gb_on = bench_median(t_on, runs) / 1e9;

    /*
     * The machine's noise (+-10% between epochs here) hides a cost that
     * small, so also the stable figure: events recorded per batch in the
     * traced epochs, times what recording and writing one event costs.
     */
    char tfile[4400];
    snprintf(tfile, sizeof tfile, "%s.rank0.json", prefix);
    double lines = 0;
    FILE *tf = fopen(tfile, "r");
    for (int ch; tf && (ch = fgetc(tf)) != EOF;)
        lines += ch == '\n';
    if (tf)
        fclose(tf);
    double batches = (double)(runs + 1) * (bytes / (double)bb);
    double per_event = event_cost(dir);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char text[4096];
    int n = snprintf(text, sizeof text,
                     "`bench_stream --size %llu --batch %llu --producers %s --runs %d` "
                     "(one rank, %.0f MiB delivered per epoch, %llu-byte samples, median of "
                     "%d epochs, %ld cores online)\n\n"
                     "| delivery | GB/s | ratio to the limit |\n| --- | ---: | ---: |\n"
                     "| memcpy of the same bytes into a ring of 8 batches, one thread | %.2f | "
                     "%.2f |\n| the same by the loader's copy (%s) | %.2f | %.2f |\n",
                     (unsigned long long)mib, (unsigned long long)batch, prod_arg, runs,
                     bytes / 1048576.0, (unsigned long long)sample, runs, cores, gbps_copy[0],
                     gbps_copy[0] / gbps_mem,
                     copies[1] == memcpy ? "memcpy" : "past the cache, sc__copy_nt",
                     gbps_copy[1], gbps_copy[1] / gbps_mem);
    for (int i = 0; i < np; i++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "| sc_batch_next, warm cache, %d producer%s | %.2f | %.2f |\n", plist[i],
                      plist[i] > 1 ? "s" : "", gbps[i], gbps[i] / gbps_mem);
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "| cold epoch (source read, checksum, cache write, delivery), %d producers | "
                  "%.2f | %.2f |\n\nCold epoch: %.2f of reading the source file (%.2f GB/s: "
                  "pread in 8 MiB pieces into one buffer, one thread, the file in the page "
                  "cache), medians of %d interleaved runs; entries written for %.2f of the "
                  "misses (`SC_CACHE_WRITES=behind` skips those its writer is too far "
                  "behind for).\n",
                  plist[np - 1], cold / 1e9, cold / 1e9 / gbps_mem, cold / file, file / 1e9,
                  runs, warm.written);
    if (drop)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "From storage (the page cache dropped before each, `--drop-caches`): "
                      "cold epoch %.2f GB/s, %.2f of reading the file (%.2f GB/s), %.2f of "
                      "the storage's read limit (%.2f GB/s: %d threads reading 8 MiB pieces "
                      "%s, each into one reused buffer).\n",
                      dcold / 1e9, dcold / dfile, dfile / 1e9, dcold / limit, limit / 1e9,
                      plist[np - 1], direct ? "with O_DIRECT" : "buffered (O_DIRECT refused)");
    snprintf(text + n, sizeof text - (size_t)n,
             "\nConsumer wait, with each step as long as one batch's production (%.3f ms, "
             "%d producers): %.2f%% of the epoch when the step sleeps (the consumer waits for "
             "a GPU), %.2f%% when it spins on a CPU core (which the producers then lack).\n",
             per_batch * 1e3, plist[best], wait_med[0], wait_med[1]);
    n = (int)strlen(text);
    snprintf(text + n, sizeof text - (size_t)n,
             "\nTracing (SC_TRACE) on: %.2f GB/s against %.2f GB/s off, %d producers, epochs "
             "interleaved (a %.1f%% difference, inside this machine's noise).  Recording and "
             "writing one event costs %.0f ns; the traced epochs recorded %.1f events per "
             "batch: %.2f%% of a batch's production time.\n",
             gb_on, gb_off, plist[best], 100.0 * (1.0 - gb_on / gb_off), per_event * 1e9,
             lines / batches, 100.0 * per_event * (lines / batches) / per_batch);
    printf("%s", text);
    int rc = 0;
    if (doc && bench_doc_write(doc, "stream", text) != 0) {
        fprintf(stderr, "bench_stream: cannot write %s\n", doc);
        rc = 1;
    }
    free(src);
    free(dst);
    bench_rmtree("bench_stream", dir);
    MPI_Finalize();
    return rc;
}
