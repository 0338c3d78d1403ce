/*
 * The loader (sc_loader_*) under mpiexec -n 1, 2 and 4.
 *
 * Every batch carries the right bytes for its ids; every epoch has the same
 * batch count on every rank and is exactly-once by the runtime's verdict
 * and by an independent count here; the in-rank shuffle is deterministic;
 * a rank slowed 2x per step does not delay the others' next epoch; closing
 * mid-epoch (also with ranks in different epochs) neither hangs nor leaks;
 * the producers run under SCHED_BATCH, yielding the CPU to the caller;
 * a failing source read stops the loader with an error naming the file;
 * every injected fault ends in an error or verdict that names it; misuse
 * is an SC_EINVAL, never a crash.
 */
#define _GNU_SOURCE /* SCHED_BATCH */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "hash.h"
#include "sc_h5test.h"
#include "sc_test.h"
#include "tring.h"

static int rank, size;
static char dir[1024], src[1200], srcb[1200], srcz[1200];

enum { NSHARDS = 40, SHARD = 24, W = 6, NSAMPLES = NSHARDS * SHARD - 5 };

static void write_file(const char *path, uint64_t first, uint64_t n)
{
    assert_int_equal(sc_t_write_samples(path, first, n, W), 0);
}

/*
 * Layout A (one file), the same compressed (shuffle + deflate in chunks of
 * 10 rows, which the shards split: producers decode them in parallel), and
 * layout B (a directory of one file per shard).
 */
