/*
 * cmd_plan.c - `shardcache plan`: compute the epoch plans a job would use,
 * print what they cost and, with --check, prove their properties.
 *
 * Run alone it plans for --ranks simulated ranks.  Under mpirun it does
 * what a job does: rank 0 computes each epoch's plan and broadcasts it,
 * and every rank checks what it received against its own inputs.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char plan_usage[] =
    "usage: shardcache plan [options]\n"
    "\n"
    "Computes the plan of each epoch: which rank owns which shard, in what\n"
    "order, and how many batches every rank delivers.  Alone, it plans for\n"
    "--ranks simulated ranks; under mpirun/srun rank 0 plans and broadcasts\n"
    "and every rank checks the plan it receives.\n"
    "\n"
    "dataset:\n"
    "  --shards N          number of shards (default 1000)\n"
    "  --shard-size K      samples in every shard (default 1024)\n"
    "  --shard-sizes FILE  one sample count per shard, whitespace separated;\n"
    "                      replaces --shards and --shard-size\n"
    "plan:\n"
    "  --ranks R           ranks to plan for (default: the MPI world size;\n"
    "                      under mpirun it must equal the world size)\n"
    "  --epochs E          epochs to plan (default 3)\n"
    "  --seed S            plan seed (default 0)\n"
    "  --batch B           samples per batch (default 32)\n"
    "  --mode MODE         global: a fresh uniform assignment each epoch;\n"
    "                      sticky: keep owners, move --exchange of shards\n"
    "                      (default global)\n"
    "  --exchange Q        sticky: fraction of shards moved per epoch, [0,1]\n"
    "                      (default 0.1)\n"
    "  --remainder POLICY  drop: stop every rank at the smallest rank's batch\n"
    "                      count; pad: repeat samples up to the largest\n"
    "                      (default drop)\n"
    "output:\n"
    "  --check             verify every plan property; ends with the line\n"
    "                      'plan check: ok', or exits 1 naming what failed\n"
    "  --save FILE         write the last epoch's encoded plan to FILE\n"
    "  -h, --help          this text\n"
    "\n"
    "Each epoch prints: batches per rank, samples dropped or padded, the\n"
    "balance (fewest..most samples on one rank), shards moved since the\n"
    "previous epoch, the plan message's size and the time to compute it.\n";

typedef struct plan_opts {
    uint64_t nshards, shard_size, ranks, epochs, seed, batch;
    double exchange;
    sc_shuffle_mode mode;
    sc_remainder remainder;
    int check;
    const char *sizes_file, *save;
    const char *audit_dirs[8];
    int naudit, union_mode;
} plan_opts;

static int parse(int argc, char **argv, plan_opts *o, const char *usage)
{
    enum { SHARDS = 256, SHARD_SIZE, SIZES, RANKS, EPOCHS, SEED, BATCH, MODE,
           EXCHANGE, REMAINDER, CHECK, SAVE, AUDIT, UNION };
    static const struct option longopts[] = {
        {"shards", required_argument, 0, SHARDS},
        {"shard-size", required_argument, 0, SHARD_SIZE},
        {"shard-sizes", required_argument, 0, SIZES},
        {"ranks", required_argument, 0, RANKS},
        {"epochs", required_argument, 0, EPOCHS},
        {"seed", required_argument, 0, SEED},
        {"batch", required_argument, 0, BATCH},
        {"mode", required_argument, 0, MODE},
        {"exchange", required_argument, 0, EXCHANGE},
        {"remainder", required_argument, 0, REMAINDER},
        {"check", no_argument, 0, CHECK},
        {"save", required_argument, 0, SAVE},
        {"audit-dir", required_argument, 0, AUDIT},
        {"union", no_argument, 0, UNION},
        {"plan-seed", required_argument, 0, SEED},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, bad = 0;

    *o = (plan_opts){.nshards = 1000, .shard_size = 1024, .epochs = 3,
                     .batch = 32, .exchange = 0.1};
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case SHARDS: bad = cli_u64("--shards", optarg, 1, UINT32_MAX, &o->nshards); break;
        case SHARD_SIZE: bad = cli_u64("--shard-size", optarg, 1, UINT64_MAX, &o->shard_size); break;
        case SIZES: o->sizes_file = optarg; break;
        case RANKS: bad = cli_u64("--ranks", optarg, 1, UINT32_MAX, &o->ranks); break;
        case EPOCHS: bad = cli_u64("--epochs", optarg, 1, 1000000, &o->epochs); break;
        case SEED: bad = cli_u64("--seed", optarg, 0, UINT64_MAX, &o->seed); break;
        case BATCH: bad = cli_u64("--batch", optarg, 1, UINT64_MAX, &o->batch); break;
        case EXCHANGE: bad = cli_double("--exchange", optarg, 0.0, 1.0, &o->exchange); break;
        case CHECK: o->check = 1; break;
        case SAVE: o->save = optarg; break;
        case AUDIT:
            if (o->naudit == 8) {
                fprintf(stderr, "shardcache verify: at most 8 --audit-dir\n");
                bad = 2;
            } else {
                o->audit_dirs[o->naudit++] = optarg;
            }
            break;
        case UNION: o->union_mode = 1; break;
        case MODE: {
            /* Indexed by sc_shuffle_mode and sc_remainder values. */
            static const char *const modes[] = {"global", "sticky"};
            int m = 0;
            bad = cli_choice("--mode", optarg, modes, 2, &m);
            o->mode = (sc_shuffle_mode)m;
            break;
        }
        case REMAINDER: {
            static const char *const policies[] = {"drop", "pad"};
            int m = 0;
            bad = cli_choice("--remainder", optarg, policies, 2, &m);
            o->remainder = (sc_remainder)m;
            break;
        }
        case 'h': fputs(usage, stdout); return -1;
        default: bad = 2; break;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "shardcache plan: unexpected argument '%s'\n", argv[optind]);
        bad = 2;
    }
    if (bad)
        fprintf(stderr, "see `shardcache %s --help`\n", argv[0]);
    return bad;
}

