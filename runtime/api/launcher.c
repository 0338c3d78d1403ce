/*
 * launcher.c - sc_launcher_check: did the program that started this
 * process start more processes than MPI_COMM_WORLD holds?
 *
 * torchrun, srun without PMIx, or the mpirun of an MPI other than the
 * program's start N processes that MPI then sees each alone, a world of 1.
 * Each would open a loader of its own, read the whole dataset every epoch
 * and find it delivered exactly once: the job trains on every sample N
 * times and every verdict says ok.  Nothing inside MPI can tell; the
 * launcher's variables can.  A loader on a part of the world (a
 * sub-communicator) is legitimate, and so is a world smaller than a Slurm
 * allocation (`mpirun -n 2` inside 4 tasks); a world smaller than the
 * launcher that started this very process is not.  Only unambiguous
 * evidence refuses: a count and this process's index among them, both set
 * by one launcher.  Every process reads its own environment: no message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "mpierr.h"
#include "shardcache.h"

typedef enum {
    L_APP,  /* starts the training processes themselves, not through MPI */
    L_MPI,  /* an MPI's own launcher: its count vouches for this process */
    L_STEP  /* Slurm's step: under an L_MPI launcher it counts that launcher's
             * daemons (mpirun starts them on other nodes with srun), not us */
} launcher_role;

typedef struct launcher {
    const char *who;  /* as a user knows it */
    const char *size; /* its variable for how many processes it started */
    const char *rank; /* and for which of them this one is: both set, or no claim */
    const char *also; /* one more variable worth showing, or NULL */
    launcher_role role;
    const char *why;  /* why MPI did not see them: the first half of the fix */
} launcher;

/* Slurm's step last: it is skipped under an MPI launcher's own count. */
static const launcher launchers[] = {
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK", L_APP,
     "torchrun starts processes that MPI does not join"},
    {"Open MPI's mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", NULL, L_MPI,
     "this program's MPI is not that mpirun's: use the mpirun of the MPI it was built with"},
    {"a PMI launcher (Hydra's mpiexec, srun --mpi=pmi2)", "PMI_SIZE", "PMI_RANK", NULL, L_MPI,
     "this program's MPI did not use that launcher's PMI"},
    {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_STEP_ID", L_STEP,
     "srun started them without PMIx, so MPI saw each alone"},
};
#define NLAUNCHERS (sizeof launchers / sizeof launchers[0])

/* A variable's value as a whole number >= 0 into *out: 1, or 0 if unset or not one. */
static int launcher_number(const char *name, long *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < 0)
        return 0;
    *out = x;
    return 1;
}

/* How many processes `l` started, when it says this is one of them; else 0. */
static long launcher_claim(const launcher *l)
{
    long size = 0, rank = 0;
    if (!launcher_number(l->size, &size) || !launcher_number(l->rank, &rank) || rank >= size)
        return 0;
    return size;
}

/*
 * The refusal: both counts, the variables seen, why, and how to start the
 * job instead.  Where an MPI launcher (`by`) counted this job as MPI sees
 * it, an application launcher's variables are left over from elsewhere.
 */
static int launcher_refuse(const launcher *l, long n, int world, const launcher *by,
                           sc_error *err)
{
    const char *also = l->also ? getenv(l->also) : NULL;
    char more[64] = "";
    if (also)
        snprintf(more, sizeof more, " %s=%.24s", l->also, also);
    if (by && l->role == L_APP)
        return sc__seterr(err, SC_EINVAL,
                          "%s=%s %s=%s%s (%s's variables) say %ld processes, but %s started "
                          "this job's %d (%s=%s): they are left over in the environment (an "
                          "earlier %s, an export in the batch script); unset them "
                          "(SC_LAUNCHER_CHECK=off skips this check)",
                          l->size, getenv(l->size), l->rank, getenv(l->rank), more, l->who, n,
                          by->who, world, by->size, getenv(by->size), l->who);
    return sc__seterr(err, SC_EINVAL,
                      "%s started %ld processes (%s=%s %s=%s%s) but MPI_COMM_WORLD holds %d: "
                      "each would open a loader of its own and read the whole dataset. %s; "
                      "start the job with mpirun -n %ld, srun --mpi=pmix -n %ld or "
                      "shardcache-run -n %ld (SC_LAUNCHER_CHECK=off skips this check)",
                      l->who, n, l->size, getenv(l->size), l->rank, getenv(l->rank), more,
                      world, l->why, n, n, n);
}

int sc_launcher_check(const sc_config *cfg, sc_error *err)
{
    if (cfg && cfg->launcher_check == SC_LAUNCHER_CHECK_OFF)
        return sc__errok(err);
    int up = 0, world = 0;
    SC_MPI_CHECK(err, MPI_Initialized(&up));
    if (!up)
        return sc__seterr(err, SC_EINVAL, "sc_launcher_check: MPI is not initialized");
    SC_MPI_CHECK(err, MPI_Comm_size(MPI_COMM_WORLD, &world));
    const launcher *by = NULL; /* an MPI launcher that counted this process in the world */
    for (size_t i = 0; i < NLAUNCHERS && !by; i++) {
        long n = launcher_claim(&launchers[i]);
        by = launchers[i].role == L_MPI && n > 0 && n <= world ? &launchers[i] : NULL;
    }
    for (size_t i = 0; i < NLAUNCHERS; i++) {
        const launcher *l = &launchers[i];
        if (l->role == L_STEP && by)
            continue;
        long n = launcher_claim(l);
        if (n > world)
            return launcher_refuse(l, n, world, by, err);
    }
    return sc__errok(err);
}
