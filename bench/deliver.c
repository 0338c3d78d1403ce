/*
 * bench/deliver - what a job's training loops receive from shardcache,
 * across all ranks: samples/s and MB/s of batches delivered by
 * sc_batch_next, and, with a training step of --step-ms per batch, the
 * consumer's wait and the loop's utilization (step time / wall time).
 *
 *   mpirun -np R bench_deliver [--epochs E] [--warmup W] [--step-ms X[,Y...]] [--spin]
 *                              [--per-epoch]
 *   mpirun -np R bench_deliver --gather FILE [--epochs E] [--warmup W]
 *                              [--sample-bytes N] [--batch B] [--depth D]
 *                              [--copy loader|memcpy|nt]
 *   mpirun -np R bench_deliver --first-batch
 *
 * The dataset and every loader setting come from SC_* (SC_SOURCE,
 * SC_SHUFFLE, SC_BATCH_SIZE, ...); SC_EPOCHS, unless set, is the run's
 * own count (warm-up and counted epochs), so that no rank reads ahead for
 * an epoch the run never begins.  The first W epochs warm the cache and
 * are not counted.  A step sleeps by default (the consumer thread waits
 * for a GPU); --spin makes it compute on the CPU.  Several step times run
 * one after another in the same job (the warm-up only before the first),
 * and rank 0 prints one line for each:
 *
 *   deliver: R ranks, E epochs, step X ms: N samples/s, M MB/s, wait P%, taking T%,
 *            utilization U%, exactly-once ok, DLIO's AU A% (lowest rank L%)
 *
 * wait: the loader's own wait for a batch (sc_epoch_summary.wait_s); taking:
 * the loop's wall time from the end of a step (or the epoch's start) to the
 * next batch in hand (release, sc_epoch_begin, sc_batch_next): the clock a
 * Python loop puts around `next()` (bench/python.py).  Both as a share of
 * the wall time, averaged over ranks.  utilization: the steps' time over
 * the slowest rank's wall time, every step counted (a data-parallel job
 * that synchronizes each step waits for its slowest rank).  DLIO's AU is
 * MLPerf Storage's metric as DLIO computes it (statscounter.py): each
 * rank's own epoch, its first step (load and compute) left out of both
 * the computation and the time, averaged over the ranks, then the epochs;
 * the computation counted at its nominal step time (DLIO measures its
 * sleep, which on a busy machine runs over).  --per-epoch prints each
 * counted epoch's DLIO AU and the slowest rank's wall time to stderr too.
 *
 * --gather is the copy any loader that shuffles samples must make, with no
 * loader: each rank copies its share of FILE's bytes (BENCH_SAMPLE_BYTES
 * per sample), in a uniformly random order drawn every epoch, from the page
 * cache (mapped once, outside the clock) into a ring of D batches (8) of B
 * samples (256), one thread per rank; the same processes on the same cores
 * as the loader, one copy per byte, as batch assembly needs, made as the
 * loader makes it (past the cache for a ring this large: sc__copy_nt), or
 * by the one --copy names.  A windowed shuffle such as the loader's reads with more locality
 * and can beat it a little.  Its line says "gather:" instead.
 * --sample-bytes: samples of N bytes (BENCH_SAMPLE_BYTES by default).
 *
 * --first-batch is a job's start-up: from before sc_loader_open (every
 * rank past MPI_Init) to the first batch of epoch 0 in every rank's hand,
 * the slowest rank's, printed as "first batch: S s after open", and then
 * the open alone ("open S s").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_doc.h"
#include "mem.h"
#include "shardcache.h"

/* Epoch e's order of the n samples (Fisher-Yates, xorshift64), outside the clock. */
static void gather_order(uint64_t *order, uint64_t n, uint64_t epoch)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (epoch + 1);
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t j = x % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

/*
 * --gather's samples, batches and ring, and its copy: the loader's
 * (sc__copy_nt past the cache), or memcpy.
 */
typedef struct gopts {
    uint64_t sample, batch, depth;
    const char *copy; /* "loader", "memcpy" or "nt" */
} gopts;

/* --gather's copy for a ring of ring_bytes, and what its line calls it (*name). */
static sc__copy_fn gather_copy(const gopts *g, uint64_t ring_bytes, const char **name)
{
    int loader = !strcmp(g->copy, "loader");
    sc__copy_fn copy = loader                    ? sc__copy_for(ring_bytes)
                       : !strcmp(g->copy, "nt") ? sc__copy_nt
                                                : memcpy;
    *name = copy == memcpy ? (loader ? "the loader's copy (memcpy)" : "memcpy")
                           : (loader ? "the loader's copy (non-temporal)" : "non-temporal");
    return copy;
}

