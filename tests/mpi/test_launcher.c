/*
 * sc_loader_open against the launcher's variables, under mpiexec -n 1, 2
 * and 4: a launcher that started more processes than MPI_COMM_WORLD holds
 * (torchrun, srun without PMIx, another MPI's mpirun or PMI) is refused on
 * every rank, the message naming both counts, the variables and the fix;
 * what is legitimate opens: the same counts, Slurm's allocation larger than
 * an mpirun inside it, mpirun's daemons started as an srun step, a loader
 * on part of the world, SC_LAUNCHER_CHECK=off.  Each case sets the
 * variables it names (unsetting the launcher's own) and restores them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static char dir[1024], src[1200];

/* Every variable a case may set: saved at the start, restored after each case. */
static const char *const vars[] = {
    "WORLD_SIZE", "RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "PMI_SIZE", "PMI_RANK", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_STEP_ID",
};
#define NVARS (sizeof vars / sizeof vars[0])
static char *saved[NVARS];

static void set_env(const char *name, long value)
{
    char v[32];
    snprintf(v, sizeof v, "%ld", value);
    setenv(name, v, 1);
}

/* A case's environment: none of vars[] but those it sets. */
static void clear_env(void)
{
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
}

static void restore_env(void)
{
    for (size_t i = 0; i < NVARS; i++) {
        if (saved[i])
            setenv(vars[i], saved[i], 1);
        else
            unsetenv(vars[i]);
    }
}

/* Opens (and closes) a loader on comm with the launch check `mode`: its status, its message. */
static int open_with(MPI_Comm comm, sc_launcher_check_mode mode, sc_error *err)
{
    sc_config cfg = sc_t_config(src, dir, 16, 4, 1);
    cfg.launcher_check = mode;
    sc_loader *ld = NULL;
    int rc = sc_loader_open(comm, &cfg, &ld, err);
    assert_true(rc == SC_OK ? ld != NULL : ld == NULL);
    if (ld)
        SC_ASSERT_OK(sc_loader_close(ld), NULL);
    restore_env();
    return rc;
}

static void assert_has(const char *msg, const char *want)
{
    if (!strstr(msg, want))
        print_error("rank %d: '%s' not in: %s\n", rank, want, msg);
    assert_non_null(strstr(msg, want));
}

/* Refused on this rank, naming who, both counts (size + extra, size), `seen` and the fix. */
static void assert_refused(const char *who, int extra, const char *seen)
{
    sc_error err = SC_ERROR_INIT, direct = SC_ERROR_INIT;
    assert_int_equal(sc_launcher_check(NULL, &direct), SC_EINVAL);
    int rc = open_with(MPI_COMM_WORLD, SC_LAUNCHER_CHECK_ON, &err);
    SC_ASSERT_RC(rc, SC_EINVAL, &err);
    assert_string_equal(err.msg, direct.msg);
    char want[128];
    assert_true(strncmp(err.msg, who, strlen(who)) == 0);
    snprintf(want, sizeof want, " started %d processes (", size + extra);
    assert_has(err.msg, want);
    snprintf(want, sizeof want, "MPI_COMM_WORLD holds %d:", size);
    assert_has(err.msg, want);
    snprintf(want, sizeof want, "mpirun -n %d, srun --mpi=pmix -n %d or shardcache-run -n %d",
             size + extra, size + extra, size + extra);
    assert_has(err.msg, want);
    assert_has(err.msg, seen);
    assert_has(err.msg, "SC_LAUNCHER_CHECK=off");
}

static void assert_opens(void)
{
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(open_with(MPI_COMM_WORLD, SC_LAUNCHER_CHECK_ON, &err), &err);
}

/* The job: torchrun's processes, each alone in MPI. */
static void test_torchrun_refused(void **state)
{
    (void)state;
    clear_env();
    set_env("WORLD_SIZE", size + 1), set_env("RANK", rank), set_env("LOCAL_RANK", rank);
    char seen[96];
    snprintf(seen, sizeof seen, "(WORLD_SIZE=%d RANK=%d LOCAL_RANK=%d)", size + 1, rank, rank);
    assert_refused("torchrun", 1, seen);
    clear_env(); /* and with the check off, it opens */
    set_env("WORLD_SIZE", size + 1), set_env("RANK", rank), set_env("LOCAL_RANK", rank);
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(open_with(MPI_COMM_WORLD, SC_LAUNCHER_CHECK_OFF, &err), &err);
}

/*
 * WORLD_SIZE and RANK left over (an export in a batch script) under an
 * mpirun that counted the job as MPI sees it: refused, saying they are
 * stale rather than that torchrun started the job.
 */