static void make_sources(void)
{
    snprintf(src, sizeof src, "%s/src.h5", dir);
    snprintf(srcz, sizeof srcz, "%s/srcz.h5", dir);
    snprintf(srcb, sizeof srcb, "%s/b", dir);
    if (rank == 0) {
        write_file(src, 0, NSAMPLES);
        assert_int_equal(sc_t_write_samples_z(srcz, 0, NSAMPLES, W, 10), 0);
        mkdir(srcb, 0777);
        for (int s = 0; s < NSHARDS; s++) {
            char p[1400];
            snprintf(p, sizeof p, "%s/part%03d.h5", srcb, s);
            /* the same samples as layout A: the last shard is short */
            write_file(p, (uint64_t)s * SHARD, s + 1 < NSHARDS ? SHARD : NSAMPLES % SHARD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static int ncache;

static sc_config config(const char *source)
{
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", source);
    /* A fresh cache per configuration: tests never see each other's. */
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache%d", dir, ncache++);
    c.shard_size = SHARD;
    c.batch_size = 7;
    c.seed = 1234;
    c.mode = SC_SHUFFLE_GLOBAL;
    c.device = SC_DEVICE_HOST;
    c.log_level = 0;
    return c;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every rank of one node */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * Every sample's bytes follow from its id, so a batch checks itself.  A
 * batch on the simulated device is read once its copy is done.
 */
static void check_batch(sc_loader *ld, const sc_batch *b, const sc_config *cfg)
{
    uint64_t batch_size = cfg->batch_size;
    assert_int_equal(b->size, batch_size);
    assert_int_equal(b->nfields, 2);
    assert_int_equal(b->device >= 0, cfg->device != SC_DEVICE_HOST);
    assert_int_equal(sc_batch_wait(ld, b), SC_OK);
    assert_int_equal(b->bytes[0], batch_size * W * sizeof(int32_t));
    assert_int_equal(b->bytes[1], batch_size * sizeof(int64_t));
    char why[256];
    if (!sc_t_samples_ok(b, W, NSAMPLES, why, sizeof why))
        fail_msg("%s", why);
}

/*
 * Runs `epochs` epochs; returns a hash of the order this rank saw.  Checks
 * data, equal batch counts, the verdicts, and exactly-once by counting
 * here: the sum over ranks of each sample's real deliveries is 0 or 1, and
 * the zeros are exactly the samples the verdict says were dropped.
 */
static uint64_t run_epochs(const sc_config *cfg, uint64_t epochs)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, cfg, &ld, &err), &err);
    uint64_t h = 0;
    uint32_t *count = malloc(sizeof *count * NSAMPLES);
    for (uint64_t e = 0; e < epochs; e++) {
        sc_epoch_info info;
        assert_int_equal(sc_epoch_begin(ld, e, &info), SC_OK);
        assert_int_equal(info.epoch, e);
        memset(count, 0, sizeof *count * NSAMPLES);
        sc_batch b;
        uint64_t n = 0;
        int rc;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            check_batch(ld, &b, cfg);
            assert_int_equal(b.index, n);
            assert_int_equal(b.epoch, e);
            for (uint64_t k = 0; k < b.size - b.padded; k++)
                count[b.ids[k]]++;
            for (uint64_t k = 0; k < b.size; k++)
                h = sc__mix64(h ^ b.ids[k]);
            n++;
            assert_int_equal(sc_batch_release(ld, &b), SC_OK);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
        assert_int_equal(sc_batch_next(ld, &b), SC_END_OF_EPOCH); /* and it stays so */
        assert_int_equal(n, info.batches);
        uint64_t lo = n, hi = n;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        assert_int_equal(lo, hi);

        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, e, &rep), SC_OK);
        const sc_exactly_once *v = &rep.exactly_once;
        assert_true(v->verified);
        if (!v->ok)
            fail_msg("epoch %llu: %s", (unsigned long long)e, v->detail);
        assert_int_equal(rep.batches, n);
        MPI_Allreduce(MPI_IN_PLACE, count, NSAMPLES, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
        uint64_t zeros = 0;
        for (uint64_t id = 0; id < NSAMPLES; id++) {
            assert_true(count[id] <= 1);
            zeros += count[id] == 0;
        }
        assert_int_equal(zeros, v->dropped);
        assert_int_equal(v->delivered + v->dropped, NSAMPLES);
    }
    free(count);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    return h;
}

static void test_epochs_are_exactly_once(void **state)
{
    (void)state;
    struct {
        sc_shuffle_mode mode;
        sc_remainder rem;
        uint64_t window, depth, batch;
        int producers, layout; /* 0: A, 1: B, 2: A compressed */
        sc_device_mode device;
    } cases[] = {
        {SC_SHUFFLE_GLOBAL, SC_REMAINDER_DROP, 4096, 8, 7, 2, 0, SC_DEVICE_HOST},
        {SC_SHUFFLE_STICKY, SC_REMAINDER_PAD, 50, 3, 7, 3, 0, SC_DEVICE_SIM},
        {SC_SHUFFLE_STICKY, SC_REMAINDER_DROP, 0, 1, 5, 1, 1, SC_DEVICE_HOST},
        {SC_SHUFFLE_GLOBAL, SC_REMAINDER_PAD, 1, 2, 16, 4, 1, SC_DEVICE_SIM},
        {SC_SHUFFLE_GLOBAL, SC_REMAINDER_DROP, 64, 4, 7, 4, 2, SC_DEVICE_HOST},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *source[] = {src, srcb, srcz};
        sc_config c = config(source[cases[i].layout]);
        c.mode = cases[i].mode;
        c.exchange = 0.3;
        c.remainder = cases[i].rem;
        c.shuffle_window = cases[i].window;
        c.prefetch_batches = cases[i].depth;
        c.batch_size = cases[i].batch;
        c.producers = cases[i].producers;
        c.stream_bytes = 1; /* the bound can never stall the pipeline */
        c.device = cases[i].device;
        run_epochs(&c, 3);
    }
}

/* Flips the first byte of field 0 in every cache entry under `root`; returns how many. */
static int corrupt_entries(const char *root)
{
    char cmd[SC_PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "find '%s' -name 's*.h5'", root);
    FILE *list = popen(cmd, "r");
    char path[SC_PATH_MAX + 64];
    int n = 0;
    while (list && fgets(path, sizeof path, list)) {
        path[strcspn(path, "\n")] = 0;
        FILE *f = fopen(path, "r+b");
        unsigned char off[8];
        /* The entry header (docs/cache.md): field 0's offset at byte 48. */
        if (!f || fseek(f, 48, SEEK_SET) || fread(off, 8, 1, f) != 1) {
            if (f)
                fclose(f);
            continue;
        }
        long at = 0;
        for (int i = 7; i >= 0; i--)
            at = at << 8 | off[i];
        int c;
        if (fseek(f, at, SEEK_SET) == 0 && (c = fgetc(f)) != EOF &&
            fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 0xff, f) != EOF)
            n++;
        fclose(f);
    }
    if (list)
        pclose(list);
    return n;
}

/*
 * Warm reads map the cache entries (no copy); an entry whose bytes no
 * longer match its checksum must be repaired from the source, never
 * served: every batch of the next job still checks out.
 */
static void test_corrupt_cache_entries_are_not_served(void **state)
{
    (void)state;
    sc_config c = config(src);
    c.cache_check = SC_CACHE_CHECK_FIRST;
    run_epochs(&c, 1);
    int n = 0;
    if (rank == 0)
        n = corrupt_entries(c.cache_dir);
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    assert_true(n >= NSHARDS / 2); /* sticky-free epoch 0 cached what it read */
    run_epochs(&c, 2);
}

/*
 * Tracing on: the same epochs, every thread recording into its ring while
 * producers run (ASan and TSan builds check the rings), and each rank's
 * file a whole Chrome trace: opened and closed, every event this rank's
 * and of the two epochs run (or the third, whose shards load ahead), a batch assembly recorded for every batch
 * delivered unless the rank line counts it dropped, and that line naming
 * the rank, the world and the ring's size.
 */
