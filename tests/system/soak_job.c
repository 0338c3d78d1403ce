/*
 * soak_job - many randomized jobs inside one mpirun, each consuming epochs
 * the way a training loop does (plan broadcast, claims, per-batch checks,
 * drop/pad, end-of-epoch sketch read one epoch later), with straggler
 * delays and, on request, one injected fault.  Each job runs on a random
 * sub-communicator of 1..8 ranks and writes an audit trail that
 * `shardcache verify` re-checks independently.
 *
 *   soak_job --jobs N --seed S --dir DIR [--fault NAME] [--verify SHARDCACHE]
 *            [--world W]
 *
 * Faults (on the job's last rank): plan-seed, stale-plan, dup-shard,
 * skip-shard, world, fingerprint; "skew" (rank 0 runs an epoch ahead with
 * delays) must pass.  The last line is "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "ownership.h"
#include "plan.h"

typedef struct job {
    uint64_t id, seed, nshards, batch, epochs;
    uint64_t *sizes, *first;
    uint32_t world;
    sc_shuffle_mode mode;
    sc_remainder remainder;
    double q;
    int straggler, skew;
} job;

static int world_rank;

static void make_job(job *j, sc__rng *r, int max_world)
{
    j->world = 1 + (uint32_t)sc__rng_below(r, (uint64_t)max_world);
    j->nshards = j->world + sc__rng_below(r, 200);
    j->sizes = malloc(sizeof *j->sizes * j->nshards);
    j->first = malloc(sizeof *j->first * (j->nshards + 1));
    int skew = (int)sc__rng_below(r, 2);
    uint64_t k = 1 + sc__rng_below(r, 40);
    j->first[0] = 0;
    for (uint64_t s = 0; s < j->nshards; s++) {
        j->sizes[s] = skew ? 1 + sc__rng_below(r, 60) : k;
        j->first[s + 1] = j->first[s] + j->sizes[s];
    }
    j->seed = sc__rng_next(r);
    j->batch = 1 + sc__rng_below(r, 8);
    j->epochs = 2 + sc__rng_below(r, 3);
    j->mode = sc__rng_below(r, 2) ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
    j->remainder = sc__rng_below(r, 2) ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
    j->q = (double)sc__rng_below(r, 101) / 100.0;
    j->straggler = (int)sc__rng_below(r, j->world);
}

static sc_plan_params params(const job *j, uint64_t epoch);

/*
 * A batch too big for the smallest rank, in any epoch, is a refusal under
 * drop (the planner's, tested elsewhere): such a job pads instead.
 */
static void settle_remainder(job *j)
{
    sc_plan *prev = NULL;
    for (uint64_t e = 0; e < j->epochs; e++) {
        sc_plan_params p = params(j, e);
        sc_plan *plan = NULL;
        int rc = sc_plan_create(&p, prev, &plan, NULL);
        sc_plan_free(prev);
        prev = plan;
        if (rc == SC_EINVAL) {
            j->remainder = SC_REMAINDER_PAD;
            break;
        }
    }
    sc_plan_free(prev);
}

static sc_plan_params params(const job *j, uint64_t epoch)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = j->sizes;
    p.nshards = j->nshards;
    p.world_size = j->world;
    p.seed = j->seed;
    p.epoch = epoch;
    p.batch_size = j->batch;
    p.mode = j->mode;
    p.exchange = j->q;
    p.remainder = j->remainder;
    p.fingerprint = 0xda7a + j->nshards;
    return p;
}