static void test_stale_torch_variables_refused(void **state)
{
    (void)state;
    clear_env();
    set_env("OMPI_COMM_WORLD_SIZE", size), set_env("OMPI_COMM_WORLD_RANK", rank);
    set_env("WORLD_SIZE", size + 1), set_env("RANK", rank);
    sc_error err = SC_ERROR_INIT;
    int rc = open_with(MPI_COMM_WORLD, SC_LAUNCHER_CHECK_ON, &err);
    SC_ASSERT_RC(rc, SC_EINVAL, &err);
    char want[128];
    snprintf(want, sizeof want, "WORLD_SIZE=%d RANK=%d (torchrun's variables) say %d processes",
             size + 1, rank, size + 1);
    assert_has(err.msg, want);
    snprintf(want, sizeof want, "Open MPI's mpirun started this job's %d (OMPI_COMM_WORLD_SIZE=%d)",
             size, size);
    assert_has(err.msg, want);
    assert_has(err.msg, "left over in the environment");
}

/* WORLD_SIZE alone (no RANK), or equal to the world (set from MPI's), is no evidence. */
static void test_torch_variables_that_agree_open(void **state)
{
    (void)state;
    clear_env();
    set_env("WORLD_SIZE", size + 3);
    assert_opens();
    clear_env();
    set_env("WORLD_SIZE", size), set_env("RANK", rank);
    assert_opens();
}

/* srun --mpi=none: the step's tasks, each alone in MPI. */
static void test_srun_without_pmix_refused(void **state)
{
    (void)state;
    clear_env();
    set_env("SLURM_STEP_NUM_TASKS", size + 2), set_env("SLURM_PROCID", rank);
    set_env("SLURM_STEP_ID", 0), set_env("SLURM_NTASKS", size + 2);
    assert_refused("srun", 2, "SLURM_STEP_ID=0)");
}

/*
 * What Slurm 22.05 sets in a batch script (SLURM_NTASKS of the allocation,
 * SLURM_PROCID=0, no step): `mpirun -n 1` inside 4 tasks opens.  And
 * mpirun's ranks on other nodes descend from its daemons, an srun step of
 * one task a node: the step's count is the daemons', mpirun's vouches.
 */
static void test_mpirun_inside_slurm_opens(void **state)
{
    (void)state;
    clear_env();
    set_env("SLURM_NTASKS", size + 3), set_env("SLURM_PROCID", 0);
    set_env("OMPI_COMM_WORLD_SIZE", size), set_env("OMPI_COMM_WORLD_RANK", rank);
    assert_opens();
    clear_env();
    set_env("SLURM_STEP_NUM_TASKS", size + 5), set_env("SLURM_PROCID", 0);
    set_env("OMPI_COMM_WORLD_SIZE", size), set_env("OMPI_COMM_WORLD_RANK", rank);
    assert_opens();
}

/* Another MPI's launcher: Open MPI's mpirun, or a PMI one (Hydra, srun --mpi=pmi2). */
static void test_other_mpi_refused(void **state)
{
    (void)state;
    clear_env();
    set_env("OMPI_COMM_WORLD_SIZE", size + 1), set_env("OMPI_COMM_WORLD_RANK", rank);
    assert_refused("Open MPI's mpirun", 1, "(OMPI_COMM_WORLD_SIZE=");
    clear_env();
    set_env("PMI_SIZE", size + 4), set_env("PMI_RANK", rank);
    assert_refused("a PMI launcher", 4, "(PMI_SIZE=");
    clear_env();
    set_env("PMI_SIZE", size), set_env("PMI_RANK", rank);
    assert_opens();
}

/*
 * A loader on half the world: the launcher started the world, not the
 * communicator.  A refusal on one rank alone fails every rank's open
 * (rank 0's WORLD_SIZE says more than the world; the others' agree).
 */
static void test_parts_of_the_world(void **state)
{
    (void)state;
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    clear_env();
    set_env("OMPI_COMM_WORLD_SIZE", size), set_env("OMPI_COMM_WORLD_RANK", rank);
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(open_with(half, SC_LAUNCHER_CHECK_ON, &err), &err);
    MPI_Comm_free(&half);
    clear_env();
    set_env("WORLD_SIZE", rank == 0 ? size + 1 : size), set_env("RANK", rank);
    int rc = open_with(MPI_COMM_WORLD, SC_LAUNCHER_CHECK_ON, &err);
    SC_ASSERT_RC(rc, SC_EINVAL, &err);
    assert_has(err.msg, rank == 0 ? "torchrun started" : "another rank failed to open");
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "launcher");
    sc_t_shared_source(src, sizeof src, dir, 64, 4);
    for (size_t i = 0; i < NVARS; i++)
        saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torchrun_refused),
        cmocka_unit_test(test_stale_torch_variables_refused),
        cmocka_unit_test(test_torch_variables_that_agree_open),
        cmocka_unit_test(test_srun_without_pmix_refused),
        cmocka_unit_test(test_mpirun_inside_slurm_opens),
        cmocka_unit_test(test_other_mpi_refused),
        cmocka_unit_test(test_parts_of_the_world),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < NVARS; i++)
        free(saved[i]);
    return sc_t_mpi_finish(failed, dir);
}