static void test_traced_epochs(void **state)
{
    (void)state;
    sc_config c = config(src);
    c.producers = 3;
    c.trace_events = 64; /* small: some rings may fill, and drop */
    snprintf(c.trace, sizeof c.trace, "%s/trace%d", dir, ncache);
    run_epochs(&c, 2);
    char path[SC_PATH_MAX + 32], line[512], pid[32], want[160];
    snprintf(path, sizeof path, "%s.rank%d.json", c.trace, rank);
    snprintf(pid, sizeof pid, "\"pid\":%d,", rank);
    char assembly[64];
    snprintf(assembly, sizeof assembly, "\"name\":\"%s\"", sc__tring_stage_name(SC__ST_ASSEMBLY));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int lines = 0, closed = 0;
    unsigned long long spans = 0, dropped = ULLONG_MAX;
    while (fgets(line, sizeof line, f)) {
        if (lines++ == 0)
            assert_string_equal(line, "{\"traceEvents\":[\n");
        else if (!strcmp(line, "],\"displayTimeUnit\":\"ms\"}\n"))
            closed = 1;
        else if (!strstr(line, pid))
            fail_msg("rank %d's trace has another rank's event: %s", rank, line);
        if (strstr(line, "\"ph\":\"X\"") && !strstr(line, "\"epoch\":0,") &&
            !strstr(line, "\"epoch\":1,") && !strstr(line, "\"epoch\":2,"))
            fail_msg("a span of an epoch neither run nor prefetched: %s", line);
        spans += strstr(line, "\"ph\":\"X\"") && strstr(line, assembly);
        const char *d = strstr(line, "\"name\":\"shardcache\"") ? strstr(line, "\"dropped\":")
                                                                : NULL;
        if (d) {
            dropped = strtoull(d + 10, NULL, 10);
            snprintf(want, sizeof want, "\"rank\":%d,\"world\":%d,", rank, size);
            assert_non_null(strstr(line, want));
            assert_non_null(strstr(line, "\"ring_events\":64}"));
        }
    }
    fclose(f);
    assert_int_equal(closed, 1);
    assert_int_not_equal(dropped, ULLONG_MAX); /* the rank line is there */
    /* This rank's share of 2 epochs of NSAMPLES in batches of 7, each assembled once. */
    unsigned long long batches = 2 * ((NSAMPLES / (uint64_t)size) / c.batch_size);
    if (spans + dropped < batches)
        fail_msg("%llu batch assemblies traced and %llu events dropped for at least %llu "
                 "batches", spans, dropped, batches);
}

/*
 * SC_EPOCHS=2: the stream reads epoch 1's window while epoch 0 ends, but
 * nothing of epoch 2 (whose plan is still broadcast), however long the job
 * waits after epoch 1: its trace has no read or assembly of epoch 2.  An
 * epoch 2 begun anyway starts cold and is exactly-once.  Without it, the
 * same wait reads epoch 2 ahead.
 */
static int epochs_read_ahead(uint64_t said)
{
    sc_config c = config(src);
    c.epochs = said;
    snprintf(c.trace, sizeof c.trace, "%s/ahead%d", dir, ncache);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    for (uint64_t e = 0; e < 2; e++) {
        sc_batch b;
        assert_int_equal(sc_epoch_begin(ld, e, NULL), SC_OK);
        while (sc_batch_next(ld, &b) == SC_OK)
            assert_int_equal(sc_batch_release(ld, &b), SC_OK);
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, e, &rep), SC_OK);
        assert_true(rep.exactly_once.ok);
    }
    usleep(500000); /* time enough for producers to read a next epoch's window */
    assert_int_equal(sc_loader_close(ld), SC_OK);
    char path[SC_PATH_MAX + 32], line[512];
    snprintf(path, sizeof path, "%s.rank%d.json", c.trace, rank);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int ahead = 0;
    const sc__stage reads[] = {SC__ST_SOURCE_READ, SC__ST_CACHE_READ, SC__ST_ASSEMBLY};
    while (fgets(line, sizeof line, f)) {
        for (size_t k = 0; k < sizeof reads / sizeof reads[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "\"name\":\"%s\"", sc__tring_stage_name(reads[k]));
            ahead |= strstr(line, name) && strstr(line, "\"epoch\":2,");
        }
    }
    fclose(f);
    MPI_Allreduce(MPI_IN_PLACE, &ahead, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return ahead;
}

static void test_last_epoch_reads_nothing_ahead(void **state)
{
    (void)state;
    if (epochs_read_ahead(2))
        fail_msg("SC_EPOCHS=2: a rank read ahead for epoch 2");
    assert_true(epochs_read_ahead(0)); /* the wait above is long enough to show it */
    sc_config c = config(src);
    c.epochs = 2;
    run_epochs(&c, 3); /* epoch 2, past the last: cold, exactly-once */
}

