/* sc_config: defaults, SC_* environment, refusals naming the variable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sc_test.h"

static void test_defaults_and_env(void **state)
{
    (void)state;
    sc_config c;
    sc_error err;
    unsetenv("SC_SEED");
    unsetenv("SC_CACHE_BYTES");
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    assert_true(c.shard_size == SC_SHARD_AUTO); /* from the dataset, at open */
    assert_int_equal(c.mode, SC_SHUFFLE_STICKY);
    assert_int_equal(c.cache_policy, SC_CACHE_BELADY);
    assert_true(c.cache_bytes == SC_CACHE_AUTO); /* bounded by the free space's rule */
    /* Batches land where a CPU loop can read them unless the caller asks for a GPU. */
    assert_int_equal(c.device, SC_DEVICE_HOST);

    setenv("SC_SEED", "42", 1);
    setenv("SC_CACHE_BYTES", "3G", 1);
    setenv("SC_SHUFFLE", "global", 1);
    setenv("SC_EXCHANGE", "0.25", 1);
    setenv("SC_CACHE_DIR", "/scratch/x", 1);
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    assert_int_equal(c.seed, 42);
    assert_int_equal(c.cache_bytes, UINT64_C(3) << 30);
    assert_int_equal(c.mode, SC_SHUFFLE_GLOBAL);
    assert_true(c.exchange == 0.25);
    assert_string_equal(c.cache_dir, "/scratch/x");

    SC_ASSERT_OK(sc_config_set(&c, "SC_CACHE_BYTES", "512MiB", &err), &err);
    assert_int_equal(c.cache_bytes, UINT64_C(512) << 20);
    SC_ASSERT_OK(sc_config_set(&c, "SC_CACHE_BYTES", "64k", &err), &err);
    assert_int_equal(c.cache_bytes, 64 << 10);
    /* The old default, unbounded, said in either way; and the new one by name. */
    SC_ASSERT_OK(sc_config_set(&c, "SC_CACHE_BYTES", "unbounded", &err), &err);
    assert_int_equal(c.cache_bytes, 0);
    SC_ASSERT_OK(sc_config_set(&c, "SC_CACHE_BYTES", "auto", &err), &err);
    assert_true(c.cache_bytes == SC_CACHE_AUTO);
    SC_ASSERT_OK(sc_config_set(&c, "SC_CACHE_BYTES", "0", &err), &err);
    assert_int_equal(c.cache_bytes, 0);
    unsetenv("SC_SHUFFLE");
    unsetenv("SC_EXCHANGE");
    unsetenv("SC_CACHE_DIR");
    unsetenv("SC_SEED");
    unsetenv("SC_CACHE_BYTES");
}

