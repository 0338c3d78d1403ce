/*
 * Transform once, augment every time (sc_transform), under mpiexec -n 1,
 * 2 and 4: delivered batches hold the transform's outputs; each shard is
 * transformed once on the node (later epochs and a second job read the
 * cache), a new transform version is a cold cache; a failing transform
 * names its shard and leaves nothing cached for it; augmentation is
 * deterministic (seed, epoch, sample), independent of the producer count,
 * and differs between epochs; a failing augmentation names its sample; a
 * bad declaration is refused at open; outputs declared at open from the
 * source's fields (sc_transform.outputs) are delivered, and key the cache,
 * as the same outputs set beforehand.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static char dir[1024], src[1200];
static int ncache;

enum { NSHARDS = 24, SHARD = 16, W = 4, NSAMPLES = NSHARDS * SHARD };

typedef struct tf_state {
    _Atomic long calls;   /* shard transforms run on this rank */
    uint64_t fail_shard;  /* transform fails for this shard (UINT64_MAX: never) */
    uint64_t fail_sample; /* augmentation fails for this sample */
    int refuse_outputs;   /* outputs() refuses the source */
} tf_state;

/* x (int32 [W]) -> xf (float32 [W]) = x / 2; y (int64) passes through. */
static int halve(void *arg, uint64_t shard, uint64_t first, uint64_t n, const void *const *in,
                 void *const *out, char *msg, size_t msglen)
{
    tf_state *st = arg;
    atomic_fetch_add(&st->calls, 1);
    if (shard == st->fail_shard) {
        snprintf(msg, msglen, "refusing shard %llu on purpose", (unsigned long long)shard);
        return 1;
    }
    const int32_t *x = in[0];
    float *xf = out[0];
    for (uint64_t i = 0; i < n * W; i++)
        xf[i] = (float)x[i] * 0.5f;
    memcpy(out[1], in[1], n * sizeof(int64_t));
    (void)first;
    return 0;
}

/* Adds a seed-dependent offset to every value: visible, and reproducible. */
static int jitter(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed, void *const *fields,
                  char *msg, size_t msglen)
{
    tf_state *st = arg;
    (void)epoch;
    if (sample == st->fail_sample) {
        snprintf(msg, msglen, "refusing sample %llu on purpose", (unsigned long long)sample);
        return 1;
    }
    float *xf = fields[0];
    for (int j = 0; j < W; j++)
        xf[j] += (float)(seed % 1000);
    return 0;
}

static sc_transform make_tf(tf_state *st, const char *version, int with_augment)
{
    sc_transform tf;
    memset(&tf, 0, sizeof tf);
    tf.name = "halve";
    tf.version = version;
    tf.nout = 2;
    snprintf(tf.out[0].name, sizeof tf.out[0].name, "/xf");
    snprintf(tf.out[0].dtype, sizeof tf.out[0].dtype, "float32");
    tf.out[0].ndims = 1;
    tf.out[0].dims[0] = W;
    snprintf(tf.out[1].name, sizeof tf.out[1].name, "/y");
    snprintf(tf.out[1].dtype, sizeof tf.out[1].dtype, "int64");
    tf.out[1].ndims = 0;
    tf.shard = halve;
    tf.augment = with_augment ? jitter : NULL;
    tf.arg = st;
    return tf;
}

/* Declares halve's outputs from the source's x (int32 [W]) and y, as make_tf sets them. */
static int halve_outputs(void *arg, const sc_field_info *in, int nin, sc_field_info *out,
                         int *nout, char *msg, size_t msglen)
{
    tf_state *st = arg;
    if (st->refuse_outputs || nin != 2 || strcmp(in[0].dtype, "int32") || in[0].ndims != 1 ||
        in[0].dims[0] != W || strcmp(in[1].dtype, "int64")) {
        snprintf(msg, msglen, "refusing %d fields on purpose", nin);
        return 1;
    }
    sc_transform set = make_tf(st, "1", 0);
    memcpy(out, set.out, (size_t)set.nout * sizeof *out);
    *nout = set.nout;
    return 0;
}