/* v as a whole number of at least `least` into *out: 0 if it is not one. */
static int count_arg(const char *v, uint64_t least, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno || x < least)
        return 0;
    *out = x;
    return 1;
}

/* --gather's own option `a` (value v) into g: 1 if it is one; *bad = a where v is not valid. */
static int gather_opt(const char *a, const char *v, gopts *g, const char **bad)
{
    uint64_t *count = !strcmp(a, "--sample-bytes") ? &g->sample
                      : !strcmp(a, "--batch")      ? &g->batch
                      : !strcmp(a, "--depth")      ? &g->depth
                                                   : NULL;
    if (count && !count_arg(v, 1, count))
        *bad = a;
    if (!strcmp(a, "--copy") && strcmp(v, "loader") && strcmp(v, "memcpy") && strcmp(v, "nt"))
        *bad = a;
    g->copy = !strcmp(a, "--copy") ? v : g->copy;
    return count || !strcmp(a, "--copy");
}

/* One epoch of --gather on this rank: its share of the order, batch by batch. */
static uint64_t gather_epoch(const unsigned char *src, uint64_t n, const uint64_t *order,
                             unsigned char *ring, const gopts *g, sc__copy_fn copy, int rank,
                             int size)
{
    uint64_t mine = 0, sum = 0, S = g->sample, batch = g->batch;
    for (uint64_t i = (uint64_t)rank; i < n; i += (uint64_t)size, mine++) {
        unsigned char *slot = ring + (mine / batch % g->depth) * batch * S;
        unsigned char *to = slot + mine % batch * S;
        copy(to, src + order[i] * S, S);
        sum += src[order[i] * S + mine % S]; /* the copy's source, read: the loop is kept */
    }
    sc__copy_fence();
    return sum + ring[mine % S];
}

/* Why --gather cannot copy the file st describes with g, or NULL (the ring's bytes in *ring). */
static const char *gather_refusal(const gopts *g, const struct stat *st, uint64_t *ring)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    if ((uint64_t)st->st_size < g->sample)
        return "smaller than one sample (--sample-bytes)";
    if (__builtin_mul_overflow(g->depth, g->batch, ring) ||
        __builtin_mul_overflow(*ring, g->sample, ring))
        return "a ring of --depth x --batch x --sample-bytes bytes overflows";
    return NULL;
}