/* One epoch on this rank: returns SC_OK or the first error. */
static int consume(const job *j, sc__ledger *l, const sc_plan *plan, int rank,
                   const char *fault, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    const uint32_t *mine;
    uint64_t n, samples;
    sc_plan_rank(plan, (uint32_t)rank, &mine, &n, &samples);
    int last = rank == (int)j->world - 1;
    uint64_t *order = malloc(sizeof *order * (samples + j->sizes[mine[0]] + 1));
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (last && !strcmp(fault, "skip-shard") && i == n - 1 && n > 1)
            continue;
        int times = last && !strcmp(fault, "dup-shard") && i == 0 ? 2 : 1;
        for (int t = 0; t < times; t++)
            for (uint64_t id = j->first[mine[i]]; id < j->first[mine[i] + 1]; id++)
                order[m++] = id;
    }
    /* Batches: every rank delivers the plan's count; pad repeats, drop rest. */
    uint64_t want = in.batches_per_rank * in.batch_size, at = 0;
    int rc = SC_OK;
    uint64_t batch[64];
    for (uint64_t b = 0; rc == SC_OK && b < in.batches_per_rank; b++) {
        uint64_t k = 0, padded = 0;
        for (; k < in.batch_size; k++, at++) {
            if (at < m)
                batch[k] = order[at];
            else
                batch[k] = order[(at - m) % m], padded++;
        }
        rc = sc__ledger_check(l, in.epoch, batch, k, err);
        if (rc == SC_OK)
            rc = sc__ledger_consume(l, in.epoch, batch, k - padded, 0, err);
        if (rc == SC_OK && padded)
            rc = sc__ledger_consume(l, in.epoch, batch + k - padded, padded, 1, err);
        if (rank == j->straggler && b % 4 == 0)
            usleep(200);
        if (j->skew && rank == 0)
            usleep(100);
    }
    if (rc == SC_OK && m > want)
        rc = sc__ledger_drop(l, in.epoch, order + want, m - want, err);
    free(order);
    return rc;
}

typedef struct verdicts {
    uint64_t ok_epochs;
    int bad, evidence; /* evidence: bit 1 duplicates seen, bit 2 skips */
} verdicts;

static void tally(const sc_exactly_once *v, verdicts *t, char *why, size_t whylen)
{
    if (!v->verified)
        return;
    t->ok_epochs += v->ok;
    t->bad |= !v->ok;
    t->evidence |= (v->duplicated > 0) << 1 | (v->skipped > 0) << 2;
    if (!v->ok)
        snprintf(why, whylen, "epoch %llu: %s", (unsigned long long)v->epoch, v->detail);
}