static void test_order_is_deterministic(void **state)
{
    (void)state;
    sc_config c = config(src);
    c.shuffle_window = 64;
    c.producers = 3;
    uint64_t a = run_epochs(&c, 2);
    c.producers = 1; /* how many threads build it does not change it */
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache%d", dir, ncache++);
    uint64_t b = run_epochs(&c, 2);
    assert_int_equal(a, b);
    c.seed++;
    assert_int_not_equal(run_epochs(&c, 2), a);
}

/* MPI_Iprobe calls, the library's among them (this definition comes first). */
static long probes;

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    probes++;
    return PMPI_Iprobe(source, tag, comm, flag, status);
}

/*
 * The loader runs MPI's progress (MPI_Iprobe) on the training thread only
 * where another rank's claim waits for it: across nodes (here pretend ones,
 * SC_TEST_NODES), or on one host with a window whose atomics wait for
 * their target (OMPI_MCA_osc=pt2pt, the mpi.test_loader.pt2pt run).  With
 * the suite's osc/sm it probes for nothing: where MPI yields when idle,
 * each probe that found nothing gave the core away (docs/ownership.md).
 */
static void test_probes_only_where_claims_wait(void **state)
{
    (void)state;
    const char *osc = getenv("OMPI_MCA_osc");
    int pt2pt = osc && !strcmp(osc, "pt2pt"), local = 0;
    MPI_Comm node; /* the suite's jobs share one host; tests/cluster's do not */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    int wait = local < size || pt2pt || getenv("SC_TEST_NODES"); /* claims wait: probes */
    sc_config c = config(src);
    long before = probes;
    run_epochs(&c, 2);
    long made = probes - before;
    if (size > 1 && (wait ? made == 0 : made != 0))
        fail_msg("rank %d: %ld MPI_Iprobe calls in two epochs, %d of %d ranks on this host "
                 "(osc %s)", rank, made, local, size, osc ? osc : "unset");
    if (size < 2)
        return;
    setenv("SC_TEST_NODES", "2", 1); /* node.c: ranks dealt into 2 pretend nodes, */
    size_t n = strlen(c.cache_dir);    /* each with a cache directory of its own */
    snprintf(c.cache_dir + n, sizeof c.cache_dir - n, "/node%d", rank * 2 / size);
    before = probes;
    run_epochs(&c, 2);
    unsetenv("SC_TEST_NODES");
    if (probes == before)
        fail_msg("rank %d: no MPI_Iprobe in two epochs across 2 nodes", rank);
}

/*
 * An audit directory one rank cannot write fails every rank's open: that
 * rank freed its ledger's window (a collective) while the others went on
 * to the open's next agreement, and the job hung.
 */
static void test_one_ranks_audit_failure_is_everyones(void **state)
{
    (void)state;
    if (size < 2)
        skip();
    sc_config c = config(src);
    snprintf(c.audit_dir, sizeof c.audit_dir, "%s", rank == 1 ? "/proc/no/audit" : dir);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err);
    if (rc == SC_OK)
        fail_msg("rank %d: the open succeeded though rank 1 could not write its audit trail",
                 rank);
    assert_null(ld);
    if (rank != 1 && !strstr(err.msg, "another rank"))
        fail_msg("rank %d: the error does not say another rank failed: %s", rank, err.msg);
}

static void test_straggler_does_not_delay_others(void **state)
{
    (void)state;
    if (size < 2)
        skip(); /* needs a fast and a slow rank */
    enum { EPOCHS = 3 };
    sc_config c = config(src);
    c.batch_size = 8; /* 120 batches / size per epoch */
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    int slow = rank == size - 1;
    double first[EPOCHS], end[EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(sc_epoch_begin(ld, (uint64_t)e, NULL), SC_OK);
        sc_batch b;
        int rc, k = 0;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
            if (k++ == 0)
                first[e] = now();
            usleep(slow ? 16000 : 4000); /* a gap an oversubscribed CI's jitter stays inside */
            sc_batch_release(ld, &b);
        }
        assert_int_equal(rc, SC_END_OF_EPOCH);
        end[e] = now();
    }
    double slow_end[EPOCHS], fast_first[EPOCHS];
    double mine_end[EPOCHS], mine_first[EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        mine_end[e] = slow ? end[e] : 0;
        mine_first[e] = slow ? 0 : first[e]; /* the latest fast rank counts */
    }
    MPI_Allreduce(mine_end, slow_end, EPOCHS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(mine_first, fast_first, EPOCHS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int e = 0; e + 1 < EPOCHS; e++)
        if (!(fast_first[e + 1] < slow_end[e]))
            fail_msg("epoch %d: the fast ranks' first batch came %.1f ms after the slow "
                     "rank finished epoch %d",
                     e + 1, 1e3 * (fast_first[e + 1] - slow_end[e]), e);
    for (int e = 0; e < EPOCHS; e++) {
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, (uint64_t)e, &rep), SC_OK);
        assert_true(rep.exactly_once.ok);
    }
    assert_int_equal(sc_loader_close(ld), SC_OK);
}