static void test_bad_values_are_errors(void **state)
{
    (void)state;
    sc_config c;
    sc_error err;
    static const char *bad[][3] = {
        {"SC_SEED", "12x", "SC_SEED='12x'"},
        {"SC_SEED", "-3", "SC_SEED='-3'"},
        {"SC_SEED", " -1", "SC_SEED=' -1'"}, /* strtoull: 2^64-1 */
        {"SC_EPOCHS", " 3", "SC_EPOCHS=' 3'"}, /* as '3 ' is */
        {"SC_EPOCHS", "3 ", "SC_EPOCHS='3 '"},
        {"SC_BATCH_SIZE", "+4", "SC_BATCH_SIZE='+4'"},
        {"SC_EXCHANGE", " 0.5", "SC_EXCHANGE=' 0.5'"},
        {"SC_CACHE_BYTES", "3Q", "SC_CACHE_BYTES='3Q'"},
        {"SC_EXCHANGE", "1.5", "SC_EXCHANGE='1.5'"},
        {"SC_SHUFFLE", "random", "choose one of global, sticky"},
        {"SC_CACHE_POLICY", "fifo", "choose one of belady, lru"},
        {"SC_DEVICE", "tpu", "choose one of auto, host, cuda"},
        {"SC_VERIFY", "some", "choose one of sketch, full"},
        {"SC_PRODUCERS", "two", "SC_PRODUCERS='two'"},
        {"SC_STREAM_BYTES", "1T5", "SC_STREAM_BYTES='1T5'"},
        {"SC_SHUFFLE_WINDOW", "big", "integer below 2^64-1 or auto"},
        {"SC_SHUFFLE_WINDOW", "18446744073709551615", "below 2^64-1 or auto"},
        {"SC_SHARD_SIZE", "big", "integer below 2^64-1 or auto"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        SC_ASSERT_RC(sc_config_init(&c, &err), SC_EINVAL, &err);
        assert_non_null(strstr(err.msg, bad[i][2]));
        assert_non_null(strstr(err.msg, "in the environment"));
        unsetenv(bad[i][0]);
    }
    /* A misspelt setting in the environment is refused, named with the one it missed. */
    static const char *typo[][2] = {{"SC_BATCHSIZE", "SC_BATCH_SIZE"},
                                    {"SC_SHUFFEL", "SC_SHUFFLE"},
                                    {"SC_EPOCH", "SC_EPOCHS"},
                                    {"SC_CACHE_DIRS", "SC_CACHE_DIR"},
                                    {"SC_SEEDS", "SC_SEED"}}; /* not SC_PEERS, two edits */
    for (size_t i = 0; i < sizeof typo / sizeof typo[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "unknown setting %s in the environment (did you mean %s?)",
                 typo[i][0], typo[i][1]);
        setenv(typo[i][0], "64", 1);
        SC_ASSERT_RC(sc_config_init(&c, &err), SC_EINVAL, &err);
        assert_string_equal(err.msg, want);
        unsetenv(typo[i][0]);
    }
    setenv("SC_COLOUR", "red", 1); /* far from every setting: a script's own */
    setenv("SC_TRAIN", "1", 1);    /* two edits from SC_TRACE: a name of its own */
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    unsetenv("SC_COLOUR");
    unsetenv("SC_TRAIN");
    SC_ASSERT_RC(sc_config_set(&c, "SC_NOPE", "1", &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "unknown setting SC_NOPE"));
    char longpath[SC_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = '\0';
    SC_ASSERT_RC(sc_config_set(&c, "SC_SOURCE", longpath, &err), SC_EINVAL, &err);
    assert_int_equal(sc_config_init(NULL, NULL), SC_EINVAL);
}

/*
 * SC_PREFETCH_BATCHES=auto: 8 slots, fewer where 8 would take more than
 * 1 GiB, never fewer than 3 (the batch in the step, the next one built
 * meanwhile, and a Python loop variable's) nor than the caller's floor; a
 * number given is kept, however large its slots or the floor.
 */
static void test_prefetch_auto(void **state)
{
    (void)state;
    sc_config c;
    sc_error err;
    const uint64_t M = UINT64_C(1) << 20;
    unsetenv("SC_PREFETCH_BATCHES");
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    assert_true(c.prefetch_batches == SC_PREFETCH_AUTO);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 46 * M, 0), 8);  /* resnet50's 400 */
    assert_int_equal(sc__config_depth(c.prefetch_batches, 128 * M, 0), 8); /* 1 GiB exactly */
    assert_int_equal(sc__config_depth(c.prefetch_batches, 129 * M, 0), 7);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 256 * M, 0), 4);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 300 * M, 0), 3);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 979 * M, 0), 3); /* unet3d's 7 */
    assert_int_equal(sc__config_depth(c.prefetch_batches, 8192 * M, 0), 3);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 0, 0), 8);
    /* what the caller holds, or the decoding producers: more slots, never fewer */
    assert_int_equal(sc__config_depth(c.prefetch_batches, 979 * M, 5), 5);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 46 * M, 5), 8);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 46 * M, 12), 12);
    for (uint64_t b = 1; b <= 4096 * M; b = b * 3 + 1) {
        uint64_t d = sc__config_depth(c.prefetch_batches, b, 0);
        assert_true(d >= 3 && d <= 8);
        assert_true(d == 3 || d * b <= SC_PREFETCH_AUTO_BYTES);
    }
    setenv("SC_PREFETCH_BATCHES", "12", 1);
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    assert_int_equal(sc__config_depth(c.prefetch_batches, 979 * M, 20), 12);
    SC_ASSERT_OK(sc_config_set(&c, "SC_PREFETCH_BATCHES", "auto", &err), &err);
    assert_true(c.prefetch_batches == SC_PREFETCH_AUTO);
    unsetenv("SC_PREFETCH_BATCHES");
}

/*
 * auto is what half of SC_STREAM_BYTES holds in whole shards, at least a
 * batch, for any sample size; a number is itself while it fits, else
 * lowered to that; partitions split it.
 */