/* Runs one job on comm; 1 if it ended as expected (ok, or the fault caught). */
static int run_job(const job *j, MPI_Comm comm, const char *dir, const char *fault,
                   char *why, size_t whylen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int last = rank == (int)j->world - 1;
    sc_error err = SC_ERROR_INIT;
    char audit[1024];
    snprintf(audit, sizeof audit, "%s/job%llu", dir, (unsigned long long)j->id);
    sc__ledger_opts opts = {0, audit};
    sc__ledger *l = NULL;
    int rc = sc__ledger_open(comm, j->nshards, j->first, &opts, &l, &err);
    sc_plan *plans[64] = {0};
    uint64_t begun = 0;
    verdicts t = {0, 0, 0};
    for (uint64_t e = 0; rc == SC_OK && e < j->epochs; e++) {
        sc_plan_params p = params(j, e);
        if (last && !strcmp(fault, "plan-seed"))
            p.seed++;
        if (last && !strcmp(fault, "world"))
            p.world_size++;
        if (last && !strcmp(fault, "fingerprint"))
            p.fingerprint++;
        rc = sc_plan_share(comm, &p, e ? plans[e - 1] : NULL, &plans[e], &err);
        /* A rank still on the last epoch's plan at the handoff. */
        const sc_plan *use = plans[e];
        if (rc == SC_OK && last && e > 0 && !strcmp(fault, "stale-plan"))
            use = plans[e - 1];
        if (rc == SC_OK) {
            sc_plan_info in;
            sc_plan_get_info(use, &in);
            if (in.epoch != e) {
                /* The stale plan claims and checks as if it were this epoch's. */
                sc_plan *relabel = NULL;
                sc_plan_decode(use->wire, use->wire_len, &relabel, NULL);
                relabel->info.epoch = e;
                sc_plan_free(plans[e]);
                plans[e] = relabel;
                use = relabel;
            }
            rc = sc__ledger_begin(l, use, &err);
            begun = e + 1;
        }
        if (rc == SC_OK)
            rc = consume(j, l, use, rank, last ? fault : "", &err);
        if (rc == SC_OK)
            rc = sc__ledger_end(l, e, &err);
        if (rc != SC_OK && l) {
            sc__ledger_abandon(l, e, NULL);
            begun = e + 1;
        }
        /*
         * With a fault injected, a failing rank stops, and so must the others
         * (as a job would abort); clean runs never synchronize here, so ranks
         * drift apart by up to the ledger's lookahead.
         */
        if (*fault) {
            int bad = rc != SC_OK, any = bad;
            MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
            if (any && rc == SC_OK) {
                rc = SC_EPLAN;
                snprintf(err.msg, sizeof err.msg, "another rank failed");
                begun = e + 1;
            }
        }
        /* The previous epoch's verdict, read one epoch later, never waited. */
        if (rc == SC_OK && e > 0) {
            sc_exactly_once v;
            sc__ledger_result(l, e - 1, 0, &v, NULL);
            tally(&v, &t, why, whylen);
        }
    }
    /* Whatever is still in flight, waited for at the end of the job. */
    for (uint64_t e = 0; e < begun && l; e++) {
        sc_exactly_once v;
        if (sc__ledger_result(l, e, 1, &v, NULL) == SC_OK)
            tally(&v, &t, why, whylen);
    }
    if (rc != SC_OK)
        snprintf(why, whylen, "%s: %s", sc_status_name(rc), err.msg);
    /* What the failing rank saw must name the fault, not just any error. */
    if (rc == SC_EPLAN && strstr(err.msg, "seed"))
        t.evidence |= 1 << 3;
    if (rc == SC_EPLAN && strstr(err.msg, "configured for"))
        t.evidence |= 1 << 4;
    if (rc == SC_EPLAN && strstr(err.msg, "dataset fingerprint"))
        t.evidence |= 1 << 5;
    if (rc == SC_EOWNERSHIP)
        t.evidence |= 1 << 6;
    /* Errors can be local to one rank: the job fails if any rank failed. */
    int mine[3] = {rc != SC_OK, t.bad, t.evidence}, all[3];
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(&mine[2], &all[2], 1, MPI_INT, MPI_BOR, comm);
    sc__ledger_close(l);
    for (uint64_t e = 0; e < j->epochs; e++)
        sc_plan_free(plans[e]);
    int caught = all[0] || all[1];
    if (!*fault || !strcmp(fault, "skew"))
        return !caught && t.ok_epochs == j->epochs;
    static const struct { const char *fault; int bits; } named[] = {
        {"dup-shard", 1 << 1}, {"skip-shard", 1 << 2}, {"plan-seed", 1 << 3},
        {"world", 1 << 4}, {"fingerprint", 1 << 5},
        {"stale-plan", 1 << 6 | 1 << 1 | 1 << 2}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(fault, named[i].fault))
            return caught && (all[2] & named[i].bits);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t jobs = 10, seed = 1, force_world = 0;
    const char *dir = "/tmp", *fault = "", *verify = NULL;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--jobs"))
            jobs = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--fault"))
            fault = argv[i + 1];
        else if (!strcmp(argv[i], "--verify"))
            verify = argv[i + 1];
        else if (!strcmp(argv[i], "--world"))
            force_world = strtoull(argv[i + 1], NULL, 10);
    }
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(seed, 0, 42, 0));
    uint64_t passed = 0, failed = 0;
    for (uint64_t t = 0; t < jobs; t++) {
        job j = {0};
        j.id = t;
        make_job(&j, &r, size < 8 ? size : 8);
        j.skew = !strcmp(fault, "skew");
        if (force_world && force_world <= (uint64_t)size && force_world <= j.nshards)
            j.world = (uint32_t)force_world;
        if (*fault && !j.skew && size >= 2 && j.world < 2) {
            /* A fault needs someone to disagree with, and room to show. */
            j.world = 2;
        }
        if (*fault && !j.skew) {
            uint64_t more = 20 * j.world;
            if (j.nshards < more) {
                j.nshards = more;
                j.sizes = realloc(j.sizes, sizeof *j.sizes * more);
                j.first = realloc(j.first, sizeof *j.first * (more + 1));
                for (uint64_t s = 0; s < more; s++) {
                    j.sizes[s] = 3;
                    j.first[s + 1] = j.first[s] + 3;
                }
            }
            j.mode = SC_SHUFFLE_GLOBAL; /* consecutive plans differ */
        }
        settle_remainder(&j);
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < (int)j.world ? 0 : MPI_UNDEFINED,
                       world_rank, &comm);
        int good = 1;
        char why[600] = "";
        if (comm != MPI_COMM_NULL) {
            good = run_job(&j, comm, dir, fault, why, sizeof why);
            MPI_Comm_free(&comm);
        }
        /* The audit trail, checked by the CLI alone (clean runs only). */
        if (good && world_rank == 0 && verify && !*fault) {
            char cmd[4096], sizes[1100];
            snprintf(sizes, sizeof sizes, "%s/job%llu/sizes.txt", dir, (unsigned long long)t);
            FILE *f = fopen(sizes, "w");
            for (uint64_t s = 0; f && s < j.nshards; s++)
                fprintf(f, "%llu\n", (unsigned long long)j.sizes[s]);
            if (f)
                fclose(f);
            snprintf(cmd, sizeof cmd,
                     "%s verify --audit-dir %s/job%llu --plan-seed %llu --shard-sizes %s "
                     "--ranks %u --batch %llu --mode %s --exchange %g --remainder %s "
                     "> %s/job%llu/verify.log 2>&1 && grep -q "
                     "'^exactly-once: ok (%llu epochs' %s/job%llu/verify.log",
                     verify, dir, (unsigned long long)t, (unsigned long long)j.seed, sizes,
                     j.world, (unsigned long long)j.batch,
                     j.mode == SC_SHUFFLE_STICKY ? "sticky" : "global", j.q,
                     j.remainder == SC_REMAINDER_PAD ? "pad" : "drop", dir, (unsigned long long)t,
                     (unsigned long long)j.epochs, dir, (unsigned long long)t);
            char flagfile[1100];
            snprintf(flagfile, sizeof flagfile, "%s/job%llu/flags", dir, (unsigned long long)t);
            FILE *ff = fopen(flagfile, "w");
            if (ff) {
                fprintf(ff, "--plan-seed %llu --shard-sizes %s --ranks %u --batch %llu --mode %s "
                        "--exchange %g --remainder %s\n", (unsigned long long)j.seed, sizes,
                        j.world, (unsigned long long)j.batch,
                        j.mode == SC_SHUFFLE_STICKY ? "sticky" : "global", j.q,
                        j.remainder == SC_REMAINDER_PAD ? "pad" : "drop");
                fclose(ff);
            }
            if (system(cmd) != 0) {
                good = 0;
                snprintf(why, sizeof why, "shardcache verify disagrees: see %s/job%llu/verify.log",
                         dir, (unsigned long long)t);
            }
        }
        int all = good;
        MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (world_rank == 0 && (!all || *why))
            printf("job %llu (%u ranks, %llu shards, %s, %s, B=%llu): %s %s\n",
                   (unsigned long long)t, j.world, (unsigned long long)j.nshards,
                   j.mode == SC_SHUFFLE_STICKY ? "sticky" : "global",
                   j.remainder == SC_REMAINDER_PAD ? "pad" : "drop",
                   (unsigned long long)j.batch, all ? "ok" : "FAILED", why);
        all ? passed++ : failed++;
        free(j.sizes);
        free(j.first);
    }
    if (world_rank == 0)
        printf("%llu passed, %llu failed\n", (unsigned long long)passed,
               (unsigned long long)failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