/* The dataset's fingerprint here is its shard sizes: FNV-1a over them. */
static uint64_t sizes_fingerprint(const uint64_t *sizes, uint64_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ ((sizes[i] >> (8 * b)) & 0xff)) * UINT64_C(0x100000001b3);
    return h;
}

/* The shard sizes the flags describe (--shard-sizes, or --shards x --shard-size). */
static int load_sizes(const plan_opts *o, uint64_t **sizes, uint64_t *n)
{
    if (o->sizes_file)
        return cli_read_counts(o->sizes_file, sizes, n);
    *n = o->nshards;
    if (!(*sizes = malloc(sizeof **sizes * *n))) {
        fprintf(stderr, "shardcache: out of memory\n");
        return 2;
    }
    for (uint64_t i = 0; i < *n; i++)
        (*sizes)[i] = o->shard_size;
    return 0;
}

static sc_plan_params params_of(const plan_opts *o, const uint64_t *sizes, uint64_t n)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = n;
    p.world_size = (uint32_t)o->ranks;
    p.seed = o->seed;
    p.batch_size = o->batch;
    p.mode = o->mode;
    p.exchange = o->exchange;
    p.remainder = o->remainder;
    p.fingerprint = sizes_fingerprint(sizes, n);
    return p;
}

/* All ranks hold the same plan iff the max of hash and of ~hash agree. */
static int hashes_agree(uint64_t hash)
{
    uint64_t in[2] = {hash, ~hash}, out[2];
    MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return out[0] == hash && out[1] == ~hash;
}

static int save_plan(const char *path, const sc_plan *plan, sc_error *err)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = sc_plan_encode(plan, &buf, &len, err);
    if (rc != SC_OK)
        return rc;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot write the plan to '%s'", path);
        err->code = rc = SC_EIO;
        if (f)
            fclose(f);
    }
    free(buf);
    return rc;
}