static void test_shuffle_window(void **state)
{
    (void)state;
    sc_config c;
    sc_error err;
    const uint64_t M = UINT64_C(1) << 20;
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    assert_true(c.shuffle_window == SC_WINDOW_AUTO);
    SC_ASSERT_OK(sc_config_set(&c, "SC_STREAM_BYTES", "1M", &err), &err);
    /* one-sample shards: half the bound's samples */
    assert_int_equal(sc__config_window(&c, 100, 1, 1), M / 2 / 100);
    /* shards of 64: n shards hold (n - 1) 64 + 1 samples at any offset */
    uint64_t n = M / 2 / (64 * 100);
    assert_int_equal(sc__config_window(&c, 100, 64, 1), (n - 1) * 64 + 1);
    assert_true(sc__config_window_bytes((n - 1) * 64 + 1, 0, 100, 64) <= M / 2);
    assert_true(sc__config_window_bytes((n - 1) * 64 + 2, 0, 100, 64) > M / 2);
    /* large samples: no 4096 floor, down to one batch */
    for (uint64_t sb = 16; sb <= 8 * M; sb *= 4) {
        uint64_t w = sc__config_window(&c, sb, 4, 8);
        assert_true(w >= 8);
        if (w > 8)
            assert_true(sc__config_window_bytes(w, 0, sb, 4) <= M / 2);
    }
    assert_int_equal(sc__config_window(&c, UINT64_C(1) << 30, 1, 7), 7);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SHUFFLE_WINDOW", "777", &err), &err);
    assert_int_equal(sc__config_window(&c, 100, 1, 1), 777);
    assert_int_equal(sc__config_window(&c, 1000, 1, 1), M / 2 / 1000); /* lowered */
    assert_int_equal(sc__config_window(&c, 1 << 30, 1, 7), 7);
    /* partitions: each unit's window fits its share of the half */
    SC_ASSERT_OK(sc_config_set(&c, "SC_SHUFFLE_WINDOW", "auto", &err), &err);
    c.partitions = 4;
    uint64_t w = sc__config_window(&c, 100, 16, 1);
    assert_true(w % 4 == 0 && sc__config_window_bytes(w, 4, 100, 16) <= M / 2);
    assert_true(sc__config_window_bytes(w + 4, 4, 100, 16) > M / 2);
    c.partitions = 0;
    assert_true(c.shuffle_window == SC_WINDOW_AUTO);
    assert_int_equal(sc__config_window(NULL, 1, 1, 1), 0);
}

/* The bounds SC_SHARD_SIZE=auto promises for n samples of b bytes. */
static void check_auto(uint64_t n, uint64_t b)
{
    uint64_t s = sc_shard_size_auto(n, b), share = n / SC_SHARD_AUTO_SHARDS;
    uint64_t shards = n / s + (n % s != 0), want = n < 256 ? n : 256;
    int ok = s >= 1 && shards >= want &&                    /* at least min(n, 256) shards */
             (s == 1 || s * b <= SC_SHARD_AUTO_MAX_BYTES) && /* at most 64 MiB, or one sample */
             /* below the count's bound, never below 1024 samples and 1 MiB, unless 64 MiB stops it */
             (s == (share ? share : 1) || (s + 1) * b > SC_SHARD_AUTO_MAX_BYTES ||
              (s >= SC_SHARD_AUTO_SAMPLES && s * b >= SC_SHARD_AUTO_MIN_BYTES));
    if (!ok)
        print_error("n %llu, b %llu: shard size %llu (%llu shards) breaks a bound\n",
                    (unsigned long long)n, (unsigned long long)b, (unsigned long long)s,
                    (unsigned long long)shards);
    assert_true(ok);
}

