/*
 * Small datasets on 1 to 8 ranks (mpiexec -n 1, 2, 4 and 8): with the
 * default SC_SHARD_SIZE=auto a 1,000-sample set has hundreds of shards and
 * runs on any of these world sizes; every conflict between the data, the
 * world size and the settings (more ranks than shards, too few samples for
 * a batch a rank with remainder=drop) is refused by sc_loader_open, on
 * every rank, with words naming the sizes, never at an epoch's begin; and
 * what opens runs its epochs exactly once, dropping or repeating fewer
 * than one global batch (R x B samples) an epoch.  Randomized within a few
 * seconds: SC_TEST_SEED picks the cases, the failing case prints it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sc_h5test.h"
#include "sc_test.h"
#include "synth.h"

static int rank, size;
static char dir[1024];

enum { W = 3, SAMPLE_BYTES = W * 4 + 8 }; /* /x int32[3], /y int64 */

/* dir/n<N>.h5, written once by rank 0: samples 0..n-1 that check themselves. */
static void source_of(uint64_t n, char *path, size_t len)
{
    snprintf(path, len, "%s/n%llu.h5", dir, (unsigned long long)n);
    struct stat st;
    int have = rank != 0 || stat(path, &st) == 0;
    if (!have)
        assert_int_equal(sc_t_write_samples(path, 0, n, W), 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * The remainder is cut at sample granularity: b = floor (drop) or ceil
 * (pad) of n / (R x B) batches a rank, and drop leaves out, pad repeats,
 * exactly the difference to b global batches: fewer than one, R x B.
 * (Whole shards left up to a shard a rank over or under.)
 */
static void run_epoch_remainder(const sc_config *cfg, uint64_t n, uint64_t b,
                                const sc_exactly_once *eo, const char *what)
{
    uint64_t G = (uint64_t)size * cfg->batch_size, all = b * G;
    int drop = cfg->remainder == SC_REMAINDER_DROP;
    uint64_t want_b = drop ? n / G : (n + G - 1) / G;
    if (b != want_b || eo->dropped != (drop ? n - all : 0) ||
        eo->padded != (drop ? 0 : all - n) || eo->dropped >= G || eo->padded >= G)
        fail_msg("%s: %llu batches a rank, %llu dropped, %llu padded; %llu samples on %d "
                 "ranks in batches of %llu with remainder=%s want %llu batches and fewer "
                 "than %llu %s", what, (unsigned long long)b,
                 (unsigned long long)eo->dropped, (unsigned long long)eo->padded,
                 (unsigned long long)n, size, (unsigned long long)cfg->batch_size,
                 drop ? "drop" : "pad", (unsigned long long)want_b, (unsigned long long)G,
                 drop ? "dropped" : "padded");
}

/* Epoch e to its end on every rank: the data, equal batches, the job's verdict. */
static void run_epoch(sc_loader *ld, const sc_config *cfg, uint64_t n, uint64_t e,
                      const char *what)
{
    sc_epoch_info info;
    sc_batch b;
    int rc = sc_epoch_begin(ld, e, &info);
    if (rc != SC_OK)
        fail_msg("%s: epoch %llu did not begin: %s", what, (unsigned long long)e,
                 sc_loader_last_error(ld));
    uint64_t got = 0, lo, hi;
    char why[256];
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        assert_int_equal(b.size, cfg->batch_size);
        if (!sc_t_samples_ok(&b, W, n, why, sizeof why))
            fail_msg("%s: %s", what, why);
        got++;
        assert_int_equal(sc_batch_release(ld, &b), SC_OK);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(got, info.batches);
    MPI_Allreduce(&got, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&got, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    assert_int_equal(lo, hi);
    sc_epoch_summary rep;
    assert_int_equal(sc_epoch_wait(ld, e, &rep), SC_OK);
    if (!rep.exactly_once.verified || !rep.exactly_once.ok)
        fail_msg("%s: epoch %llu: %s", what, (unsigned long long)e, rep.exactly_once.detail);
    assert_int_equal(rep.exactly_once.delivered + rep.exactly_once.dropped, n);
    run_epoch_remainder(cfg, n, info.batches, &rep.exactly_once, what);
}

/*
 * The case: 1,000 samples on this world size with every default
 * but the cache directory: auto cuts 334 shards of 3, and two epochs run
 * (before, 1,024-sample shards made one, and epoch 0 refused 2 ranks).
 */
static void test_thousand_samples_default_size(void **state)
{
    (void)state;
    char src[1200];
    source_of(1000, src, sizeof src);
    sc_config cfg = sc_t_config(src, dir, 0, 32, 5), dflt;
    sc_config_init(&dflt, NULL);
    cfg.shard_size = dflt.shard_size; /* the default's, whatever it is */
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, &err), &err);
    sc_dataset_info di;
    sc_dataset_get_info(sc_loader_dataset(ld), &di);
    assert_int_equal(di.shard_size, sc_shard_size_auto(1000, SAMPLE_BYTES));
    assert_int_equal(di.shard_size, 3);
    assert_int_equal(di.nshards, 334);
    for (uint64_t e = 0; e < 2; e++)
        run_epoch(ld, &cfg, 1000, e, "1000 samples, auto");
    assert_int_equal(sc_loader_close(ld), SC_OK);
}

/* What the open must say for n samples in shards of s on R ranks, batch B; NULL: it opens. */
static const char *verdict_of(uint64_t n, uint64_t s, uint64_t R, uint64_t B, int drop,
                              char *words, size_t len)
{
    uint64_t shards = (n + s - 1) / s;
    if (R > shards) {
        snprintf(words, len, "more ranks (%llu) than shards (%llu)", (unsigned long long)R,
                 (unsigned long long)shards);
        return words;
    }
    if (drop && n < R * B) { /* one global batch is enough, whatever the shards */
        snprintf(words, len, "%llu samples cannot give each of %llu ranks a batch of %llu "
                 "with remainder=drop: that takes %llu samples", (unsigned long long)n,
                 (unsigned long long)R, (unsigned long long)B, (unsigned long long)(R * B));
        return words;
    }
    return NULL;
}

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/*
 * Random sets of 1..1,000 samples, batch sizes, remainders, modes and
 * shard sizes (mostly auto): the open refuses exactly the impossible ones
 * on every rank, naming the sizes, or two epochs run exactly once.
 */
static void test_random_small_sets(void **state)
{
    (void)state;
    const char *env = getenv("SC_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : 20350;
    uint64_t x = seed * 2654435761u + 1 + (uint64_t)size;
    int refused = 0, opened = 0;
    for (int c = 0; c < 14; c++) {
        uint64_t n = 1 + next(&x) % (next(&x) % 2 ? 1000 : 40);
        uint64_t B = 1 + next(&x) % (next(&x) % 2 ? 64 : 8);
        int drop = next(&x) % 3 != 0, sticky = next(&x) % 2;
        uint64_t s = next(&x) % 4 ? sc_shard_size_auto(n, SAMPLE_BYTES) : 1 + next(&x) % 300;
        int autos = s == sc_shard_size_auto(n, SAMPLE_BYTES);
        char src[1200], what[256], words[256];
        source_of(n, src, sizeof src);
        snprintf(what, sizeof what, "SC_TEST_SEED=%llu case %d: %llu samples, shards of %llu, "
                 "%d ranks, batch %llu, %s, %s", (unsigned long long)seed, c,
                 (unsigned long long)n, (unsigned long long)s, size, (unsigned long long)B,
                 drop ? "drop" : "pad", sticky ? "sticky" : "global");
        sc_config cfg = sc_t_config(src, dir, autos ? SC_SHARD_AUTO : s, B, c);
        cfg.remainder = drop ? SC_REMAINDER_DROP : SC_REMAINDER_PAD;
        cfg.mode = sticky ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
        const char *want = verdict_of(n, s, (uint64_t)size, B, drop, words, sizeof words);
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        int rc = sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, &err);
        if (want) { /* refused here, on every rank, in words naming the sizes */
            if (rc != SC_EINVAL || !strstr(err.msg, want))
                fail_msg("%s: open gave %s '%s', want SC_EINVAL naming '%s'", what,
                         sc_status_name(rc), err.msg, want);
            assert_null(ld);
            refused++;
            continue;
        }
        if (rc != SC_OK)
            fail_msg("%s: open refused: %s", what, err.msg);
        for (uint64_t e = 0; e < 2; e++)
            run_epoch(ld, &cfg, n, e, what);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        opened++;
    }
    if (rank == 0)
        printf("seed %llu on %d ranks: %d sets opened and ran, %d refused at open\n",
               (unsigned long long)seed, size, opened, refused);
}

/*
 * Layout B groups runs of files by the same rule: 600 one-sample files are
 * 300 shards of 2 (auto's size for 600 samples), whatever the world size.
 */
static void test_layout_b_groups_by_the_rule(void **state)
{
    (void)state;
    char files[1200];
    snprintf(files, sizeof files, "%s/b", dir);
    if (rank == 0) {
        sc__synth_params sp = SC__SYNTH_PARAMS_INIT;
        sp.out = files, sp.layout = 'B', sp.samples = 600, sp.shard_size = 1;
        sp.ndims = 1, sp.dims[0] = 4;
        sc_error err;
        SC_ASSERT_OK(sc__dataset_make(&sp, NULL, NULL, &err), &err);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sc_config cfg = sc_t_config(files, dir, SC_SHARD_AUTO, 4, 1);
    sc_dataset *ds = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err), &err);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    assert_int_equal(di.nfiles, 600);
    assert_int_equal(di.shard_size, sc_shard_size_auto(600, di.sample_bytes));
    assert_int_equal(di.shard_size, 2);
    assert_int_equal(di.nshards, 300);
    sc_dataset_close(ds);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "small");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thousand_samples_default_size),
        cmocka_unit_test(test_random_small_sets),
        cmocka_unit_test(test_layout_b_groups_by_the_rule),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