/* --gather: the shuffled copy; prints a "gather:" line on rank 0. */
static int gather(const char *path, const gopts *g, uint64_t epochs, uint64_t warmup, int rank,
                  int size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    uint64_t ring_bytes = 0;
    const char *why = fd < 0 || fstat(fd, &st) != 0 ? strerror(errno)
                                                    : gather_refusal(g, &st, &ring_bytes);
    if (why) {
        fprintf(stderr, "bench_deliver: --gather '%s': %s\n", path, why);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    uint64_t n = (uint64_t)st.st_size / g->sample;
    const unsigned char *src = n ? mmap(NULL, (size_t)st.st_size, PROT_READ,
                                        MAP_PRIVATE | MAP_POPULATE, fd, 0) : MAP_FAILED;
    close(fd);
    uint64_t *order = malloc(sizeof *order * (n ? n : 1));
    unsigned char *ring = malloc(ring_bytes);
    if (src == MAP_FAILED || !order || !ring) {
        fprintf(stderr, "bench_deliver: '%s': cannot map it, or no memory\n", path);
        return 1;
    }
    memset(ring, 0, ring_bytes);
    const char *copy_name;
    sc__copy_fn copy = gather_copy(g, ring_bytes, &copy_name);
    double secs = 0, samples = 0;
    uint64_t sum = 0;
    for (uint64_t e = 0; e < warmup + epochs; e++) {
        gather_order(order, n, e);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        sum += gather_epoch(src, n, order, ring, g, copy, rank, size);
        double t = bench_now() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (e >= warmup)
            secs += t, samples += (double)n;
    }
    if (rank == 0)
        printf("gather: %d ranks, %llu epochs, %llu-byte samples, a ring of %llu x %llu "
               "(%.1f MB), %s: %.0f samples/s, %.1f MB/s (check %llu)\n", size,
               (unsigned long long)epochs, (unsigned long long)g->sample,
               (unsigned long long)g->depth, (unsigned long long)g->batch, ring_bytes / 1e6,
               copy_name, samples / secs, samples * (double)g->sample / secs / 1e6,
               (unsigned long long)(sum & 0xff));
    munmap((void *)src, (size_t)st.st_size);
    free(order);
    free(ring);
    return 0;
}

/*
 * DLIO's AU of one rank's epoch of `steps` steps of step_s: the steps after
 * the first over the epoch's wall time after the first one's end
 * (`first_end`, from the epoch's start); 0 with fewer than two, as DLIO's.
 * The steps' nominal time, where DLIO measures its sleep: on a busy
 * machine a short sleep runs over, and that is not computation.
 */
static double dlio_au(uint64_t steps, double step_s, double wall, double first_end)
{
    return steps >= 2 && wall > first_end ? (double)(steps - 1) * step_s / (wall - first_end) : 0;
}

/*
 * DLIO's AU of epoch e: its ranks' mean, added to sum; the lowest rank's
 * too; with `say`, rank 0 prints both and the slowest rank's wall time.
 */
static void dlio_add(double au, double wall, uint64_t e, int say, int size, double *sum,
                     double *lowest)
{
    double low = au;
    MPI_Allreduce(MPI_IN_PLACE, &au, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *sum += au / size;
    *lowest = low < *lowest ? low : *lowest;
    if (say)
        fprintf(stderr, "epoch %llu: AU %.3f by DLIO (lowest rank %.3f), %.2f s\n",
                (unsigned long long)e, au / size, low, wall);
}

/*
 * warmup + epochs epochs from epoch `first` on, a step of step_ms per
 * batch; rank 0 prints the "deliver:" line of the counted ones.  1 if
 * every epoch was exactly-once.
 */
static int run_step(sc_loader *ld, uint64_t first, uint64_t warmup, uint64_t epochs,
                     double step_ms, int spin, int per_epoch, int rank, int size)
{
    double bytes = 0, samples = 0, wait = 0, busy = 0, secs = 0, taking = 0;
    double src = 0, hit = 0, peer = 0; /* where the counted epochs' shard bytes came from */
    double skipped = 0;               /* cache writes skipped, every epoch */
    double dlio = 0, lowest = 1e300; /* DLIO's AU: the counted epochs' sum, the lowest rank */
    int ok = 1;
    for (uint64_t e = first; e < first + warmup + epochs; e++) {
        int counted = e >= first + warmup;
        MPI_Barrier(MPI_COMM_WORLD); /* the clock starts together on every rank */
        double t0 = bench_now();
        if (sc_epoch_begin(ld, e, NULL) != SC_OK) {
            fprintf(stderr, "bench_deliver[%d]: %s\n", rank, sc_loader_last_error(ld));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        sc_batch b;
        int rc;
        double n0 = t0; /* taking: the time from here (or a step's end) to a batch */
        double mine = 0, first_end = 0; /* this epoch's steps: their time, the first's end */
        uint64_t steps = 0;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            taking += counted ? bench_now() - n0 : 0;
            for (int f = 0; counted && f < b.nfields; f++)
                bytes += (double)b.bytes[f];
            samples += counted ? (double)b.size : 0;
            double s0 = bench_now();
            bench_step(step_ms / 1e3, spin);
            n0 = bench_now();
            mine += n0 - s0;
            if (steps++ == 0)
                first_end = n0 - t0;
            sc_batch_release(ld, &b);
        }
        busy += counted ? mine : 0;
        taking += counted ? bench_now() - n0 : 0;
        if (rc != SC_END_OF_EPOCH) {
            fprintf(stderr, "bench_deliver[%d]: %s\n", rank, sc_loader_last_error(ld));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double t = bench_now() - t0;
        if (counted)
            dlio_add(dlio_au(steps, step_ms / 1e3, t, first_end), t, e, per_epoch && !rank, size,
                     &dlio, &lowest);
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sc_epoch_summary rep;
        if (sc_epoch_wait(ld, e, &rep) != SC_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
        ok &= rep.exactly_once.ok;
        skipped += (double)rep.cache_writes_skipped;
        if (counted) {
            secs += t, wait += rep.wait_s;
            src += (double)rep.bytes_from_source, hit += (double)rep.bytes_from_cache;
            peer += (double)rep.bytes_from_peers;
        }
    }
    double mine[9] = {bytes, samples, wait, busy, taking, src, hit, peer, skipped}, all[9];
    MPI_Reduce(mine, all, 9, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0)
        printf("deliver: %d ranks, %llu epochs, step %g ms: %.0f samples/s, %.1f MB/s, "
               "wait %.2f%%, taking %.2f%%, utilization %.1f%%, exactly-once %s, DLIO's AU "
               "%.1f%% (lowest rank %.1f%%); an epoch's shard bytes: %.1f MB from the source, "
               "%.1f MB from the cache, %.1f MB from other nodes; cache writes skipped "
               "(the writer behind), every epoch: %.0f\n",
               size, (unsigned long long)epochs, step_ms, all[1] / secs, all[0] / secs / 1e6,
               100.0 * all[2] / (secs * size), 100.0 * all[4] / (secs * size),
               100.0 * all[3] / (secs * size), ok ? "ok" : "FAILED",
               epochs ? 100.0 * dlio / (double)epochs : 0.0, epochs ? 100.0 * lowest : 0.0,
               all[5] / 1e6 / (double)(epochs ? epochs : 1),
               all[6] / 1e6 / (double)(epochs ? epochs : 1),
               all[7] / 1e6 / (double)(epochs ? epochs : 1), all[8]);
    fflush(stdout);
    return ok;
}

/* --first-batch: open to the first batch of epoch 0, the slowest rank's. */
static int first_batch(sc_config *cfg, int rank)
{
    sc_loader *ld = NULL;
    sc_batch b;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    if (sc_loader_open(MPI_COMM_WORLD, cfg, &ld, NULL) != SC_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double t[2] = {bench_now() - t0, 0};
    if (sc_epoch_begin(ld, 0, NULL) != SC_OK || sc_batch_next(ld, &b) != SC_OK) {
        fprintf(stderr, "bench_deliver[%d]: %s\n", rank, sc_loader_last_error(ld));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    t[1] = bench_now() - t0;
    sc_batch_release(ld, &b);
    MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("first batch: %.3f s after open (open %.3f s)\n", t[1], t[0]);
    sc_loader_close(ld); /* mid-epoch: the close does not wait for the rest */
    return 0;
}

/* 1 (said by rank 0) where option `bad` had no valid value, or gather's options came alone. */
static int args_refused(const char *bad, int stray, int rank)
{
    if (bad && rank == 0)
        fprintf(stderr, "bench_deliver: %s: a whole number (of 1 or more but for --warmup), "
                "or for --copy loader, memcpy or nt\n", bad);
    else if (stray && rank == 0)
        fprintf(stderr, "bench_deliver: --sample-bytes, --batch, --depth and --copy go with "
                "--gather FILE\n");
    return bad || stray;
}

int main(int argc, char **argv)
{
    int provided, rank, size, spin = 0, startup = 0, per_epoch = 0, gathers = 0;
    const char *gather_path = NULL, *bad = NULL;
    gopts g = {BENCH_SAMPLE_BYTES, 256, 8, "loader"};
    uint64_t epochs = 2, warmup = 1;
    const char *steps = "0";
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--epochs"))
            bad = count_arg(v, 1, &epochs) ? bad : a, i++;
        else if (!strcmp(a, "--warmup"))
            bad = count_arg(v, 0, &warmup) ? bad : a, i++;
        else if (!strcmp(a, "--step-ms"))
            steps = v, i++;
        else if (!strcmp(a, "--spin"))
            spin = 1;
        else if (!strcmp(a, "--first-batch"))
            startup = 1;
        else if (!strcmp(a, "--per-epoch"))
            per_epoch = 1;
        else if (!strcmp(a, "--gather"))
            gather_path = v, i++;
        else if (gather_opt(a, v, &g, &bad))
            gathers = 1, i++;
        else {
            if (rank == 0)
                fprintf(stderr, "bench_deliver: unknown option '%s'\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (args_refused(bad, gathers && !gather_path, rank)) {
        MPI_Finalize();
        return 2;
    }
    if (gather_path) {
        int rc = gather(gather_path, &g, epochs, warmup, rank, size);
        MPI_Finalize();
        return rc;
    }
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    sc_loader *ld = NULL;
    if (sc_config_init(&cfg, &err) != SC_OK) {
        fprintf(stderr, "bench_deliver: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cfg.device = SC_DEVICE_HOST;
    /* The job's epochs, as a script that knows its own says them: nothing read past the last. */
    uint64_t nsteps = 1;
    for (const char *at = steps; *at; at++)
        nsteps += *at == ',';
    if (!getenv("SC_EPOCHS"))
        cfg.epochs = (int)(warmup + epochs * nsteps);
    if (startup) {
        int rc = first_batch(&cfg, rank);
        MPI_Finalize();
        return rc;
    }
    if (sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, NULL) != SC_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int ok = 1;
    uint64_t first = 0;
    for (const char *at = steps; *at; at += *at == ',') {
        char *end;
        double step_ms = strtod(at, &end);
        if (end == at) {
            if (rank == 0)
                fprintf(stderr, "bench_deliver: --step-ms '%s': not a list of numbers\n", steps);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        uint64_t w = at == steps ? warmup : 0; /* the loader goes on warm */
        ok &= run_step(ld, first, w, epochs, step_ms, spin, per_epoch, rank, size);
        first += w + epochs;
        at = end;
    }
    sc_loader_close(ld);
    MPI_Finalize();
    return ok ? 0 : 1;
}
