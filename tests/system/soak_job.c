/*
 * soak_job - many randomized jobs inside one mpirun, each a training loop
 * on the real loader (sc_loader_*): plan broadcast, claims, the per-batch
 * ownership check, drop/pad, the in-rank shuffle, producer threads, the
 * node-local cache, and the end-of-epoch verdict read one epoch later.
 * Each job runs on a random sub-communicator of 1..8 ranks with random
 * shard counts and sizes, seeds, modes, remainder policies, batch sizes,
 * shuffle windows, ring depths, cache capacities, verification modes and a
 * straggler rank, on host memory or the simulated device, a third of them
 * over SC_PARTITIONS (resumed on other world sizes at the same global
 * batch); it checks every
 * sample's bytes, equal batch counts on
 * every rank, the runtime's verdicts, and (clean runs) its audit trail
 * with `shardcache verify`, which re-derives the plans independently.
 *
 *   soak_job --jobs N --seed S --dir DIR [--fault NAME] [--verify SHARDCACHE]
 *            [--world W] [--cache DIR]
 *
 * DIR holds the datasets and audit trails (every rank must see it); the
 * caches go to DIR/cache, or to --cache DIR (node-local on a cluster).
 *
 * Faults are the library's own SC_FAULT hooks, on the job's last rank in
 * epoch 1: plan-seed, own-plan, stale-plan, dup-shard, skip-shard, world,
 * fingerprint.  Each must end in an error or verdict that names it.
 * "skew" (rank 0 slowed, so the others run an epoch ahead) must pass.
 * "resume": killed at a random point, resumed on a random number of ranks
 * (half of the jobs killed again inside the epoch they resumed, and
 * resumed once more), exactly once over all the runs' audit trails.
 * The last line is "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"
#include "dev_sim.h"
#include "hash.h"
#include "plan_state.h"
#include "sc_h5test.h"
#include "shardcache.h"

/* The datasets every job picks from: one layout-A file cut into shards of
 * a random size, the same samples compressed (shuffle + deflate, chunks of
 * 37 rows, which no shard size aligns with), and layout-B directories of
 * files of random sizes, one of them compressed.  The uncompressed ones
 * also hold a variable-length field (/z: 0 to 8 int32 a sample), checked
 * like the others from each sample's id. */
enum { NA = 1500, W = 2, NB = 2 };
static const uint64_t b_files[NB] = {90, 40}, b_max[NB] = {40, 30};

typedef struct job {
    uint64_t id, seed, nshards, batch, epochs, shard_size, window, depth;
    uint64_t cache_bytes;
    uint64_t partitions; /* 0, or a multiple of every world size the job runs on */
    uint64_t *sizes;
    int dataset; /* -1: layout A; else the layout-B directory */
    uint32_t world;
    sc_shuffle_mode mode;
    sc_remainder remainder;
    double q;
    int straggler, skew, producers, full;
    sc_device_mode device;
    /* --fault resume: killed after batch kill_batch of epoch kill_epoch, resumed on world2;
       half of them killed again after kill_batch2 batches of the epoch they resumed
       (world3 > 0), and resumed on world3 */
    uint64_t kill_epoch, kill_batch, kill_batch2;
    uint32_t world2, world3;
} job;

static int world_rank;
static const char *cache_root; /* --cache: else DIR/cache */
static uint64_t *b_sizes[NB]; /* every rank knows them: drawn from one seed */