static void print_epoch(const sc_plan_info *in, double ms, int first)
{
    double moved = 100.0 * (double)in->moved / (double)in->nshards;
    printf("epoch %" PRIu64 ": %" PRIu64 " batches/rank of %" PRIu64
           ", dropped %" PRIu64 ", padded %" PRIu64 ", balance %" PRIu64
           "..%" PRIu64 " samples/rank (spread %" PRIu64 "), ",
           in->epoch, in->batches_per_rank, in->batch_size, in->dropped,
           in->padded, in->min_rank_samples, in->max_rank_samples,
           in->max_rank_samples - in->min_rank_samples);
    if (first)
        printf("moved -, ");
    else
        printf("moved %" PRIu64 " shards (%.1f%%), ", in->moved, moved);
    printf("plan %.1f KiB, %.2f ms\n", (double)in->bytes / 1024.0, ms);
}

/*
 * The sticky exchange bound: q*N shards move, within 2% of N.  Balance
 * repair may move a few more; it never moves more than the bound allows.
 */
static int check_moved(const sc_plan_info *in, sc_error *err)
{
    double want = in->exchange * (double)in->nshards;
    double slack = 0.02 * (double)in->nshards;
    if (fabs((double)in->moved - want) <= (slack < 1.0 ? 1.0 : slack))
        return SC_OK;
    snprintf(err->msg, sizeof err->msg,
             "epoch %" PRIu64 ": %" PRIu64 " shards moved, the exchange "
             "fraction %g asks for %.0f +- 2%% of %" PRIu64,
             in->epoch, in->moved, in->exchange, want, in->nshards);
    return err->code = SC_EPLAN;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o;
    int rc = parse(argc, argv, &o, plan_usage);
    if (rc)
        return rc < 0 ? 0 : rc;

    int rank = 0, world = 1, status = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);

    uint64_t *sizes = NULL, n = 0;
    if (o.ranks == 0)
        o.ranks = (uint64_t)world;
    if (load_sizes(&o, &sizes, &n) || (world > 1 && o.ranks != (uint64_t)world)) {
        if (rank == 0 && sizes)
            fprintf(stderr, "shardcache plan: --ranks %" PRIu64 " but running on %d MPI ranks\n",
                    o.ranks, world);
        free(sizes);
        MPI_Finalize();
        return 2;
    }
    sc_plan_params p = params_of(&o, sizes, n);

    if (rank == 0)
        printf("plan: %" PRIu64 " shards on %" PRIu64 " ranks%s, seed %" PRIu64
               ", %s mode%s, batch %" PRIu64 ", remainder %s\n",
               n, o.ranks, world > 1 ? " (broadcast from rank 0)" : " (simulated)",
               o.seed, o.mode == SC_SHUFFLE_STICKY ? "sticky" : "global",
               o.mode == SC_SHUFFLE_STICKY ? (o.exchange > 0 ? "" : ", static") : "",
               o.batch, o.remainder == SC_REMAINDER_PAD ? "pad" : "drop");

    sc_plan *prev = NULL, *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    for (uint64_t e = 0; e < o.epochs && status == 0; e++) {
        p.epoch = e;
        double t0 = MPI_Wtime();
        rc = world > 1 ? sc_plan_share(MPI_COMM_WORLD, &p, prev, &plan, &err)
                       : sc_plan_create(&p, prev, &plan, &err);
        double ms = (MPI_Wtime() - t0) * 1e3;
        sc_plan_info in = {0};
        if (rc == SC_OK && o.check) {
            sc_plan_get_info(plan, &in);
            rc = sc_plan_check(plan, &p, prev, &err);
            if (rc == SC_OK && o.mode == SC_SHUFFLE_STICKY && prev)
                rc = check_moved(&in, &err);
        }
        if (rc != SC_OK)
            cli_report("plan", rank, world, &err);
        /* Everyone learns whether anyone failed, so that no rank runs ahead. */
        int bad = rc != SC_OK, anybad = bad;
        MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (anybad) {
            status = 1;
            break;
        }
        sc_plan_get_info(plan, &in);
        if (o.check && world > 1 && !hashes_agree(in.hash)) {
            if (rank == 0)
                fprintf(stderr, "shardcache plan: epoch %" PRIu64
                                ": ranks hold different plans\n", e);
            status = 1;
        }
        if (rank == 0)
            print_epoch(&in, ms, prev == NULL);
        sc_plan_free(prev);
        prev = plan;
        plan = NULL;
    }

    if (status == 0 && o.save && rank == 0 && save_plan(o.save, prev, &err) != SC_OK) {
        cli_report("plan", rank, 1, &err);
        status = 1;
    }
    if (status == 0 && o.check && rank == 0)
        printf("checked: %" PRIu64 " epochs, %" PRIu64 " shards, %" PRIu64
               " ranks%s\nplan check: ok\n",
               o.epochs, n, o.ranks, world > 1 ? ", same plan on every rank" : "");
    sc_plan_free(prev);
    free(sizes);
    MPI_Finalize();
    return status;
}