static void test_close_mid_epoch(void **state)
{
    (void)state;
    sc_config c = config(src);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    /* Everyone mid-epoch, holding a batch. */
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    sc_batch b, held;
    assert_int_equal(sc_batch_next(ld, &held), SC_OK);
    assert_int_equal(sc_batch_next(ld, &b), SC_OK);
    sc_batch_release(ld, &b);
    assert_int_equal(sc_loader_close(ld), SC_OK);

    /* Rank 0 stops in epoch 0 while the others go on: they learn it, nobody hangs. */
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    if (rank == 0) {
        assert_int_equal(sc_batch_next(ld, &b), SC_OK);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        return;
    }
    int rc = SC_OK;
    for (uint64_t e = 0; rc == SC_OK; e++) {
        if (e > 0 && (rc = sc_epoch_begin(ld, e, NULL)) != SC_OK)
            break;
        while ((rc = sc_batch_next(ld, &b)) == SC_OK)
            sc_batch_release(ld, &b);
        assert_int_equal(rc, SC_END_OF_EPOCH);
        rc = SC_OK;
        assert_true(e < 2);
    }
    assert_int_equal(rc, SC_EPLAN);
    /* How far rank 0 went, not which broadcast said so (it named epoch 2). */
    assert_non_null(strstr(sc_loader_last_error(ld), "rank 0 closed its loader after beginning "
                                                     "epoch 0, its last"));
    assert_int_equal(sc_loader_close(ld), SC_EPLAN);
}

/* This process's threads under SCHED_BATCH, and whether the calling one is. */
static int batch_threads(int *caller)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *t;
    int n = 0;
    assert_non_null(d);
    while ((t = readdir(d)))
        if (t->d_name[0] != '.')
            n += sched_getscheduler((pid_t)atoi(t->d_name)) == SCHED_BATCH;
    closedir(d);
    *caller = sched_getscheduler(0) == SCHED_BATCH;
    return n;
}

/* A thread of its own tries SCHED_BATCH: where a sandbox refuses it, the loader only logs. */
static void *batch_probe(void *arg)
{
    struct sched_param sp = {0};
    *(int *)arg = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    return NULL;
}

/*
 * The producers and the cache writer yield the CPU to the training thread:
 * each runs under SCHED_BATCH (a release's wake-up never preempts the
 * caller), and the caller's own policy is left as it was.
 */
