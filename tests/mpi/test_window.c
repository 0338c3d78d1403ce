/*
 * The memory bound with large samples (mpiexec -n 1, 2 and 4): samples of
 * 1 MiB and 4 MiB, whose old auto window (at least 4096 samples) took a
 * rank's whole share into memory, however small SC_STREAM_BYTES was.
 * Each case runs a cold epoch and a warm one and checks that
 *  - the stream never held more shard bytes (its own counter: shards and
 *    pooled buffers) than its bound: SC_STREAM_BYTES, or a rank's batch's
 *    shards where they alone need more (then loads overlap the build);
 *  - the process's peak resident memory grew by at most that bound,
 *    the ring and a stated slack (VmHWM, reset through clear_refs);
 *  - the cold epoch's first batch waited for at most one window's shard
 *    reads (the stream's count of bytes read when it could be built), plus
 *    what the other producer read beside it (one shard);
 *  - an explicit SC_SHUFFLE_WINDOW too large for the bound is lowered;
 *  - with SC_PARTITIONS a rank's bound is its own units' shards, not the
 *    job's (each rank serves P / R of the P windows).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "loader_state.h"
#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static char dir[1024];

#define MIB (UINT64_C(1) << 20)
/* What else a loader's open and epochs may touch: plans, ledger, thread stacks, HDF5. */
#define SLACK (16 * MIB)
#define PRODUCERS 2

typedef struct wcase {
    const char *name;
    uint64_t sample_bytes, nsamples, shard_size, batch, stream_bytes, window, partitions;
    uint64_t cache_bytes; /* a rank's SC_CACHE_BYTES; 0: the default (all of it) */
} wcase;

/* A sample's int32s in /x: with its int64 id in /y, sample_bytes in all. */
static int width_of(const wcase *w)
{
    return (int)((w->sample_bytes - sizeof(int64_t)) / sizeof(int32_t));
}

/*
 * dir/<name>.h5: self-checking samples (sc_t_write_samples) of
 * sample_bytes each, written once by rank 0; every delivered sample is
 * checked against them, so the batch copies of rings this large (past the
 * cache: sc__copy_nt) deliver the source's bytes.
 */