static void write_samples(const char *path, uint64_t first, uint64_t n, uint64_t chunk)
{
    if (sc_t_write_samples_z(path, first, n, W, chunk) ||
        (!chunk && sc_t_write_vlen(path, first, n))) {
        fprintf(stderr, "soak_job: cannot write %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void make_datasets(const char *dir, uint64_t seed)
{
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(seed, 0, 0xda7a, 0));
    for (int d = 0; d < NB; d++) {
        b_sizes[d] = malloc(sizeof *b_sizes[d] * b_files[d]);
        for (uint64_t k = 0; k < b_files[d]; k++)
            b_sizes[d][k] = 1 + sc__rng_below(&r, b_max[d]);
    }
    if (world_rank == 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/a.h5", dir);
        write_samples(path, 0, NA, 0);
        snprintf(path, sizeof path, "%s/az.h5", dir);
        write_samples(path, 0, NA, 37);
        for (int d = 0; d < NB; d++) {
            snprintf(path, sizeof path, "%s/b%d", dir, d);
            mkdir(path, 0777);
            uint64_t first = 0;
            for (uint64_t k = 0; k < b_files[d]; k++) {
                snprintf(path, sizeof path, "%s/b%d/part%04llu.h5", dir, d,
                         (unsigned long long)k);
                write_samples(path, first, b_sizes[d][k], d == 1 ? 16 : 0);
                first += b_sizes[d][k];
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
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
    p.partitions = j->partitions;
    return p;
}

/* The batch on n ranks: the job's, or with partitions the global batch's share. */
static uint64_t batch_on(const job *j, uint32_t n)
{
    return j->partitions ? j->batch * j->world / n : j->batch;
}

/*
 * A batch too big for the smallest rank, in any epoch, is a refusal under
 * drop (the open's, on either world size, and the planner's; tested
 * elsewhere): such a job pads instead.
 */
static void settle_remainder(job *j)
{
    for (int w = 0; w < 2; w++) {
        sc_plan_params p = params(j, 0);
        p.world_size = w ? j->world2 : j->world;
        p.batch_size = batch_on(j, p.world_size);
        if (sc_plan_params_check(&p, NULL) == SC_EINVAL) {
            j->remainder = SC_REMAINDER_PAD;
            return;
        }
    }
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

/*
 * Layout B's shards as the library must make them: runs of files of at
 * most shard_size samples, a file of more cut into the fewest pieces of
 * at most shard_size, the first (samples mod pieces) one longer than the
 * rest (its last piece one the files after it may join).
 */
static void group_files(job *j, const uint64_t *files, uint64_t n)
{
    uint64_t total = 0;
    for (uint64_t k = 0; k < n; k++)
        total += files[k];
    j->sizes = malloc(sizeof *j->sizes * total);
    j->nshards = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t left = files[k];
        if (k && j->sizes[j->nshards - 1] + left <= j->shard_size) {
            j->sizes[j->nshards - 1] += left;
            continue;
        }
        uint64_t pieces = (left + j->shard_size - 1) / j->shard_size;
        for (uint64_t q = 0; q < pieces; q++)
            j->sizes[j->nshards++] = left / pieces + (q < left % pieces);
    }
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    return b ? gcd(b, a % b) : a;
}

/*
 * Partitions: P a multiple of every world size the job runs on (at most 64
 * and the shards), the batch P / world x m, so every world's batch is whole.
 */
static void pick_partitions(job *j, sc__rng *r)
{
    uint64_t P = 1;
    const uint32_t worlds[3] = {j->world, j->world2, j->world3};
    for (int i = 0; i < 3; i++)
        if (worlds[i])
            P = P / gcd(P, worlds[i]) * worlds[i];
    P *= 1 + sc__rng_below(r, 2);
    if (P > 64 || P > j->nshards)
        return;
    j->partitions = P;
    j->batch = P / j->world * (1 + sc__rng_below(r, 2));
}

static void make_job(job *j, sc__rng *r, int max_world, int force_world, const char *fault)
{
    int faulty = *fault && strcmp(fault, "skew") && strcmp(fault, "resume");
    j->world = 1 + (uint32_t)sc__rng_below(r, (uint64_t)max_world);
    if (force_world >= 1 && force_world <= max_world)
        j->world = (uint32_t)force_world;
    if (faulty && max_world >= 2 && j->world < 2)
        j->world = 2; /* a fault needs someone to disagree with */
    j->dataset = faulty || sc__rng_below(r, 10) < 7 ? -1 : (int)sc__rng_below(r, NB);
    if (j->dataset < 0) {
        /* Faults need shards to spare on every rank to show. */
        j->shard_size = faulty ? 6 + sc__rng_below(r, 10) : 8 + sc__rng_below(r, 53);
        j->nshards = (NA + j->shard_size - 1) / j->shard_size;
        j->sizes = malloc(sizeof *j->sizes * j->nshards);
        for (uint64_t s = 0; s < j->nshards; s++)
            j->sizes[s] = s + 1 < j->nshards ? j->shard_size : NA - s * j->shard_size;
    } else {
        /* A third of them a shard per sample (every file cut); the rest runs of files
           grouped up to it, the larger files cut. */
        j->shard_size = sc__rng_below(r, 3) == 0 ? 1 : 12 + sc__rng_below(r, 49);
        group_files(j, b_sizes[j->dataset], b_files[j->dataset]);
    }
    j->seed = sc__rng_next(r);
    j->batch = 1 + sc__rng_below(r, 12);
    j->epochs = 2 + sc__rng_below(r, 3);
    j->mode = !faulty && sc__rng_below(r, 2) ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
    j->remainder = sc__rng_below(r, 2) ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
    j->q = (double)sc__rng_below(r, 101) / 100.0;
    uint64_t w = sc__rng_below(r, 4);
    j->window = w == 0 ? 0 : w == 1 ? 1 : 2 + sc__rng_below(r, 400);
    j->depth = 1 + sc__rng_below(r, 6);
    j->producers = 1 + (int)sc__rng_below(r, 3);
    j->full = sc__rng_below(r, 4) == 0;
    /* A third of the jobs cache a third of the dataset: evictions. */
    j->cache_bytes = sc__rng_below(r, 3) == 0 ? NA * (W * 4 + 8) / 3 : 0;
    j->straggler = (int)sc__rng_below(r, j->world);
    j->skew = !strcmp(fault, "skew");
    j->kill_epoch = sc__rng_below(r, j->epochs);
    j->kill_batch = sc__rng_below(r, 12);
    j->world2 = 1 + (uint32_t)sc__rng_below(r, (uint64_t)max_world);
    /* A third of the jobs take their batches through the simulated GPU. */
    j->device = sc__rng_below(r, 3) == 0 ? SC_DEVICE_SIM : SC_DEVICE_HOST;
    if (!strcmp(fault, "resume") && sc__rng_below(r, 2)) {
        j->kill_batch2 = sc__rng_below(r, 12);
        j->world3 = 1 + (uint32_t)sc__rng_below(r, (uint64_t)max_world);
    }
    if (!faulty && sc__rng_below(r, 3) == 0)
        pick_partitions(j, r);
    settle_remainder(j);
}

static sc_config job_config(const job *j, const char *dir)
{
    sc_config c;
    sc_config_init(&c, NULL);
    if (j->dataset < 0) {
        /* Every other job reads the compressed copy: the same samples, the same checks. */
        snprintf(c.source, sizeof c.source, "%s/%s", dir, j->id % 2 ? "az.h5" : "a.h5");
    } else {
        snprintf(c.source, sizeof c.source, "%s/b%d", dir, j->dataset);
    }
    c.shard_size = j->shard_size;
    /* One cache root for the soak: jobs on the same shards start warm. */
    if (cache_root)
        snprintf(c.cache_dir, sizeof c.cache_dir, "%s", cache_root);
    else
        snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache", dir);
    snprintf(c.audit_dir, sizeof c.audit_dir, "%s/job%llu", dir, (unsigned long long)j->id);
    c.seed = j->seed;
    c.batch_size = j->batch;
    c.mode = j->mode;
    c.exchange = j->q;
    c.remainder = j->remainder;
    c.partitions = j->partitions;
    c.shuffle_window = j->window;
    c.prefetch_batches = j->depth;
    c.producers = j->producers;
    c.cache_bytes = j->cache_bytes;
    c.verify = j->full ? SC_VERIFY_FULL : SC_VERIFY_SKETCH;
    c.device = j->device;
    c.log_level = 0;
    return c;
}

/*
 * Every sample's bytes follow from its id: a batch checks itself, once it
 * has landed (on the simulated device, that is after its copy).
 */
static int batch_ok(sc_loader *ld, const sc_batch *b, char *why, size_t whylen)
{
    if (sc_batch_wait(ld, b) != SC_OK) {
        snprintf(why, whylen, "sc_batch_wait: %s", sc_loader_last_error(ld));
        return 0;
    }
    return sc_t_samples_ok(b, W, UINT64_MAX, why, whylen);
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
    int faulty = *fault && !j->skew;
    if (faulty)
        sc__fault_set(fault); /* on rank world-1, epoch 1: the defaults */
    sc_config c = job_config(j, dir);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_loader_open(comm, &c, &ld, &err);
    if (rc != SC_OK) {
        sc__fault_set(NULL);
        snprintf(why, whylen, "open: %s: %s", sc_status_name(rc), err.msg);
        return 0;
    }
    verdicts t = {0, 0, 0};
    uint64_t batches[8] = {0}, e = 0, ended = 0;
    int early[8] = {0}; /* verdicts read before the end: 1 ok, 2 not ok */
    int data_ok = 1;
    for (; rc == SC_OK && e < j->epochs; e++) {
        sc_epoch_info info;
        rc = sc_epoch_begin(ld, e, &info);
        sc_batch b;
        while (rc == SC_OK && (rc = sc_batch_next(ld, &b)) == SC_OK) {
            data_ok &= batch_ok(ld, &b, why, whylen);
            batches[e]++;
            if (rank == j->straggler && b.index % 4 == 0)
                usleep(200);
            if (j->skew && rank == 0)
                usleep(100);
            sc_batch_release(ld, &b);
        }
        if (rc == SC_END_OF_EPOCH) {
            rc = SC_OK;
            ended = e + 1;
        }
        /*
         * With a fault injected, a failing rank stops, and so must the
         * others (as a job would abort); clean runs never synchronize here,
         * so ranks drift apart by up to the lookahead.
         */
        if (faulty) {
            int bad = rc != SC_OK, any = bad;
            MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
            if (any) {
                e++;
                break;
            }
        }
        /*
         * The previous epoch's verdict may be read now without waiting; if
         * it is in already, it must not change when waited for below.
         */
        sc_epoch_summary rep;
        if (rc == SC_OK && e > 0 && sc_epoch_report(ld, e - 1, &rep) == SC_OK &&
            rep.exactly_once.verified)
            early[e - 1] = rep.exactly_once.ok ? 1 : 2;
    }
    /* Every verdict, waited for at the end of the job. */
    for (uint64_t k = 0; k < ended && rc == SC_OK; k++) {
        sc_epoch_summary rep;
        if (sc_epoch_wait(ld, k, &rep) != SC_OK)
            continue;
        tally(&rep.exactly_once, &t, why, whylen);
        if (early[k] && early[k] != (rep.exactly_once.ok ? 1 : 2)) {
            t.bad = 1;
            snprintf(why, whylen, "epoch %llu: the verdict changed", (unsigned long long)k);
        }
    }
    if (rc != SC_OK)
        snprintf(why, whylen, "%s: %s", sc_status_name(rc), sc_loader_last_error(ld));
    /* What the failing rank saw must name the fault, not just any error. */
    const char *msg = sc_loader_last_error(ld);
    if (rc == SC_EPLAN && strstr(msg, "seed"))
        t.evidence |= 1 << 3;
    if (rc == SC_EPLAN && strstr(msg, "configured for"))
        t.evidence |= 1 << 4;
    if (rc == SC_EPLAN && strstr(msg, "fingerprint"))
        t.evidence |= 1 << 5;
    if (rc == SC_EOWNERSHIP)
        t.evidence |= 1 << 6;
    sc_loader_close(ld);
    sc__fault_set(NULL);

    /* Equal batch counts on every rank, every epoch ended everywhere. */
    uint64_t lo[8], hi[8];
    MPI_Allreduce(batches, lo, 8, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(batches, hi, 8, MPI_UINT64_T, MPI_MAX, comm);
    int uneven = 0;
    for (uint64_t k = 0; k < ended; k++)
        uneven |= lo[k] != hi[k];
    if (uneven && !faulty)
        snprintf(why, whylen, "batch counts differ between ranks");
    /* Errors can be local to one rank: the job fails if any rank failed. */
    int mine[4] = {rc != SC_OK, t.bad, !data_ok || uneven, t.evidence}, all[4];
    MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(&mine[3], &all[3], 1, MPI_INT, MPI_BOR, comm);
    if (all[2] && !faulty)
        return 0;
    int caught = all[0] || all[1];
    if (!faulty)
        return !caught && t.ok_epochs == j->epochs;
    static const struct { const char *fault; int bits; } named[] = {
        {"dup-shard", 1 << 1}, {"skip-shard", 1 << 2}, {"plan-seed", 1 << 3},
        {"world", 1 << 4}, {"fingerprint", 1 << 5}, {"own-plan", 1 << 6},
        {"stale-plan", 1 << 6 | 1 << 1 | 1 << 2}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(fault, named[i].fault))
            return caught && (all[3] & named[i].bits);
    return 0;
}

/* The job's shard sizes, one per line, for `shardcache verify --shard-sizes`. */
static void write_sizes(const job *j, const char *dir, char *path, size_t n)
{
    snprintf(path, n, "%s/job%llu/sizes.txt", dir, (unsigned long long)j->id);
    FILE *f = fopen(path, "w");
    for (uint64_t s = 0; f && s < j->nshards; s++)
        fprintf(f, "%llu\n", (unsigned long long)j->sizes[s]);
    if (f)
        fclose(f);
}

/* Every rank's record of a run, as rank 0 of the world holds them. */
typedef struct soak_recs {
    unsigned char *bytes; /* [n][SC_CHECKPOINT_MAX_BYTES] */
    size_t lens[8];
    uint32_t n;
} soak_recs;

/*
 * One run of a resume job on `comm` (audit trail in `audit`), from epoch 0
 * (`in` NULL) or from `in`'s records (rank 0's): killed (`kill`) right after its checkpoint after
 * `batch` batches of epoch `stop` (of its first epoch when resumed), its
 * records gathered to `out`; or (not `kill`) to the job's last epoch, each
 * verdict ok.  SC_OK or why not in `why`.
 */
static int soak_run(const job *j, MPI_Comm comm, const char *dir, const char *audit,
                    const soak_recs *in, int kill, uint64_t stop, uint64_t batch,
                    soak_recs *out, int *good, char *why, size_t whylen)
{
    sc_config c = job_config(j, dir);
    snprintf(c.audit_dir, sizeof c.audit_dir, "%s", audit);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    uint64_t e0 = 0;
    int n;
    MPI_Comm_size(comm, &n);
    c.batch_size = batch_on(j, (uint32_t)n);
    int rc = sc_loader_open(comm, &c, &ld, &err);
    if (rc == SC_OK && in) {
        const void *ptrs[8];
        for (uint32_t i = 0; i < in->n; i++)
            ptrs[i] = in->bytes + (size_t)i * SC_CHECKPOINT_MAX_BYTES;
        rc = sc_loader_resume(ld, ptrs, in->lens, world_rank == 0 ? (int)in->n : 0, &e0);
        stop = e0;
    }
    if (rc == SC_OK && in && e0 >= j->epochs) {
        /* The run before ended the job's last epoch: nothing is left, its records stand. */
        if (kill && world_rank == 0) {
            memcpy(out->bytes, in->bytes, (size_t)in->n * SC_CHECKPOINT_MAX_BYTES);
            memcpy(out->lens, in->lens, sizeof in->lens);
            out->n = in->n;
        }
        sc_loader_close(ld);
        return SC_OK;
    }
    uint64_t last = kill ? stop : j->epochs - 1;
    for (uint64_t e = e0; rc == SC_OK && e <= last; e++) {
        sc_batch b;
        rc = sc_epoch_begin(ld, e, NULL);
        for (uint64_t k = 0; rc == SC_OK && (e < last || !kill || k < batch) &&
                             (rc = sc_batch_next(ld, &b)) == SC_OK;
             k++) {
            *good &= batch_ok(ld, &b, why, whylen);
            sc_batch_release(ld, &b);
        }
        if (rc == SC_END_OF_EPOCH)
            rc = SC_OK;
    }
    for (uint64_t e = e0; !kill && rc == SC_OK && e < j->epochs; e++) {
        sc_epoch_summary rep;
        if ((rc = sc_epoch_wait(ld, e, &rep)) == SC_OK && !rep.exactly_once.ok) {
            *good = 0;
            snprintf(why, whylen, "run on %d ranks: epoch %llu: %s", n,
                     (unsigned long long)e, rep.exactly_once.detail);
        }
    }
    unsigned char mine[SC_CHECKPOINT_MAX_BYTES] = {0};
    unsigned long long len = 0, lens[8];
    size_t got = 0;
    if (kill && rc == SC_OK)
        rc = sc_loader_checkpoint(ld, mine, sizeof mine, &got);
    if (rc != SC_OK)
        snprintf(why, whylen, "run on %d ranks: %s: %s", n, sc_status_name(rc),
                 ld ? sc_loader_last_error(ld) : err.msg);
    len = got;
    if (kill) {
        MPI_Gather(&len, 1, MPI_UNSIGNED_LONG_LONG, lens, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
        MPI_Gather(mine, SC_CHECKPOINT_MAX_BYTES, MPI_BYTE, out->bytes, SC_CHECKPOINT_MAX_BYTES,
                   MPI_BYTE, 0, comm);
        for (int i = 0; world_rank == 0 && i < n; i++)
            out->lens[i] = (size_t)lens[i];
        out->n = (uint32_t)n;
    }
    sc_loader_close(ld); /* mid-epoch, as if killed */
    return rc;
}

/*
 * A job killed at a random point right after its checkpoint, then resumed
 * on a random number of ranks, for half of them killed again inside the
 * epoch it resumed and resumed once more on another: every verdict of the
 * last run is ok and the union of all audit trails is exactly once
 * (`shardcache verify --union`, on rank 0).  Called by every rank of the
 * world.
 */
static int run_resume_job(const job *j, const char *dir, const char *shardcache, char *why,
                          size_t whylen)
{
    soak_recs recs[2] = {{malloc(8 * SC_CHECKPOINT_MAX_BYTES), {0}, 0},
                         {malloc(8 * SC_CHECKPOINT_MAX_BYTES), {0}, 0}};
    int good = recs[0].bytes && recs[1].bytes, rc = SC_OK;
    int nruns = j->world3 ? 3 : 2;
    const uint32_t worlds[3] = {j->world, j->world2, j->world3};
    char audit[3][1200];
    snprintf(audit[0], sizeof audit[0], "%s/job%llu", dir, (unsigned long long)j->id);
    if (world_rank == 0)
        mkdir(audit[0], 0777); /* the audit directories' parent */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++)
        snprintf(audit[i], sizeof audit[i], "%s/job%llu/a%d", dir, (unsigned long long)j->id,
                 i + 1);
    for (int i = 0; i < nruns && rc == SC_OK; i++) {
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < (int)worlds[i] ? 0 : MPI_UNDEFINED,
                       world_rank, &comm);
        if (comm != MPI_COMM_NULL) {
            rc = soak_run(j, comm, dir, audit[i], i ? &recs[(i - 1) % 2] : NULL,
                          i + 1 < nruns, j->kill_epoch, i ? j->kill_batch2 : j->kill_batch,
                          &recs[i % 2], &good, why, whylen);
            MPI_Comm_free(&comm);
        }
        MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
    good &= rc == SC_OK;
    MPI_Allreduce(MPI_IN_PLACE, &good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (good && world_rank == 0 && shardcache) {
        char sizes[1200], cmd[8192];
        write_sizes(j, dir, sizes, sizeof sizes);
        snprintf(cmd, sizeof cmd,
                 "%s verify --union --audit-dir %s --audit-dir %s%s%s --shard-sizes %s > "
                 "%s.log 2>&1 && grep -q '^exactly-once: ok (%llu epochs' %s.log",
                 shardcache, audit[0], audit[1], nruns > 2 ? " --audit-dir " : "",
                 nruns > 2 ? audit[2] : "", sizes, audit[1], (unsigned long long)j->epochs,
                 audit[1]);
        if (system(cmd) != 0) {
            good = 0;
            snprintf(why, whylen, "shardcache verify --union disagrees: see %.400s.log",
                     audit[1]);
        }
    }
    free(recs[0].bytes);
    free(recs[1].bytes);
    return good;
}

/* The audit trail, checked by the CLI alone; 1 if it agrees. */
static int cli_verify(const job *j, const char *dir, const char *shardcache, char *why,
                      size_t whylen)
{
    char sizes[1200], cmd[8192], flags[1400];
    write_sizes(j, dir, sizes, sizeof sizes);
    FILE *f;
    /* The job's plan flags, also kept in the job's directory for tests. */
    snprintf(flags, sizeof flags,
             "--plan-seed %llu --shard-sizes %s --ranks %u --batch %llu --mode %s "
             "--exchange %g --remainder %s --partitions %llu",
             (unsigned long long)j->seed, sizes, j->world, (unsigned long long)j->batch,
             j->mode == SC_SHUFFLE_STICKY ? "sticky" : "global", j->q,
             j->remainder == SC_REMAINDER_PAD ? "pad" : "drop",
             (unsigned long long)j->partitions);
    snprintf(cmd, sizeof cmd, "%s/job%llu/flags", dir, (unsigned long long)j->id);
    if ((f = fopen(cmd, "w"))) {
        fprintf(f, "%s\n", flags);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd,
             "%s verify --audit-dir %s/job%llu %s > %s/job%llu/verify.log 2>&1 && grep -q "
             "'^exactly-once: ok (%llu epochs' %s/job%llu/verify.log",
             shardcache, dir, (unsigned long long)j->id, flags, dir, (unsigned long long)j->id,
             (unsigned long long)j->epochs, dir, (unsigned long long)j->id);
    if (system(cmd) == 0)
        return 1;
    snprintf(why, whylen, "shardcache verify disagrees: see %s/job%llu/verify.log", dir,
             (unsigned long long)j->id);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t jobs = 10, seed = 1;
    int force_world = 0;
    const char *dir = "/tmp", *fault = "", *verify = NULL;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
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
            force_world = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cache"))
            cache_root = argv[i + 1];
    }
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
#ifdef SC_TESTING
    /*
     * A rank keeps the device its thread chose, from job to job, as a real
     * trainer does: one per world rank, so that no job's ranks share one.
     */
    sc_error err = SC_ERROR_INIT;
    if (sc__devops_sim.bind(world_rank % 8, &err) != SC_OK) {
        fprintf(stderr, "soak_job: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    make_datasets(dir, seed);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(seed, 0, 42, 0));
    uint64_t passed = 0, failed = 0, parted = 0;
    for (uint64_t t = 0; t < jobs; t++) {
        job j = {0};
        j.id = t;
        make_job(&j, &r, size < 8 ? size : 8, force_world, fault);
        MPI_Comm comm;
        int good = 1;
        char why[600] = "";
        if (!strcmp(fault, "resume")) {
            good = run_resume_job(&j, dir, verify, why, sizeof why);
            comm = MPI_COMM_NULL;
        } else {
            MPI_Comm_split(MPI_COMM_WORLD, world_rank < (int)j.world ? 0 : MPI_UNDEFINED,
                           world_rank, &comm);
        }
        if (comm != MPI_COMM_NULL) {
            good = run_job(&j, comm, dir, fault, why, sizeof why);
            MPI_Comm_free(&comm);
        }
        if (good && world_rank == 0 && verify && (!*fault || !strcmp(fault, "skew")) &&
            strcmp(fault, "resume"))
            good = cli_verify(&j, dir, verify, why, sizeof why);
        int all = good;
        MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (world_rank == 0 && (!all || *why))
            printf("job %llu (%u ranks, %llu partitions, %llu shards, %s, %s, B=%llu, "
                   "window %llu, depth %llu, %d producers%s%s): %s %s\n",
                   (unsigned long long)t, j.world, (unsigned long long)j.partitions,
                   (unsigned long long)j.nshards,
                   j.mode == SC_SHUFFLE_STICKY ? "sticky" : "global",
                   j.remainder == SC_REMAINDER_PAD ? "pad" : "drop",
                   (unsigned long long)j.batch, (unsigned long long)j.window,
                   (unsigned long long)j.depth, j.producers, j.full ? ", full" : "",
                   j.cache_bytes ? ", capped cache" : "", all ? "ok" : "FAILED", why);
        all ? passed++ : failed++;
        parted += j.partitions > 0;
        free(j.sizes);
    }
    if (world_rank == 0)
        printf("(%llu of the jobs over SC_PARTITIONS)\n", (unsigned long long)parted);
    if (world_rank == 0)
        printf("%llu passed, %llu failed\n", (unsigned long long)passed,
               (unsigned long long)failed);
    for (int d = 0; d < NB; d++)
        free(b_sizes[d]);
    MPI_Finalize();
    return failed ? 1 : 0;
}