/* ---- shardcache verify ------------------------------------------------------ */

static const char verify_usage[] =
    "usage: shardcache verify --audit-dir DIR --plan-seed S [plan options]\n"
    "\n"
    "Checks exactly-once from a job's audit trail alone (SC_AUDIT_DIR: one\n"
    "audit-r<rank>.bin per rank): re-derives every epoch's plan from the flags,\n"
    "which must be the job's (--shards/--shard-size or --shard-sizes, --ranks,\n"
    "--batch, --mode, --exchange, --remainder), and checks that each sample was\n"
    "delivered once per epoch, on the rank that owned its shard, apart from the\n"
    "samples the remainder policy drops or pads.  Prints\n"
    "'exactly-once: ok (E epochs, N samples, 0 duplicated, 0 skipped)' or the\n"
    "offending sample ids, and exits 1 then.\n"
    "\n"
    "  --union   several trails of one job, given as several --audit-dir (a run\n"
    "            and its resumption from a checkpoint, possibly on another\n"
    "            number of ranks): checks that, epoch by epoch, every sample\n"
    "            was delivered or dropped by the remainder policy exactly once\n"
    "            across them all; ownership is not checked (a resumed epoch\n"
    "            has no plan).  Needs the dataset's shard flags for its size.\n";

typedef struct rec {
    uint64_t epoch, id;
    uint32_t rank;
} rec;

/*
 * Several trails of one job (a run, and its resumption from a checkpoint):
 * every sample of every epoch they cover delivered or dropped exactly once
 * across them all.
 */
static int verify_union(const rec *rs, uint64_t nrec, uint64_t nsamples, uint64_t *epochs,
                        uint64_t *dup, uint64_t *skip, uint64_t *delivered)
{
    uint64_t lo = UINT64_MAX, hi = 0, shown = 0;
    for (uint64_t i = 0; i < nrec; i++) {
        lo = rs[i].epoch < lo ? rs[i].epoch : lo;
        hi = rs[i].epoch + 1 > hi ? rs[i].epoch + 1 : hi;
    }
    uint32_t *count = calloc(nsamples + 1, sizeof *count);
    if (!count)
        return 2;
    *epochs = 0;
    for (uint64_t e = lo; e < hi; e++) {
        memset(count, 0, sizeof *count * nsamples);
        int seen = 0;
        for (uint64_t i = 0; i < nrec; i++) {
            uint64_t id = rs[i].id & ~SC_AUDIT_FLAGS;
            if (rs[i].epoch != e || (rs[i].id & SC_AUDIT_PADDED))
                continue;
            seen = 1;
            if (id >= nsamples) {
                if (shown++ < 10)
                    printf("epoch %" PRIu64 ": sample %" PRIu64 " is outside the dataset\n", e, id);
                (*dup)++;
                continue;
            }
            count[id]++;
            *delivered += !(rs[i].id & SC_AUDIT_DROPPED);
        }
        if (!seen)
            continue;
        (*epochs)++;
        for (uint64_t id = 0; id < nsamples; id++) {
            if (count[id] == 1)
                continue;
            if (count[id])
                *dup += count[id] - 1;
            else
                (*skip)++;
            if (shown++ < 10)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " %s\n", e, id,
                       count[id] ? "delivered more than once" : "not delivered");
        }
    }
    free(count);
    return *dup || *skip;
}