static void source_of(const wcase *w, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.h5", dir, w->name);
    struct stat st;
    if (rank == 0 && stat(path, &st) != 0)
        assert_int_equal(sc_t_write_samples(path, 0, w->nsamples, width_of(w)), 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A line of /proc/self/status in bytes (VmRSS, VmHWM), or aborts. */
static uint64_t status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(key);
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            found = sscanf(line + n + 1, "%llu", &kb) == 1;
    if (f)
        fclose(f);
    if (!found)
        fail_msg("rank %d: no %s in /proc/self/status", rank, key);
    return kb * 1024;
}

/* Resets VmHWM to VmRSS (Linux: "5" to clear_refs); 0 if the kernel says no. */
/*
 * Resident memory says what the stream holds only with the C library's
 * allocator: a sanitizer's keeps freed blocks in quarantine and maps its
 * shadow, so under one the peak is not checked (the stream's own count is).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static int reset_peak(void)
{
#ifdef SANITIZED
    return 0;
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int ok = f && fputs("5", f) >= 0;
    if (f)
        ok = (fclose(f) == 0) && ok;
    return ok;
}

/* The shards a window of w samples can touch: its first's and those its others start. */
static uint64_t span_shards(uint64_t w, uint64_t S)
{
    return w ? (w + S - 2) / S + 1 : 1;
}

static void run_case(const wcase *w)
{
    char src[1200];
    source_of(w, src, sizeof src);
    sc_config c = sc_t_config(src, dir, w->shard_size, w->batch, 5);
    c.stream_bytes = w->stream_bytes;
    c.shuffle_window = w->window;
    c.prefetch_batches = 2;
    c.producers = PRODUCERS;
    c.mode = SC_SHUFFLE_GLOBAL;
    c.partitions = w->partitions;
    if (w->cache_bytes) {
        c.cache_bytes = w->cache_bytes;
        c.cache_writes = SC_CACHE_WRITES_ALL;
    }
    uint64_t shard_bytes = w->shard_size * w->sample_bytes;
    uint64_t ring = c.prefetch_batches * w->batch * w->sample_bytes;
    int peak_ok = reset_peak();
    uint64_t rss0 = status_bytes("VmRSS");
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    uint64_t slot_bytes, depth = sc__stream_ring(ld->stream, &slot_bytes);
    if (!sc__stream_copies_past_cache(ld->stream)) /* what the byte checks below are for */
        fail_msg("%s: a ring of %llu x %llu bytes stays in the cache: the copy past it is "
                 "not tried", w->name, (unsigned long long)depth,
                 (unsigned long long)slot_bytes);
    uint64_t win = ld->cfg.shuffle_window, P = w->partitions;
    /* this rank's window: P / R units of win / P samples each (one of win without partitions) */
    uint64_t units = P ? P / (uint64_t)size : 1, per = P ? win / P : win;
    uint64_t wbytes = units * span_shards(per, w->shard_size) * shard_bytes;
    /* At most one window, and one the bound can hold: its half, or a batch's shards. */
    uint64_t most = w->stream_bytes / 2, batch = span_shards(w->batch, w->shard_size) * shard_bytes;
    most = most > batch ? most : batch;
    uint64_t wait = wbytes < most ? wbytes : most;
    uint64_t bound = wbytes > w->stream_bytes ? wbytes : w->stream_bytes;
    uint64_t first = 0, held = 0;
    for (uint64_t e = 0; e < 2; e++) {
        sc_batch b;
        int rc;
        assert_int_equal(sc_epoch_begin(ld, e, NULL), SC_OK);
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            char why[256];
            if (!sc_t_samples_ok(&b, width_of(w), w->nsamples, why, sizeof why))
                fail_msg("%s: epoch %llu: %s", w->name, (unsigned long long)e, why);
            assert_int_equal(sc_batch_release(ld, &b), SC_OK);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
        sc__stream_counts k;
        assert_int_equal(sc__stream_last_counts(ld->stream, &k), SC_OK);
        first = e == 0 ? k.first_bytes : first;
        held = k.held_peak > held ? k.held_peak : held;
        /* Equal shards of a MiB and more: the pool, filled and faulted in at open, serves
           every epoch's loads, hits and misses; only a load over the bound, a shard the
           next batch needs with nothing in flight to make room, takes a fresh one. */
        if (w->nsamples % w->shard_size == 0 && k.fresh_bufs > PRODUCERS)
            fail_msg("%s: rank %d: epoch %llu read %llu shards into fresh buffers, not the "
                     "pool's (%llu hits)", w->name, rank, (unsigned long long)e,
                     (unsigned long long)k.fresh_bufs, (unsigned long long)k.hits);
        uint64_t hits = k.hits; /* a rank's next shards may be another's: the job's */
        MPI_Allreduce(MPI_IN_PLACE, &hits, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (e == 1 && w->cache_bytes && hits == 0)
            fail_msg("%s: no cache hit in the warm epoch on any rank", w->name);
        if (k.held_peak > bound)
            fail_msg("%s: rank %d, epoch %llu: the stream held %llu bytes of shards at once, "
                     "its bound is %llu (SC_STREAM_BYTES %llu, window %llu samples)", w->name,
                     rank, (unsigned long long)e, (unsigned long long)k.held_peak,
                     (unsigned long long)bound, (unsigned long long)w->stream_bytes,
                     (unsigned long long)win);
        /* The cold epoch's first batch: one window's reads, and a shard in flight beside it
           on each producer (counted when they land, before the batch is taken). */
        if (e == 0 && k.first_bytes > wait + PRODUCERS * shard_bytes)
            fail_msg("%s: rank %d: the cold epoch's first batch waited for %llu bytes of "
                     "reads, a window of %llu samples can span %llu (+%d x %llu: a shard read "
                     "beside it by each producer)", w->name, rank,
                     (unsigned long long)k.first_bytes, (unsigned long long)win,
                     (unsigned long long)wait, PRODUCERS, (unsigned long long)shard_bytes);
    }
    uint64_t hwm = status_bytes("VmHWM");
    sc_loader_close(ld);
    if (rank == 0)
        printf("# %s: window %llu samples, held %llu MiB, cold first batch after %llu MiB, "
               "peak RSS +%llu MiB (bound %llu + ring %llu)\n", w->name,
               (unsigned long long)win, (unsigned long long)(held / MIB),
               (unsigned long long)(first / MIB), (unsigned long long)((hwm - rss0) / MIB),
               (unsigned long long)(w->stream_bytes / MIB), (unsigned long long)(ring / MIB));
    /* each producer's and the cache writer's, for direct I/O (docs/shuffle.md) */
    uint64_t bounce = (PRODUCERS + 1) * (uint64_t)SC__IO_BOUNCE;
    if (peak_ok && hwm > rss0 + bound + ring + bounce + SLACK)
        fail_msg("%s: rank %d: peak resident memory rose by %llu MiB, more than "
                 "the bound (%llu MiB) + the ring (%llu MiB) + the producers' and the "
                 "cache writer's bounce buffers (%llu MiB) + %llu MiB", w->name, rank,
                 (unsigned long long)((hwm - rss0) / MIB),
                 (unsigned long long)(bound / MIB), (unsigned long long)(ring / MIB),
                 (unsigned long long)(bounce / MIB), (unsigned long long)(SLACK / MIB));
    /* The resolved window's shards fit half of the bound, or it is one batch. */
    if (wbytes > w->stream_bytes / 2 && win > w->batch)
        fail_msg("%s: a window of %llu samples spans %llu bytes of shards, more than half of "
                 "SC_STREAM_BYTES=%llu", w->name, (unsigned long long)win,
                 (unsigned long long)wbytes, (unsigned long long)w->stream_bytes);
}

/*
 * 1 MiB samples, eight to a shard, batches of 16: the old floor of 4096
 * held the share, and a first batch drew from up to 16 of its shards.
 */
static void test_one_mib_auto(void **state)
{
    (void)state;
    wcase w = {"mib1", MIB, 192, 8, 16, 64 * MIB, SC_WINDOW_AUTO, 0, 0};
    run_case(&w);
}

/* 4 MiB samples, one a shard: the bound holds four, the window shrinks to a batch. */
static void test_four_mib_auto(void **state)
{
    (void)state;
    wcase w = {"mib4", 4 * MIB, 48, 1, 2, 16 * MIB, SC_WINDOW_AUTO, 0, 0};
    run_case(&w);
}

/* A third of the data cached: hits and misses alike are read into the pool's buffers. */
static void test_third_cached(void **state)
{
    (void)state;
    wcase w = {"mib1", MIB, 192, 8, 16, 64 * MIB, SC_WINDOW_AUTO, 0, 64 * MIB / (uint64_t)size};
    run_case(&w);
}

/* An explicit window the bound cannot hold is lowered to what it can. */
static void test_explicit_window_lowered(void **state)
{
    (void)state;
    wcase w = {"mib1", MIB, 192, 8, 16, 64 * MIB, 128, 0, 0};
    run_case(&w);
}

/*
 * A batch whose shards alone exceed the bound (4 of 4 MiB against 8 MiB,
 * unet3d's case in small): the stream holds that batch's shards, no more,
 * and the next batch's load overlaps the build, which lets shards go as it
 * puts their samples.
 */
static void test_batch_over_the_bound(void **state)
{
    (void)state;
    wcase w = {"mib4", 4 * MIB, 48, 1, 4, 8 * MIB, SC_WINDOW_AUTO, 0, 0};
    run_case(&w);
}

/* SC_PARTITIONS = world size, batches of 2 one-MiB shards a rank, 4 MiB: within the bound. */
static void test_partitions_bound(void **state)
{
    (void)state;
    wcase w = {"part", MIB, 64, 1, 2, 4 * MIB, SC_WINDOW_AUTO, (uint64_t)size, 0};
    run_case(&w);
}

int main(int argc, char **argv)
{
    /*
     * glibc raises its mmap threshold once a large block is freed and then
     * keeps freed blocks in its heap, which VmRSS counts though no one holds
     * them (the ring and buffers of a closed loader): fixed at 1 MiB, freed
     * buffers go back to the kernel and VmHWM shows what the stream holds.
     */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "window");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_mib_auto),
        cmocka_unit_test(test_four_mib_auto),
        cmocka_unit_test(test_third_cached),
        cmocka_unit_test(test_explicit_window_lowered),
        cmocka_unit_test(test_batch_over_the_bound),
        cmocka_unit_test(test_partitions_bound),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