static void test_producers_yield_to_the_caller(void **state)
{
    (void)state;
    pthread_t probe;
    int refused = -1;
    assert_int_equal(pthread_create(&probe, NULL, batch_probe, &refused), 0);
    pthread_join(probe, NULL);
    MPI_Allreduce(MPI_IN_PLACE, &refused, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (refused) /* every rank skips, or none: the loader's open is collective */
        skip();
    sc_config c = config(src);
    c.producers = 3;
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    int caller, before = batch_threads(&caller), during = before;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    sc_batch b;
    assert_int_equal(sc_batch_next(ld, &b), SC_OK);
    int threads = c.producers + 1; /* and the cache writer */
    /* One producer may build the first batch before the last has started. */
    for (int ms = 0; ms < 10000 && during - before < threads; ms += 10) {
        usleep(10000);
        during = batch_threads(&caller);
    }
    sc_batch_release(ld, &b);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    if (during - before != threads || caller)
        fail_msg("rank %d: %d of the loader's %d threads (producers, cache writer) under "
                 "SCHED_BATCH; the caller %s", rank, during - before, threads,
                 caller ? "too" : "not");
}

static void test_source_error_stops_the_loader(void **state)
{
    (void)state;
    sc_config c = config(srcb);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    char gone[1400];
    snprintf(gone, sizeof gone, "%s/part%03d.h5", srcb, NSHARDS / 2);
    char keep[1500];
    snprintf(keep, sizeof keep, "%s.moved", gone);
    if (rank == 0)
        assert_int_equal(rename(gone, keep), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK)
        sc_batch_release(ld, &b);
    int failed = rc != SC_END_OF_EPOCH, nfailed = 0;
    if (failed) {
        assert_true(rc == SC_EHDF5 || rc == SC_EIO);
        /* Named: the file, and the epoch whose read failed (0, or 1 when
         * this rank was prefetching the shard for its next epoch). */
        const char *msg = sc_loader_last_error(ld);
        assert_non_null(strstr(msg, gone));
        if (!strstr(msg, "epoch 0") && !strstr(msg, "epoch 1"))
            fail_msg("no epoch named: %s", msg);
        assert_int_equal(sc_batch_next(ld, &b), rc); /* it stays stopped */
        assert_int_equal(sc_epoch_begin(ld, 1, NULL), rc);
        /* Misuse after the stop is refused, but never replaces why it stopped. */
        char first[SC_ERROR_MSG_MAX];
        snprintf(first, sizeof first, "%s", msg);
        sc_batch foreign = {0};
        foreign.seq = 12345;
        assert_int_not_equal(sc_batch_release(ld, &foreign), SC_OK);
        sc_epoch_summary none;
        assert_int_not_equal(sc_epoch_report(ld, 999, &none), SC_OK);
        assert_int_equal(sc_batch_next(ld, &b), rc);
        assert_string_equal(sc_loader_last_error(ld), first);
    }
    MPI_Allreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    assert_true(nfailed >= 1 && nfailed <= 2); /* its owners in epochs 0 and 1 */
    sc_epoch_summary rep;
    if (!failed) {
        /* The failing rank abandoned its epoch: nobody's verdict is ok. */
        assert_int_equal(sc_epoch_wait(ld, 0, &rep), SC_OK);
        assert_true(rep.exactly_once.verified);
        assert_false(rep.exactly_once.ok);
        assert_non_null(strstr(rep.exactly_once.detail, "abandoned"));
    }
    int closed = sc_loader_close(ld); /* the first fatal error, whatever came after */
    assert_int_equal(closed, failed ? rc : SC_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        assert_int_equal(rename(keep, gone), 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * One job with a fault on the last rank in epoch 1.  Ranks stop together
 * after an epoch in which any failed (as a job would abort).  Returns what
 * was seen: the job's errors (any rank) and the verdict on epoch 1.
 */
typedef struct seen {
    int code;           /* worst status any rank saw (0 if none) */
    char msg[512];      /* the message of a rank that saw it */
    int verdict_ok;     /* epoch 1, where known */
    uint64_t dup, skip; /* epoch 1 */
} seen;

static seen run_fault(const char *name, sc_shuffle_mode mode)
{
    sc__fault_set(name);
    sc_config c = config(src);
    c.mode = mode;
    c.exchange = 0.5;
    c.verify = SC_VERIFY_FULL;
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    int rc = SC_OK;
    uint64_t e = 0;
    for (; e < 3; e++) {
        rc = sc_epoch_begin(ld, e, NULL);
        sc_batch b;
        while (rc == SC_OK && (rc = sc_batch_next(ld, &b)) == SC_OK)
            sc_batch_release(ld, &b);
        if (rc == SC_END_OF_EPOCH)
            rc = SC_OK;
        if (sc_t_any(rc != SC_OK))
            break;
    }
    seen s = {0, "", 1, 0, 0};
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    s.code = worst;
    int who = rc == worst && rc != SC_OK ? rank : size, from = size;
    MPI_Allreduce(&who, &from, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == from)
        snprintf(s.msg, sizeof s.msg, "%s", sc_loader_last_error(ld));
    if (from < size)
        MPI_Bcast(s.msg, sizeof s.msg, MPI_CHAR, from, MPI_COMM_WORLD);
    /* Epoch 1's verdict, from a rank that ended it without an error. */
    int have = 0, ok = 1;
    uint64_t dup = 0, skip = 0;
    sc_epoch_summary rep;
    if (rc == SC_OK && e >= 1 && sc_epoch_wait(ld, 1, &rep) == SC_OK) {
        have = 1;
        ok = rep.exactly_once.ok;
        dup = rep.exactly_once.duplicated;
        skip = rep.exactly_once.skipped;
    }
    int all_ok = have ? ok : 1;
    MPI_Allreduce(&all_ok, &s.verdict_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&dup, &s.dup, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&skip, &s.skip, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    sc_loader_close(ld);
    sc__fault_set(NULL);
    return s;
}

static void test_faults_are_caught(void **state)
{
    (void)state;
    sc_features f;
    sc_features_get(&f);
    if (!f.testing)
        skip(); /* the hooks exist only with SC_TESTING */
    seen s = run_fault("dup-shard", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_OK);
    assert_false(s.verdict_ok);
    assert_true(s.dup >= SHARD - 5);

    s = run_fault("skip-shard", SC_SHUFFLE_STICKY);
    assert_int_equal(s.code, SC_OK);
    assert_false(s.verdict_ok);
    assert_true(s.skip >= SHARD - 5);

    /* An MPI error on the loader's communicator is a status, not MPI's abort. */
    s = run_fault("mpi-error", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_EMPI);
    if (!strstr(s.msg, "MPI_Send") || !strstr(s.msg, "MPI_ERR_COUNT"))
        fail_msg("MPI error not named: %s", s.msg);

    s = run_fault("world", SC_SHUFFLE_STICKY);
    assert_int_equal(s.code, SC_EPLAN);
    /* Named by a receiving rank, or by rank 0 when it is the one (at -n 1). */
    if (!strstr(s.msg, "configured for") && !strstr(s.msg, "on 2"))
        fail_msg("world fault not named: %s", s.msg);

    /*
     * With one rank there is nobody to disagree with (rank 0's plan is the
     * plan) and every plan gives it everything: these are no faults there.
     */
    if (size < 2)
        return;
    s = run_fault("plan-seed", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_EPLAN);
    assert_non_null(strstr(s.msg, "seed"));

    s = run_fault("fingerprint", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_EPLAN);
    assert_non_null(strstr(s.msg, "fingerprint"));

    s = run_fault("own-plan", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_EOWNERSHIP);
    assert_non_null(strstr(s.msg, "owned by rank"));

    s = run_fault("stale-plan", SC_SHUFFLE_GLOBAL);
    assert_int_equal(s.code, SC_EOWNERSHIP);
    assert_non_null(strstr(s.msg, "epoch 1"));
}

/*
 * sc_loader_config: the settings the loader runs with, auto resolved
 * (SC_PREFETCH_BATCHES by the slot's bytes and the caller's floor), a
 * number given kept.
 */
static void test_config_as_resolved(void **state)
{
    (void)state;
    sc_config run, c = config(src);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    unsetenv("SC_PREFETCH_BATCHES");
    c.prefetch_batches = SC_PREFETCH_AUTO;
    const uint64_t want[][3] = {/* asked, least, got */
                                {SC_PREFETCH_AUTO, 0, SC_PREFETCH_AUTO_MAX},
                                {SC_PREFETCH_AUTO, 12, 12},
                                {2, 12, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        c.prefetch_batches = want[i][0];
        c.prefetch_least = want[i][1];
        SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
        assert_int_equal(sc_loader_config(ld, &run), SC_OK);
        assert_int_equal(run.prefetch_batches, want[i][2]);
        assert_true(run.producers >= 1 && run.shuffle_window != SC_WINDOW_AUTO);
        assert_int_equal(sc_loader_config(ld, NULL), SC_EINVAL);
        assert_int_equal(sc_loader_close(ld), SC_OK);
    }
    assert_int_equal(sc_loader_config(NULL, &run), SC_EINVAL);
    /* Refused by name before the dataset opens, not by the stream after it. */
    c.prefetch_batches = 0;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "SC_PREFETCH_BATCHES=0"));
    assert_null(ld);
    c.prefetch_batches = SC_PREFETCH_AUTO;
    c.producers = -1;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "SC_PRODUCERS=-1"));
}

static void test_misuse_is_an_error(void **state)
{
    (void)state;
    sc_config c = config(src);
    c.prefetch_batches = 2;
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, NULL, &ld, &err), SC_EINVAL);
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_batch b[3];
    assert_int_equal(sc_batch_next(ld, &b[0]), SC_EINVAL);
    assert_non_null(strstr(sc_loader_last_error(ld), "before sc_epoch_begin"));
    assert_int_equal(sc_epoch_begin(ld, 3, NULL), SC_OK); /* any first epoch */
    assert_int_equal(sc_epoch_begin(ld, 5, NULL), SC_EINVAL);
    assert_int_equal(sc_batch_next(ld, &b[0]), SC_OK);
    assert_int_equal(sc_batch_next(ld, &b[1]), SC_OK);
    assert_int_equal(sc_batch_next(ld, &b[2]), SC_EINVAL); /* both buffers held */
    assert_non_null(strstr(sc_loader_last_error(ld), "SC_PREFETCH_BATCHES"));
    assert_int_equal(sc_batch_release(ld, &b[0]), SC_OK);
    assert_int_equal(sc_batch_release(ld, &b[0]), SC_EINVAL);
    assert_int_equal(sc_batch_release(ld, &b[1]), SC_OK);
    assert_int_equal(sc_epoch_begin(ld, 4, NULL), SC_EINVAL); /* epoch 3 not done */
    sc_epoch_summary rep;
    assert_int_equal(sc_epoch_wait(ld, 3, &rep), SC_EINVAL); /* still running */
    assert_int_equal(sc_epoch_report(ld, 3, &rep), SC_OK);
    assert_false(rep.exactly_once.verified);
    assert_int_equal(rep.batches, 2);
    assert_int_equal(sc_epoch_report(ld, 9, &rep), SC_EINVAL);
    assert_int_equal(sc_batch_next(NULL, &b[0]), SC_EINVAL);
    assert_int_equal(sc_loader_close(ld), SC_OK);

    /*
     * Released out of order: batch 0 kept while every later one comes and
     * goes.  Its slot is not reused (its ids and bytes stay as delivered),
     * the others cycle through the free slots, and the epoch ends
     * exactly-once.  (Slots were reused in ring order: batch 4 needed batch
     * 0's buffer and the epoch could not go on while batch 0 was kept.)
     */
    c.prefetch_batches = 4;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 0, &info), SC_OK);
    assert_true(info.batches > c.prefetch_batches); /* so that a slot must be reused */
    assert_int_equal(sc_batch_next(ld, &b[0]), SC_OK); /* kept */
    uint64_t kept_ids[64];
    assert_true(b[0].size <= 64);
    memcpy(kept_ids, b[0].ids, b[0].size * sizeof *kept_ids);
    unsigned char *kept = malloc(b[0].bytes[0]);
    assert_non_null(kept);
    memcpy(kept, b[0].data[0], b[0].bytes[0]);
    int rc, taken = 1;
    while ((rc = sc_batch_next(ld, &b[1])) == SC_OK) {
        taken++;
        assert_ptr_not_equal(b[1].data[0], b[0].data[0]);
        assert_int_equal(sc_batch_release(ld, &b[1]), SC_OK);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(taken, info.batches);
    assert_memory_equal(b[0].ids, kept_ids, b[0].size * sizeof *kept_ids);
    assert_memory_equal(b[0].data[0], kept, b[0].bytes[0]);
    free(kept);
    assert_int_equal(sc_batch_release(ld, &b[0]), SC_OK);
    sc_epoch_summary done;
    assert_int_equal(sc_epoch_wait(ld, 0, &done), SC_OK);
    assert_true(done.exactly_once.ok);
    assert_int_equal(done.batches, info.batches);
    assert_int_equal(sc_loader_close(ld), SC_OK);

    /*
     * Detached: the batch keeps its memory past the loader's close (the
     * Python package detaches what tensors still hold at close); the ring
     * goes on with new memory in that slot.
     */
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_epoch_begin(ld, 0, &info), SC_OK);
    assert_int_equal(sc_batch_next(ld, &b[0]), SC_OK);
    kept = malloc(b[0].bytes[0]);
    assert_non_null(kept);
    memcpy(kept, b[0].data[0], b[0].bytes[0]);
    memcpy(kept_ids, b[0].ids, b[0].size * sizeof *kept_ids);
    assert_int_equal(sc_batch_free(&b[0]), SC_EINVAL); /* not detached */
    assert_int_equal(sc_batch_detach(ld, &b[0]), SC_OK);
    assert_int_equal(sc_batch_detach(ld, &b[0]), SC_EINVAL);
    assert_int_equal(sc_batch_release(ld, &b[0]), SC_EINVAL); /* the loader's no more */
    while ((rc = sc_batch_next(ld, &b[1])) == SC_OK)
        assert_int_equal(sc_batch_release(ld, &b[1]), SC_OK);
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    assert_memory_equal(b[0].data[0], kept, b[0].bytes[0]);
    assert_memory_equal(b[0].ids, kept_ids, b[0].size * sizeof *kept_ids);
    assert_int_equal(sc_batch_free(&b[0]), SC_OK);
    free(kept);

    snprintf(c.source, sizeof c.source, "%s/missing.h5", dir);
    c.device = SC_DEVICE_HOST;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EIO);
    assert_non_null(strstr(err.msg, "missing.h5"));
    /* With no err, the same reason goes to stderr, prefixed by the rank. */
    char said[SC_ERROR_MSG_MAX + 64] = {0}, want[64];
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(f), 2);
    rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    assert_non_null(fgets(said, sizeof said, f));
    fclose(f);
    assert_int_equal(rc, SC_EIO);
    assert_null(ld);
    snprintf(want, sizeof want, "shardcache[rank %d]: SC_EIO: ", rank);
    assert_true(strncmp(said, want, strlen(want)) == 0);
    assert_non_null(strstr(said, "missing.h5"));
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "loader");
    make_sources();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epochs_are_exactly_once),
        cmocka_unit_test(test_order_is_deterministic),
        cmocka_unit_test(test_corrupt_cache_entries_are_not_served),
        cmocka_unit_test(test_traced_epochs),
        cmocka_unit_test(test_last_epoch_reads_nothing_ahead),
        cmocka_unit_test(test_straggler_does_not_delay_others),
        cmocka_unit_test(test_probes_only_where_claims_wait),
        cmocka_unit_test(test_one_ranks_audit_failure_is_everyones),
        cmocka_unit_test(test_close_mid_epoch),
        cmocka_unit_test(test_producers_yield_to_the_caller),
        cmocka_unit_test(test_source_error_stops_the_loader),
        cmocka_unit_test(test_faults_are_caught),
        cmocka_unit_test(test_config_as_resolved),
        cmocka_unit_test(test_misuse_is_an_error),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