/* Reads every rank's audit file; *world from their headers. */
static int read_audit(const char *dir, rec **out, uint64_t *nrec, uint64_t *world)
{
    uint64_t cap = 0, n = 0;
    rec *all = NULL;
    *world = 0;
    for (uint64_t r = 0;; r++) {
        char path[4200];
        uint64_t head[3], pair[2];
        snprintf(path, sizeof path, "%s/audit-r%" PRIu64 ".bin", dir, r);
        FILE *f = fopen(path, "rb");
        if (!f) {
            if (r == 0) {
                fprintf(stderr, "shardcache verify: no audit file '%s'\n", path);
                return 2;
            }
            if (r != *world) {
                fprintf(stderr, "shardcache verify: '%s' is missing (the job had %" PRIu64
                                " ranks)\n", path, *world);
                return 1;
            }
            break;
        }
        if (fread(head, sizeof head, 1, f) != 1 || head[0] != SC_AUDIT_MAGIC ||
            head[1] != r || (r > 0 && head[2] != *world)) {
            fprintf(stderr, "shardcache verify: '%s' is not rank %" PRIu64 "'s audit file\n",
                    path, r);
            fclose(f);
            free(all);
            return 1;
        }
        *world = head[2];
        while (fread(pair, sizeof pair, 1, f) == 1) {
            if (n == cap) {
                rec *g = realloc(all, sizeof *g * (cap = cap ? 2 * cap : 4096));
                if (!g) {
                    fclose(f);
                    free(all);
                    return 2;
                }
                all = g;
            }
            all[n++] = (rec){pair[0], pair[1], (uint32_t)r};
        }
        fclose(f);
    }
    *out = all;
    *nrec = n;
    return 0;
}

/* Checks one epoch's records against its plan; prints offenders; 0 if ok. */
static int verify_epoch(const sc_plan *plan, const uint64_t *first, uint64_t nshards,
                        const rec *rs, uint64_t nrec, uint32_t *count, uint64_t *dup,
                        uint64_t *skip, uint64_t *delivered)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    uint64_t nsamples = first[nshards], shown = 0, bad = 0;
    memset(count, 0, sizeof *count * nsamples);
    for (uint64_t i = 0; i < nrec; i++) {
        if (rs[i].epoch != in.epoch)
            continue;
        if (rs[i].id & SC_AUDIT_DROPPED)
            continue; /* a policy drop: the plan says which are allowed, below */
        uint64_t id = rs[i].id & ~SC_AUDIT_FLAGS;
        int padded = !!(rs[i].id & SC_AUDIT_PADDED);
        uint32_t owner = UINT32_MAX;
        uint64_t shard;
        if (sc_shard_of(first, nshards, id, &shard) == SC_OK)
            sc_plan_owner(plan, shard, &owner);
        if (owner != rs[i].rank) {
            if (shown++ < 10)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " consumed on rank %u, owned by "
                       "rank %d\n", in.epoch, id, rs[i].rank, owner == UINT32_MAX ? -1 : (int)owner);
            bad++;
            continue;
        }
        if (!padded) {
            count[id]++;
            (*delivered)++;
        }
    }
    /* Each rank may leave out exactly what the drop policy drops. */
    for (uint32_t r = 0; r < in.world_size; r++) {
        const uint32_t *mine;
        uint64_t n, samples, zeros = 0;
        sc_plan_rank(plan, r, &mine, &n, &samples);
        uint64_t allowed = in.remainder == SC_REMAINDER_DROP
                               ? samples - in.batches_per_rank * in.batch_size : 0;
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t id = first[mine[i]]; id < first[mine[i] + 1]; id++) {
                if (count[id] > 1) {
                    *dup += count[id] - 1;
                    if (shown++ < 10)
                        printf("epoch %" PRIu64 ": sample %" PRIu64 " delivered %u times\n",
                               in.epoch, id, count[id]);
                }
                zeros += count[id] == 0;
            }
        if (zeros > allowed) {
            *skip += zeros - allowed;
            for (uint64_t i = 0; i < n && shown < 10; i++)
                for (uint64_t id = first[mine[i]]; id < first[mine[i] + 1] && shown < 10; id++)
                    if (!count[id] && zeros > allowed)
                        printf("epoch %" PRIu64 ": sample %" PRIu64 " (rank %u) not delivered\n",
                               in.epoch, id, r), shown++;
        }
    }
    return bad || *dup || *skip;
}

