/*
 * Every public call that takes an `sc_error *` fails the same with NULL as
 * with a buffer: the status is what the call returns, never derived from
 * whether the caller wanted a message (it was: sc_config_init(&cfg, NULL)
 * with SC_SEED=abc returned SC_OK and skipped the rest of the environment).
 * Under mpiexec -n 1, 2 and 4: the collective calls are among them.
 */
#include <stdlib.h>
#include <string.h>

#include "sc_h5test.h"
#include "sc_test.h"
#include "synth.h"

static int rank, size;
static char dir[1024], src[1200];

/* Runs `call` twice, with an sc_error and with NULL: the same failing status. */
#define BOTH(want, call_with)                                                 \
    do {                                                                      \
        sc_error e_ = SC_ERROR_INIT;                                          \
        sc_error *err = &e_;                                                  \
        int with_ = (call_with);                                              \
        err = NULL;                                                           \
        int without_ = (call_with);                                           \
        if (with_ != (want) || without_ != (want))                            \
            print_error("%s: %s with an sc_error ('%s'), %s without; want %s\n", \
                        #call_with, sc_status_name(with_), e_.msg,            \
                        sc_status_name(without_), sc_status_name(want));      \
        assert_int_equal(with_, (want));                                      \
        assert_int_equal(without_, (want));                                   \
        assert_true(e_.msg[0] != '\0');                                       \
    } while (0)

static void test_config(void **state)
{
    (void)state;
    sc_config cfg;
    setenv("SC_SEED", "abc", 1);
    BOTH(SC_EINVAL, sc_config_init(&cfg, err));
    unsetenv("SC_SEED");
    assert_int_equal(sc_config_init(&cfg, NULL), SC_OK);
    BOTH(SC_EINVAL, sc_config_set(&cfg, "SC_BATCH_SIZE", "many", err));
    BOTH(SC_EINVAL, sc_config_set(&cfg, "SC_NO_SUCH_SETTING", "1", err));
}

static void test_plans(void **state)
{
    (void)state;
    uint64_t sizes[6] = {5, 5, 5, 5, 5, 5};
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes, p.nshards = 6, p.world_size = 2, p.batch_size = 2;
    sc_plan *plan = NULL, *none = NULL;
    assert_int_equal(sc_plan_create(&p, NULL, &plan, NULL), SC_OK);
    sc_plan_params bad = p;
    bad.batch_size = 0;
    BOTH(SC_EINVAL, sc_plan_create(&bad, NULL, &none, err));
    assert_null(none);
    void *buf = NULL;
    size_t len = 0;
    BOTH(SC_EINVAL, sc_plan_encode(NULL, &buf, &len, err));
    static const unsigned char junk[64] = "not a plan at all";
    BOTH(SC_EFORMAT, sc_plan_decode(junk, sizeof junk, &none, err));
    sc_plan_params other = p;
    other.seed = 99; /* a plan checked against inputs it was not made from */
    BOTH(SC_EPLAN, sc_plan_check(plan, &other, NULL, err));
    /* Collective: rank 1 holds another seed, so its check of rank 0's plan fails. */
    sc_plan_params mine = p;
    mine.world_size = (uint32_t)size;
    mine.seed = rank == 1 ? 7 : 0;
    for (int pass = 0; pass < 2; pass++) {
        sc_error e = SC_ERROR_INIT;
        int rc = sc_plan_share(MPI_COMM_WORLD, &mine, NULL, &none, pass ? NULL : &e);
        assert_int_equal(rc, rank == 1 ? SC_EPLAN : SC_OK);
        assert_true(rc == SC_OK ? none != NULL : none == NULL);
        sc_plan_free(none);
        none = NULL;
    }
    sc_plan_free(plan);
}

/* Settings whose source does not exist. */
static sc_config missing_source(void)
{
    sc_config cfg;
    sc_config_init(&cfg, NULL);
    snprintf(cfg.source, sizeof cfg.source, "%s/missing.h5", dir);
    return cfg;
}

static void test_datasets_and_caches(void **state)
{
    (void)state;
    sc_config cfg = missing_source();
    sc_dataset *ds = NULL;
    BOTH(SC_EIO, sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, err));
    snprintf(cfg.source, sizeof cfg.source, "%s", src);
    snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s/cache", dir);
    cfg.shard_size = 16;
    assert_int_equal(sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, NULL), SC_OK);
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    char x[16 * 8 * 4], y[16 * 8];
    void *bufs[2] = {x, y};
    BOTH(SC_EINVAL, sc_dataset_read_shard(ds, di.nshards + 3, bufs, err));
    sc_cache *c = NULL;
    BOTH(SC_EINVAL, sc_cache_open(NULL, MPI_COMM_WORLD, &cfg, &c, err));
    assert_int_equal(sc_cache_open(ds, MPI_COMM_WORLD, &cfg, &c, NULL), SC_OK);
    BOTH(SC_EINVAL, sc_cache_read(c, di.nshards, bufs, err));
    sc_cache_close(c);
    sc_dataset_close(ds);
    sc__synth_params sp = SC__SYNTH_PARAMS_INIT;
    char out[1300];
    snprintf(out, sizeof out, "%s/made-%d.h5", dir, rank);
    sp.out = out, sp.samples = 8, sp.dtype = "int3";
    BOTH(SC_EINVAL, sc__dataset_make(&sp, NULL, NULL, err));
}

static void test_loader(void **state)
{
    (void)state;
    sc_config cfg = missing_source();
    sc_loader *ld = NULL;
    BOTH(SC_EIO, sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, err));
    assert_null(ld);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "errors");
    sc_t_shared_source(src, sizeof src, dir, 64, 8);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_datasets_and_caches),
        cmocka_unit_test(test_loader),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