static sc_config config(const sc_transform *tf, const char *cache)
{
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", src);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/%s", dir, cache);
    c.shard_size = SHARD;
    c.batch_size = 8;
    c.seed = 77;
    c.mode = SC_SHUFFLE_STICKY;
    c.exchange = 0.5;
    c.device = SC_DEVICE_HOST;
    c.log_level = 0;
    c.transform = tf;
    return c;
}

/*
 * Runs `epochs` epochs; checks every value when not augmented; returns a
 * hash of the bytes delivered, in delivery order, and *status the first
 * error (SC_OK) with its message in msg.
 */
static uint64_t run(const sc_config *c, uint64_t epochs, int augmented, int *status, char *msg)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, c, &ld, &err), &err);
    sc_field_info f0;
    assert_int_equal(sc_dataset_field(sc_loader_dataset(ld), 0, &f0), SC_OK);
    assert_string_equal(f0.dtype, "float32");
    assert_int_equal(f0.sample_bytes, W * sizeof(float));
    uint64_t h = 0;
    int rc = SC_OK;
    for (uint64_t e = 0; e < epochs && rc == SC_OK; e++) {
        rc = sc_epoch_begin(ld, e, NULL);
        sc_batch b;
        while (rc == SC_OK && (rc = sc_batch_next(ld, &b)) == SC_OK) {
            const float *xf = b.data[0];
            const int64_t *y = b.data[1];
            for (uint64_t k = 0; k < b.size; k++) {
                assert_int_equal((uint64_t)y[k], b.ids[k]);
                for (int j = 0; j < W && !augmented; j++)
                    assert_true(xf[k * W + j] == (float)sc_t_xval(b.ids[k], j) * 0.5f);
                uint64_t bits;
                memcpy(&bits, &xf[k * W], sizeof bits);
                h = sc__mix64(h ^ bits ^ b.ids[k]);
            }
            sc_batch_release(ld, &b);
        }
        if (rc == SC_END_OF_EPOCH)
            rc = SC_OK;
        if (sc_t_any(rc != SC_OK))
            break;
    }
    *status = rc;
    snprintf(msg, 512, "%s", sc_loader_last_error(ld));
    sc_loader_close(ld);
    return h;
}

static long total_calls(tf_state *st)
{
    long mine = atomic_load(&st->calls), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    atomic_store(&st->calls, 0);
    return all;
}

/*
 * Every shard is transformed; a shard moved to another rank is read from
 * the node's caches, so at most a prefetch of the next epoch that beat its
 * first owner's cache write transforms it again (never with one rank:
 * nothing moves).
 */
static void assert_each_shard_transformed(long calls)
{
    assert_true(calls >= NSHARDS && calls <= 2 * NSHARDS);
    if (size == 1)
        assert_int_equal(calls, NSHARDS);
}

static void test_transform_once(void **state)
{
    (void)state;
    tf_state st = {0, UINT64_MAX, UINT64_MAX, 0};
    sc_transform tf = make_tf(&st, "1", 0);
    char cache[32], msg[512];
    snprintf(cache, sizeof cache, "c%d", ncache++);
    sc_config c = config(&tf, cache);
    int rc;
    run(&c, 3, 0, &rc, msg);
    assert_int_equal(rc, SC_OK);
    assert_each_shard_transformed(total_calls(&st));
    run(&c, 2, 0, &rc, msg); /* a second job: warm, no transform at all */
    assert_int_equal(rc, SC_OK);
    assert_int_equal(total_calls(&st), 0);
    sc_transform v2 = make_tf(&st, "2", 0); /* a new version is another cache */
    c.transform = &v2;
    run(&c, 1, 0, &rc, msg);
    assert_int_equal(rc, SC_OK);
    assert_each_shard_transformed(total_calls(&st));
}