int cmd_verify(int argc, char **argv)
{
    plan_opts o;
    int rc = parse(argc, argv, &o, verify_usage);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.naudit || (o.naudit > 1 && !o.union_mode)) {
        fprintf(stderr, "shardcache verify: %s\n",
                o.naudit ? "several --audit-dir need --union" : "--audit-dir is required");
        return 2;
    }
    rec *rs = NULL;
    uint64_t nrec = 0, world = 0, *sizes = NULL, n = 0;
    for (int d = 0; d < o.naudit; d++) {
        rec *part = NULL;
        uint64_t np = 0;
        if ((rc = read_audit(o.audit_dirs[d], &part, &np, &world))) {
            free(rs);
            return rc;
        }
        rec *all = realloc(rs, sizeof *all * (nrec + np + 1));
        if (!all) {
            free(part);
            free(rs);
            return 2;
        }
        rs = all;
        if (np)
            memcpy(rs + nrec, part, sizeof *part * np);
        nrec += np;
        free(part);
    }
    if (!o.union_mode && o.ranks && o.ranks != world) {
        fprintf(stderr, "shardcache verify: --ranks %" PRIu64 " but the audit trail has %" PRIu64
                        " ranks\n", o.ranks, world);
        free(rs);
        return 1;
    }
    if (!o.union_mode)
        o.ranks = world;
    if ((rc = load_sizes(&o, &sizes, &n))) {
        free(rs);
        return rc;
    }
    if (o.union_mode) {
        uint64_t total = 0, epochs = 0, dup = 0, skip = 0, delivered = 0;
        for (uint64_t k = 0; k < n; k++)
            total += sizes[k];
        rc = verify_union(rs, nrec, total, &epochs, &dup, &skip, &delivered);
        if (rc < 2)
            printf("exactly-once: %s (%" PRIu64 " epochs, %" PRIu64 " samples, %" PRIu64
                   " duplicated, %" PRIu64 " skipped; %d trails)\n",
                   rc ? "FAILED" : "ok", epochs, delivered, dup, skip, o.naudit);
        free(sizes);
        free(rs);
        return rc;
    }
    uint64_t *first = malloc(sizeof *first * (n + 1)), epochs = 0;
    first[0] = 0;
    for (uint64_t k = 0; k < n; k++)
        first[k + 1] = first[k] + sizes[k];
    for (uint64_t i = 0; i < nrec; i++)
        epochs = rs[i].epoch + 1 > epochs ? rs[i].epoch + 1 : epochs;
    uint32_t *count = malloc(sizeof *count * (first[n] + 1));
    sc_plan_params p = params_of(&o, sizes, n);
    sc_plan *prev = NULL;
    uint64_t dup = 0, skip = 0, delivered = 0;
    int bad = 0;
    sc_error err = SC_ERROR_INIT;
    for (uint64_t e = 0; e < epochs && rc == 0; e++) {
        sc_plan *plan = NULL;
        p.epoch = e;
        if (sc_plan_create(&p, prev, &plan, &err) != SC_OK) {
            cli_report("verify", 0, 1, &err);
            rc = 1;
            break;
        }
        bad |= verify_epoch(plan, first, n, rs, nrec, count, &dup, &skip, &delivered);
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    if (rc == 0)
        printf("exactly-once: %s (%" PRIu64 " epochs, %" PRIu64 " samples, %" PRIu64
               " duplicated, %" PRIu64 " skipped)\n",
               bad ? "FAILED" : "ok", epochs, delivered, dup, skip);
    free(count);
    free(first);
    free(sizes);
    free(rs);
    return rc ? rc : bad;
}