/* The rule itself, then its bounds over many sizes; "auto" and numbers parse. */
static void test_shard_size_auto(void **state)
{
    (void)state;
    /* Small sets have a shard per sample up to 511, then at least 256 shards. */
    assert_int_equal(sc_shard_size_auto(0, 3076), 1);
    assert_int_equal(sc_shard_size_auto(1, 3076), 1);
    assert_int_equal(sc_shard_size_auto(615, 3076), 2);    /* 308 shards */
    assert_int_equal(sc_shard_size_auto(1000, 3076), 3);   /* 334 shards */
    assert_int_equal(sc_shard_size_auto(6000, 4096), 23);  /* 261 shards */
    /* Large sets: 1,024 samples between 1 MiB and 64 MiB a shard. */
    assert_int_equal(sc_shard_size_auto(1000000, 3076), 1024);
    assert_int_equal(sc_shard_size_auto(UINT64_C(1) << 30, 16), 65536);  /* 1 MiB */
    assert_int_equal(sc_shard_size_auto(10000000, 110000), 610);         /* 64 MiB */
    assert_int_equal(sc_shard_size_auto(1000, UINT64_C(100) << 20), 1);  /* one a shard */
    assert_int_equal(sc_shard_size_auto(UINT64_MAX, 0), 1 << 20);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t n = x >> (x % 64), b = 1 + ((x >> 11) >> ((x >> 3) % 64));
        check_auto(n, b % (UINT64_C(1) << 40));
        check_auto(x % 5000, 1 + x % 300000);
    }
    sc_config c;
    sc_error err;
    SC_ASSERT_OK(sc_config_init(&c, &err), &err);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SHARD_SIZE", "128", &err), &err);
    assert_int_equal(c.shard_size, 128);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SHARD_SIZE", "auto", &err), &err);
    assert_true(c.shard_size == SC_SHARD_AUTO);
}

static void test_print_lists_every_setting(void **state)
{
    (void)state;
    sc_config c;
    SC_ASSERT_OK(sc_config_init(&c, NULL), NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    SC_ASSERT_OK(sc_config_print(&c, f), NULL);
    fclose(f);
    static const char *names[] = {"SC_SOURCE=", "SC_SHARD_SIZE=auto", "SC_FIELDS=",
                                  "SC_SEED=0", "SC_BATCH_SIZE=32", "SC_SHUFFLE=sticky",
                                  "SC_EXCHANGE=0.1", "SC_REMAINDER=drop",
                                  "SC_CACHE_DIR=", "SC_CACHE_BYTES=auto",
                                  "SC_CACHE_POLICY=belady", "SC_CACHE_CHECK=first",
                                  "SC_LOG=1", "SC_SHUFFLE_WINDOW=auto"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_non_null(strstr(text, names[i]));
    free(text);
}

/*
 * auto's chunk unit: the compressed fields' chunk rows, the costliest
 * chunk first, joined while one unit of samples stays within 64 MiB.
 */
static void test_shard_chunk_unit(void **state)
{
    (void)state;
    const uint64_t none[2] = {0, 0}, same[2] = {64, 64}, two[2] = {100, 64};
    const uint64_t h5py[2] = {6250, 1563}, cost[2] = {50000, 100032}, tie[2] = {5, 5};
    assert_int_equal(sc__shard_chunk_unit(24, none, tie, 2), 0);    /* nothing compressed */
    assert_int_equal(sc__shard_chunk_unit(24, same, tie, 2), 64);
    assert_int_equal(sc__shard_chunk_unit(24, two, tie, 2), 1600);  /* both: their lcm */
    /* The lcm (9,768,750 samples of 72 bytes) is over 64 MiB: the costlier one alone. */
    assert_int_equal(sc__shard_chunk_unit(72, h5py, cost, 2), 1563);
    assert_int_equal(sc__shard_chunk_unit(72, h5py, tie, 2), 6250); /* a tie: the first */
    assert_int_equal(sc__shard_chunk_unit(UINT64_C(1) << 20, two + 1, tie, 1), 64); /* 64 MiB */
    /* A chunk of 1,000 samples of 1 MiB is over 64 MiB: the byte bound wins. */
    const uint64_t big[1] = {1000};
    assert_int_equal(sc__shard_chunk_unit(UINT64_C(1) << 20, big, tie, 1), 0);
    const uint64_t huge[2] = {UINT64_C(1) << 40, (UINT64_C(1) << 40) - 1};
    assert_int_equal(sc__shard_chunk_unit(1, huge, tie, 2), 0); /* no overflow */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_env),
        cmocka_unit_test(test_bad_values_are_errors),
        cmocka_unit_test(test_prefetch_auto),
        cmocka_unit_test(test_shuffle_window),
        cmocka_unit_test(test_shard_size_auto),
        cmocka_unit_test(test_shard_chunk_unit),
        cmocka_unit_test(test_print_lists_every_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