static void test_failing_transform(void **state)
{
    (void)state;
    tf_state st = {0, 7, UINT64_MAX, 0};
    sc_transform tf = make_tf(&st, "1", 0);
    char cache[32], msg[512];
    snprintf(cache, sizeof cache, "c%d", ncache++);
    sc_config c = config(&tf, cache);
    int rc;
    run(&c, 2, 0, &rc, msg);
    if (rc != SC_OK) {
        assert_int_equal(rc, SC_ETRANSFORM);
        assert_non_null(strstr(msg, "shard 7"));
        assert_non_null(strstr(msg, "refusing shard 7 on purpose"));
    }
    assert_true(sc_t_any(rc != SC_OK)); /* at least one rank failed */
    /* Nothing half-transformed was cached for shard 7, on any rank. */
    if (rank == 0) {
        char cmd[2200];
        snprintf(cmd, sizeof cmd, "find '%s/%s' -name 's7.h5*' | grep -q .", dir, cache);
        assert_int_not_equal(system(cmd), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_augment_is_deterministic(void **state)
{
    (void)state;
    tf_state st = {0, UINT64_MAX, UINT64_MAX, 0};
    sc_transform tf = make_tf(&st, "1", 1);
    char cache[32], msg[512];
    int rc;
    snprintf(cache, sizeof cache, "c%d", ncache++);
    sc_config c = config(&tf, cache);
    c.producers = 3;
    uint64_t a = run(&c, 2, 1, &rc, msg);
    assert_int_equal(rc, SC_OK);
    c.producers = 1; /* another thread count, a warm cache: the same bytes */
    uint64_t b = run(&c, 2, 1, &rc, msg);
    assert_int_equal(rc, SC_OK);
    assert_int_equal(a, b);
    /* And they were augmented: without it the bytes differ. */
    sc_transform plain = make_tf(&st, "1", 0);
    c.transform = &plain;
    uint64_t p = run(&c, 2, 0, &rc, msg);
    assert_int_equal(rc, SC_OK);
    assert_int_not_equal(a, p);

    st.fail_sample = 5;
    c.transform = &tf;
    run(&c, 1, 1, &rc, msg);
    if (rc != SC_OK) {
        assert_int_equal(rc, SC_ETRANSFORM);
        assert_non_null(strstr(msg, "sample 5"));
        assert_non_null(strstr(msg, "refusing sample 5 on purpose"));
    }
    /* At least its owner failed (and its next epoch's, building ahead). */
    assert_true(sc_t_any(rc != SC_OK));
}

static void test_bad_declaration(void **state)
{
    (void)state;
    tf_state st = {0, UINT64_MAX, UINT64_MAX, 0};
    sc_transform tf = make_tf(&st, "1", 0);
    snprintf(tf.out[0].dtype, sizeof tf.out[0].dtype, "complex");
    sc_config c = config(&tf, "bad");
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "transform 'halve'"));
    tf = make_tf(&st, "", 0);
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "name and a version"));
    assert_null(ld);
}

static uint64_t fingerprint(const sc_config *c)
{
    sc_dataset *ds = NULL;
    sc_dataset_info di;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, c, &ds, &err), &err);
    SC_ASSERT_OK(sc_dataset_get_info(ds, &di), NULL);
    SC_ASSERT_OK(sc_dataset_close(ds), NULL);
    return di.fingerprint;
}

static void test_outputs_declared_at_open(void **state)
{
    (void)state;
    tf_state st = {0, UINT64_MAX, UINT64_MAX, 0};
    sc_transform set = make_tf(&st, "1", 0), declared = set;
    declared.nout = 0;
    memset(declared.out, 0, sizeof declared.out);
    declared.outputs = halve_outputs;
    sc_config c = config(&declared, "declared"), cs = config(&set, "declared");
    int status = SC_OK;
    char msg[SC_ERROR_MSG_MAX] = "";
    run(&c, 1, 0, &status, msg); /* checks the fields and every value delivered */
    assert_int_equal(status, SC_OK);
    assert_true(fingerprint(&c) == fingerprint(&cs)); /* the same cache entries */
    st.refuse_outputs = 1;
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "transform 'halve' declares no outputs"));
    assert_non_null(strstr(err.msg, "refusing 2 fields on purpose"));
    assert_null(ld);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "transform");
    sc_t_shared_source(src, sizeof src, dir, NSAMPLES, W);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transform_once),
        cmocka_unit_test(test_failing_transform),
        cmocka_unit_test(test_augment_is_deterministic),
        cmocka_unit_test(test_bad_declaration),
        cmocka_unit_test(test_outputs_declared_at_open),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
