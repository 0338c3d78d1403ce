/*
 * cmd_plan.c - `shardcache plan`: compute the epoch plans a job would use,
 * print what they cost and, with --check, check their properties.
 *
 * Run alone it plans for --ranks simulated ranks.  Under mpirun it does
 * what a job does: rank 0 computes each epoch's plan and broadcasts it,
 * and every rank checks what it received against its own inputs.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agree.h"
#include "cli.h"
#include "config.h"

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
    "  --shard-size K      samples in every shard (default 1024; with --samples\n"
    "                      or --labels auto, SC_SHARD_SIZE's rule)\n"
    "  --samples N         N samples cut into shards of --shard-size, the last\n"
    "                      short, as a layout A file is; replaces --shards\n"
    "  --shard-sizes FILE  one sample count per shard, whitespace separated;\n"
    "                      replaces --shards and --shard-size\n"
    "  --source PATH       the job's dataset (a file, a directory or a list of\n"
    "                      files): its shards as the job's open makes them\n"
    "                      (layout B's grouped and cut files too), with\n"
    "                      --shard-size (default SC_SHARD_SIZE) and the SC_*\n"
    "                      settings that shape it (SC_FIELDS, SC_SAMPLE_AXIS)\n"
    "                      as the job's; replaces --shards, --samples and\n"
    "                      --shard-sizes\n"
    "plan:\n"
    "  --ranks R           ranks to plan for (default: the MPI world size;\n"
    "                      under mpirun it must equal the world size)\n"
    "  --epochs E          epochs to plan (default 3)\n"
    "  --seed S            plan seed (default 0)\n"
    "  --batch B           samples per batch (default 32)\n"
    "  --mode MODE         global: a fresh random assignment each epoch;\n"
    "                      sticky: keep owners, move --exchange of shards\n"
    "                      (default global)\n"
    "  --exchange Q        sticky: fraction of shards moved per epoch, [0,1]\n"
    "                      (default 0.1)\n"
    "  --remainder POLICY  drop: leave out fewer than ranks x batch samples an\n"
    "                      epoch; pad: repeat fewer than that (default drop)\n"
    "  --partitions P      plan over P partitions, rank r serving P/R of them,\n"
    "                      so that the global batches are the same on any\n"
    "                      world size dividing P (default: SC_PARTITIONS, 0:\n"
    "                      over the ranks); R must divide P, P divide R x B\n"
    "output:\n"
    "  --check             verify every plan property, and sample by sample\n"
    "                      that each is served by one rank; ends with the\n"
    "                      line 'plan check: ok', or exits 1 naming what failed\n"
    "  --list-cuts         after each epoch, every cut: a sample range of a\n"
    "                      shard served by another unit than its home (with\n"
    "                      partitions, possibly another partition of one rank)\n"
    "  --save FILE         write the last epoch's encoded plan to FILE\n"
    "  --quality           after each epoch, how well its order mixes the\n"
    "                      dataset beside a uniform random permutation of it:\n"
    "                      distinct shards a batch, how far samples move\n"
    "                      (docs/shuffle.md)\n"
    "  --labels FILE:FIELD with --quality: the dataset (layout A, --shard-size,\n"
    "                      default auto)\n"
    "                      and its integer label field; adds the label\n"
    "                      entropy and classes of a batch\n"
    "  --window W          shuffle window in samples, or auto (default: as\n"
    "                      SC_SHUFFLE_WINDOW; auto is half of SC_STREAM_BYTES)\n"
    "  --sample-bytes S    a sample's bytes, for an auto window without\n"
    "                      --labels, and an auto shard size of --samples\n"
    "  -h, --help          this text\n"
    "\n"
    "What no epoch could plan (more ranks than shards, too few samples for a\n"
    "global batch with drop, partitions that do not divide) is refused first,\n"
    "as a job's open does.  Each epoch prints: batches per rank, samples\n"
    "dropped or padded, the balance (fewest..most samples on one rank), shards\n"
    "moved since the previous epoch, the cuts, the plan message's size and\n"
    "the time to compute it.\n";

/* getopt_long codes of the long flags, above every short option character. */
enum { SHARDS = 256, SHARD_SIZE, SIZES, RANKS, EPOCHS, SEED, BATCH, MODE,
       EXCHANGE, REMAINDER, CHECK, SAVE, AUDIT, UNION, QUALITY, LABELS, WINDOW,
       SAMPLE_BYTES, SAMPLES, PARTITIONS, LIST_CUTS, SOURCE };

/* Applies one flag other than --help to *o; 0, or 2 after saying what is wrong. */
static int cmd_plan_parse_flag(int c, plan_opts *o)
{
    int bad = 0;
    switch (c) {
    case SHARDS: bad = cli_u64("--shards", optarg, 1, UINT32_MAX, &o->nshards); break;
    case SHARD_SIZE:
        if (!strcmp(optarg, "auto"))
            o->shard_size = SC_SHARD_AUTO;
        else
            bad = cli_u64("--shard-size", optarg, 1, UINT64_MAX - 1, &o->shard_size);
        break;
    case SAMPLES: bad = cli_u64("--samples", optarg, 1, UINT64_MAX, &o->samples); break;
    case SIZES: o->sizes_file = optarg; break;
    case SOURCE: o->source = optarg; break;
    case RANKS: bad = cli_u64("--ranks", optarg, 1, UINT32_MAX, &o->ranks); break;
    case EPOCHS: bad = cli_u64("--epochs", optarg, 1, 1000000, &o->epochs); break;
    case SEED: bad = cli_u64("--seed", optarg, 0, UINT64_MAX, &o->seed); break;
    case BATCH: bad = cli_u64("--batch", optarg, 1, UINT64_MAX, &o->batch); break;
    case EXCHANGE: bad = cli_double("--exchange", optarg, 0.0, 1.0, &o->exchange); break;
    case CHECK: o->check = 1; break;
    case LIST_CUTS: o->list_cuts = 1; break;
    case PARTITIONS: o->partitions_arg = optarg; break;
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
    case QUALITY: o->quality = 1; break;
    case LABELS: o->labels = optarg; break;
    case WINDOW: o->window_arg = optarg; break;
    case SAMPLE_BYTES:
        bad = cli_u64("--sample-bytes", optarg, 1, UINT64_MAX, &o->sample_bytes);
        break;
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
    default: bad = 2; break;
    }
    return bad;
}

/*
 * The partitions: --partitions, else SC_PARTITIONS, parsed as a job's
 * settings are (one parser, the config's); 0, or 2 after saying why.
 */
static int cmd_plan_partitions(plan_opts *o)
{
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    if (cli_config(&cfg))
        return 2;
    if (o->partitions_arg && sc_config_set(&cfg, "SC_PARTITIONS", o->partitions_arg, &err)) {
        fprintf(stderr, "shardcache: --partitions: %s\n", err.msg);
        return 2;
    }
    o->partitions = cfg.partitions;
    return 0;
}

int cmd_plan_parse(int argc, char **argv, plan_opts *o, const char *usage)
{
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
        {"quality", no_argument, 0, QUALITY},
        {"labels", required_argument, 0, LABELS},
        {"window", required_argument, 0, WINDOW},
        {"sample-bytes", required_argument, 0, SAMPLE_BYTES},
        {"samples", required_argument, 0, SAMPLES},
        {"plan-seed", required_argument, 0, SEED},
        {"partitions", required_argument, 0, PARTITIONS},
        {"list-cuts", no_argument, 0, LIST_CUTS},
        {"source", required_argument, 0, SOURCE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, bad = 0;

    *o = (plan_opts){.nshards = 1000, .shard_size = 0 /* not given */, .epochs = 3,
                     .batch = 32, .exchange = 0.1};
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        bad = cmd_plan_parse_flag(c, o);
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "shardcache plan: unexpected argument '%s'\n", argv[optind]);
        bad = 2;
    }
    if (!bad && o->source && (o->samples || o->sizes_file || o->labels)) {
        fprintf(stderr, "shardcache %s: --source gives the shards: --samples, --shard-sizes "
                "and --labels would give others\n", argv[0]);
        bad = 2;
    }
    if (!bad)
        bad = cmd_plan_partitions(o);
    if (bad)
        fprintf(stderr, "see `shardcache %s --help`\n", argv[0]);
    return bad;
}

/* The dataset's fingerprint here is its shard sizes: FNV-1a over them. */
static uint64_t cmd_plan_sizes_fingerprint(const uint64_t *sizes, uint64_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ ((sizes[i] >> (8 * b)) & 0xff)) * UINT64_C(0x100000001b3);
    return h;
}


/*
 * --source: the shard sizes of a job over that dataset, opened as the job
 * opens it (SC_* settings, --shard-size over SC_SHARD_SIZE), so that
 * layout B's grouping and cutting of files need not be redone by hand.
 * Rank 0 opens it and every rank takes its answer (under mpirun one scan,
 * and no rank left waiting where rank 0 fails); MPI is up (verify starts
 * it for this).
 */
static int cmd_plan_source_sizes(const plan_opts *o, uint64_t **sizes, uint64_t *n)
{
    int rank = 0, rc = SC_OK;
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    sc_dataset *ds = NULL;
    const uint64_t *got = NULL;
    sc_dataset_info di = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        rc = sc_config_init(&cfg, &err); /* SC_*, as the job's */
        if (rc == SC_OK && o->shard_size) /* else SC_SHARD_SIZE's */
            cfg.shard_size = o->shard_size;
        if (rc == SC_OK)
            rc = sc_config_set(&cfg, "SC_SOURCE", o->source, &err);
        if (rc == SC_OK)
            rc = sc_dataset_open(MPI_COMM_SELF, &cfg, &ds, &err);
        if (rc == SC_OK) {
            sc_dataset_get_info(ds, &di);
            sc_dataset_shard_sizes(ds, &got);
        }
    }
    uint64_t head[2] = {(uint64_t)rc, di.nshards};
    MPI_Bcast(head, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    *n = head[1];
    *sizes = head[0] == SC_OK && *n <= INT_MAX ? malloc(sizeof **sizes * (*n ? *n : 1)) : NULL;
    if (*sizes && rank == 0)
        memcpy(*sizes, got, sizeof **sizes * *n);
    int ok = *sizes != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok)
        MPI_Bcast(*sizes, (int)*n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    sc_dataset_close(ds);
    if (!ok && rank == 0)
        fprintf(stderr, "shardcache: --source: %s\n", head[0] != SC_OK ? err.msg
                        : *n > INT_MAX ? "more shards than a broadcast carries" : "out of memory");
    if (!ok)
        free(*sizes), *sizes = NULL;
    return ok ? 0 : 2;
}

/*
 * The shard sizes the flags describe (--source, --shard-sizes, --samples,
 * or --shards x --shard-size).
 */
int cmd_plan_load_sizes(const plan_opts *o, uint64_t **sizes, uint64_t *n)
{
    if (o->source)
        return cmd_plan_source_sizes(o, sizes, n);
    if (o->sizes_file)
        return cli_read_counts(o->sizes_file, sizes, n);
    uint64_t k = cli_shard_size(o);
    if (k == SC_SHARD_AUTO && !o->labels) {
        fprintf(stderr, "shardcache: --shard-size auto takes --samples N (or --labels)\n");
        return 2;
    }
    k = k == SC_SHARD_AUTO ? 1 : k; /* --labels: the dataset's, which replace these */
    *n = o->samples ? o->samples / k + (o->samples % k != 0) : o->nshards;
    if (*n > UINT32_MAX) { /* a plan's limit; also keeps the size below from wrapping */
        fprintf(stderr, "shardcache: %llu shards: a plan holds at most %llu (a larger "
                "--shard-size?)\n", (unsigned long long)*n, (unsigned long long)UINT32_MAX);
        return 2;
    }
    if (!(*sizes = malloc(sizeof **sizes * (*n ? *n : 1)))) {
        fprintf(stderr, "shardcache: out of memory\n");
        return 2;
    }
    for (uint64_t i = 0; i < *n; i++)
        (*sizes)[i] = o->samples && o->samples - i * k < k ? o->samples - i * k : k;
    return 0;
}

sc_plan_params cmd_plan_params(const plan_opts *o, const uint64_t *sizes, uint64_t n)
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
    p.partitions = o->partitions;
    p.fingerprint = cmd_plan_sizes_fingerprint(sizes, n);
    return p;
}

/* All ranks hold the same plan iff the max of hash and of ~hash agree. */
static int cmd_plan_hashes_agree(uint64_t hash)
{
    uint64_t in[2] = {hash, ~hash}, out[2];
    MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return out[0] == hash && out[1] == ~hash;
}

static int cmd_plan_save(const char *path, const sc_plan *plan, sc_error *err)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = sc_plan_encode(plan, &buf, &len, err);
    if (rc != SC_OK)
        return rc;
    int fd = -1;
    rc = sc_output_open(path, &fd, err);
    FILE *f = rc == SC_OK ? fdopen(fd, "wb") : NULL;
    if (rc == SC_OK && !f)
        close(fd);
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0) /* closed whatever it returns */
        ok = 0;
    if (rc == SC_OK && !ok) {
        snprintf(err->msg, sizeof err->msg, "cannot write the plan to '%s'", path);
        err->code = rc = SC_EIO;
    }
    free(buf);
    return rc;
}

static void cmd_plan_print_epoch(const sc_plan_info *in, double ms, int first)
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
    printf("cuts %" PRIu64 ", plan %.1f KiB, %.2f ms\n", in->cuts, (double)in->bytes / 1024.0,
           ms);
}

/* --list-cuts: one line a cut, its samples counted from the shard's first. */
static void cmd_plan_print_cuts(const sc_plan *plan, const sc_plan_info *in)
{
    for (uint64_t i = 0; i < in->cuts; i++) {
        sc_plan_cut c;
        sc_plan_get_cut(plan, i, &c);
        printf("  cut %" PRIu64 ": shard %" PRIu64 " [%" PRIu64 ", %" PRIu64 ") from rank %u "
               "-> rank %u", i, c.shard, c.begin, c.end, c.from, c.to);
        if (in->partitions)
            printf(" (partition %u -> %u)", c.from_unit, c.to_unit);
        printf("\n");
    }
}

/*
 * The sticky exchange bound: q*N shards move, within 2% of N.  Balance
 * repair may move a few more; it never moves more than the bound allows.
 */
static int cmd_plan_check_moved(const sc_plan_info *in, sc_error *err)
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

static int cmd_plan_cmp_cut(const void *a, const void *b)
{
    const sc_plan_cut *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/*
 * The rank that must serve sample `off` of shard s, read from the plan's
 * lists: the cut's that holds it (cuts sorted by shard and begin, *j
 * walking them as s and off grow), else the shard's home.
 */
static uint32_t cmd_plan_expected(const sc_plan *plan, const sc_plan_cut *cuts, uint64_t ncuts,
                                  uint64_t *j, uint64_t s, uint64_t off)
{
    while (*j < ncuts && (cuts[*j].shard < s || (cuts[*j].shard == s && cuts[*j].end <= off)))
        (*j)++;
    if (*j < ncuts && cuts[*j].shard == s && cuts[*j].begin <= off)
        return cuts[*j].to;
    uint32_t home = 0;
    sc_plan_owner(plan, s, &home);
    return home;
}

/* Counts each rank's samples by sc_plan_sample_owner, which must agree with the lists. */
static int cmd_plan_count_owners(const sc_plan *plan, const uint64_t *first, uint64_t nshards,
                                 const sc_plan_cut *cuts, uint64_t *count, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    uint64_t j = 0;
    for (uint64_t s = 0; s < nshards; s++)
        for (uint64_t id = first[s]; id < first[s + 1]; id++) {
            uint32_t want = cmd_plan_expected(plan, cuts, in.cuts, &j, s, id - first[s]);
            uint32_t got = UINT32_MAX;
            if (sc_plan_sample_owner(plan, first, id, &got) != SC_OK || got != want) {
                snprintf(err->msg, sizeof err->msg, "epoch %" PRIu64 ": sample %" PRIu64
                         " (shard %" PRIu64 ") is served by rank %d, the plan's lists and "
                         "cuts say rank %u", in.epoch, id, s, got == UINT32_MAX ? -1 : (int)got,
                         want);
                return err->code = SC_EPLAN;
            }
            count[got]++;
        }
    return SC_OK;
}

/* Every rank serves, sample by sample, what the plan says it does. */
static int cmd_plan_compare_counts(const sc_plan *plan, const uint64_t *count, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    for (uint32_t r = 0; r < in.world_size; r++) {
        uint64_t samples = 0;
        sc_plan_rank(plan, r, NULL, NULL, &samples);
        if (count[r] != samples) {
            snprintf(err->msg, sizeof err->msg, "epoch %" PRIu64 ": rank %u serves %" PRIu64
                     " samples counted one by one, the plan says %" PRIu64,
                     in.epoch, r, count[r], samples);
            return err->code = SC_EPLAN;
        }
    }
    return SC_OK;
}

/*
 * --check, sample by sample: sc_plan_sample_owner names one rank for every
 * sample id; it must be the rank a cut hands the sample to, else its
 * shard's home, and each rank must count the samples the plan says it
 * serves, so that every sample is served by exactly one rank.  *served
 * adds the samples counted.
 */
static int cmd_plan_check_samples(const sc_plan *plan, const sc_plan_params *p,
                                  uint64_t *served, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    uint64_t *first = malloc(sizeof *first * (p->nshards + 1));
    uint64_t *count = calloc(in.world_size, sizeof *count);
    sc_plan_cut *cuts = malloc(sizeof *cuts * (in.cuts + 1));
    int rc = first && count && cuts ? SC_OK : SC_ENOMEM;
    if (rc != SC_OK) {
        snprintf(err->msg, sizeof err->msg, "no memory to check %" PRIu64 " shards", p->nshards);
        err->code = rc;
    }
    for (uint64_t k = 0; rc == SC_OK && k <= p->nshards; k++)
        first[k] = k ? first[k - 1] + p->shard_sizes[k - 1] : 0;
    for (uint64_t i = 0; rc == SC_OK && i < in.cuts; i++)
        sc_plan_get_cut(plan, i, &cuts[i]);
    if (rc == SC_OK) {
        qsort(cuts, in.cuts, sizeof *cuts, cmd_plan_cmp_cut);
        rc = cmd_plan_count_owners(plan, first, p->nshards, cuts, count, err);
    }
    if (rc == SC_OK && (rc = cmd_plan_compare_counts(plan, count, err)) == SC_OK)
        *served += first[p->nshards];
    free(first);
    free(count);
    free(cuts);
    return rc;
}

/*
 * The shard sizes, with --ranks defaulting to the world size; 2 if they
 * cannot be read or --ranks disagrees with the MPI world.
 */
static int cmd_plan_load(plan_opts *o, int rank, int world, uint64_t **sizes, uint64_t *n)
{
    if (o->ranks == 0)
        o->ranks = (uint64_t)world;
    if (cmd_plan_load_sizes(o, sizes, n) || (world > 1 && o->ranks != (uint64_t)world)) {
        if (rank == 0 && *sizes)
            fprintf(stderr, "shardcache plan: --ranks %" PRIu64 " but running on %d MPI ranks\n",
                    o->ranks, world);
        free(*sizes);
        *sizes = NULL;
        return 2;
    }
    return 0;
}

static void cmd_plan_print_header(const plan_opts *o, uint64_t n, int world)
{
    uint64_t k = cli_shard_size(o);
    if (o->source)
        printf("dataset: '%s', its shards as a job's open makes them\n", o->source);
    else if (o->samples)
        printf("dataset: %" PRIu64 " samples in shards of %" PRIu64 "%s\n", o->samples, k,
               o->shard_size && o->shard_size != SC_SHARD_AUTO ? "" : " (auto)");
    printf("plan: %" PRIu64 " shards on %" PRIu64 " ranks%s, seed %" PRIu64
           ", %s mode%s, batch %" PRIu64 ", remainder %s\n",
           n, o->ranks, world > 1 ? " (broadcast from rank 0)" : " (simulated)",
           o->seed, o->mode == SC_SHUFFLE_STICKY ? "sticky" : "global",
           o->mode == SC_SHUFFLE_STICKY ? (o->exchange > 0 ? "" : ", static") : "",
           o->batch, o->remainder == SC_REMAINDER_PAD ? "pad" : "drop");
    uint64_t G = 0, P = o->partitions;
    /* What does not divide is refused next, in the planner's words. */
    if (P && P % o->ranks == 0 && !__builtin_mul_overflow(o->ranks, o->batch, &G) && G % P == 0)
        printf("partitions: %" PRIu64 ", %" PRIu64 " a rank, each giving %" PRIu64
               " samples to every global batch of %" PRIu64 "\n", P, P / o->ranks, G / P, G);
}

/* Computes (under MPI: shares) one epoch's plan, timed, and checks it if asked. */
static int cmd_plan_make(const plan_opts *o, const sc_plan_params *p, const sc_plan *prev,
                         int world, sc_plan **plan, double *ms, uint64_t *served,
                         sc_error *err)
{
    double t0 = MPI_Wtime();
    int rc = world > 1 ? sc_plan_share(MPI_COMM_WORLD, p, prev, plan, err)
                       : sc_plan_create(p, prev, plan, err);
    *ms = (MPI_Wtime() - t0) * 1e3;
    if (rc == SC_OK && o->check) {
        sc_plan_info in = {0};
        sc_plan_get_info(*plan, &in);
        rc = sc_plan_check(*plan, p, prev, err);
        if (rc == SC_OK && o->mode == SC_SHUFFLE_STICKY && prev)
            rc = cmd_plan_check_moved(&in, err);
        if (rc == SC_OK)
            rc = cmd_plan_check_samples(*plan, p, served, err);
    }
    return rc;
}

/*
 * Plans, checks and prints every epoch; *last is the last epoch's plan.
 * Returns the exit status: 1 as soon as any rank failed.
 */
static int cmd_plan_epochs(const plan_opts *o, sc_plan_params *p, const cmd_labels *l,
                           int rank, int world, sc_plan **last, uint64_t *served,
                           sc_error *err)
{
    sc_plan *prev = NULL, *plan = NULL;
    int status = 0;
    for (uint64_t e = 0; e < o->epochs && status == 0; e++) {
        double ms;
        p->epoch = e;
        int rc = cmd_plan_make(o, p, prev, world, &plan, &ms, served, err);
        if (rc != SC_OK)
            cli_report("plan", rank, world, err);
        /* Everyone learns whether anyone failed, so that no rank runs ahead. */
        int all_ok = 0;
        sc__agree_min(MPI_COMM_WORLD, rc == SC_OK, &all_ok);
        if (!all_ok) {
            status = 1;
            break;
        }
        sc_plan_info in = {0};
        sc_plan_get_info(plan, &in);
        if (o->check && world > 1 && !cmd_plan_hashes_agree(in.hash)) {
            if (rank == 0)
                fprintf(stderr, "shardcache plan: epoch %" PRIu64
                                ": ranks hold different plans\n", e);
            status = 1;
        }
        if (rank == 0)
            cmd_plan_print_epoch(&in, ms, prev == NULL);
        if (rank == 0 && o->list_cuts)
            cmd_plan_print_cuts(plan, &in);
        if (rank == 0 && o->quality &&
            cmd_quality_print(o, plan, p->shard_sizes, p->nshards, l, err) != SC_OK) {
            cli_report("plan --quality", rank, 1, err);
            status = 1;
        }
        sc_plan_free(prev);
        prev = plan;
        plan = NULL;
    }
    *last = prev;
    return status;
}

/* The shuffle window --quality measures, in samples; 0, or prints and 2. */
static int cmd_plan_window(plan_opts *o, const cmd_labels *l, uint64_t shard_samples)
{
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    if (cli_config(&cfg))
        return 2;
    if (o->window_arg && sc_config_set(&cfg, "SC_SHUFFLE_WINDOW", o->window_arg, &err)) {
        fprintf(stderr, "shardcache plan: --window: %s\n", err.msg);
        return 2;
    }
    uint64_t sb = l->labels ? l->sample_bytes : o->sample_bytes;
    if (cfg.shuffle_window == SC_WINDOW_AUTO && !sb) {
        fprintf(stderr, "shardcache plan: an auto shuffle window (the default) needs a "
                        "sample's bytes: give --labels FILE:FIELD, --sample-bytes S or "
                        "--window W\n");
        return 2;
    }
    /* the loader's rule: whole shards of the largest, at least one batch */
    cfg.partitions = o->partitions;
    uint64_t least = o->partitions ? o->batch * o->ranks : o->batch;
    o->window = sc__config_window(&cfg, sb, shard_samples, least);
    return 0;
}

/* Shard sizes from the flags, or from the dataset of --labels; 0, or 2. */
static int cmd_plan_inputs(plan_opts *o, int rank, int world, uint64_t **sizes, uint64_t *n,
                           cmd_labels *l)
{
    if ((o->labels || o->window_arg || (o->sample_bytes && !o->samples)) && !o->quality) {
        if (rank == 0)
            fprintf(stderr, "shardcache plan: --labels, --window and --sample-bytes go "
                            "with --quality (--sample-bytes also with --samples)\n");
        return 2;
    }
    if (cmd_plan_load(o, rank, world, sizes, n))
        return 2;
    if (o->labels) {
        free(*sizes);
        *sizes = NULL;
        if (cmd_quality_labels(o, rank, sizes, n, l))
            return 2;
    }
    uint64_t most = 1;
    for (uint64_t k = 0; k < *n; k++)
        most = (*sizes)[k] > most ? (*sizes)[k] : most;
    return o->quality ? cmd_plan_window(o, l, most) : 0;
}

/* --save and the --check verdict, on rank 0, once every epoch went well. */
static int cmd_plan_finish(const plan_opts *o, uint64_t n, int rank, int world,
                           const sc_plan *last, uint64_t served, sc_error *err)
{
    if (o->save && rank == 0 && cmd_plan_save(o->save, last, err) != SC_OK) {
        cli_report("plan", rank, 1, err);
        return 1;
    }
    if (o->check && rank == 0)
        printf("checked: %" PRIu64 " epochs, %" PRIu64 " shards, %" PRIu64 " ranks%s; %" PRIu64
               " samples, each served by exactly one rank\nplan check: ok\n",
               o->epochs, n, o->ranks, world > 1 ? ", same plan on every rank" : "", served);
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o;
    int rc = cmd_plan_parse(argc, argv, &o, plan_usage);
    if (rc)
        return rc < 0 ? 0 : rc;

    int rank = 0, world = 1, status = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);

    uint64_t *sizes = NULL, n = 0;
    cmd_labels labels = {0};
    if (cmd_plan_inputs(&o, rank, world, &sizes, &n, &labels)) {
        free(sizes);
        free(labels.labels);
        MPI_Finalize();
        return 2;
    }
    sc_plan_params p = cmd_plan_params(&o, sizes, n);
    if (rank == 0)
        cmd_plan_print_header(&o, n, world);

    sc_plan *last = NULL;
    sc_error err = SC_ERROR_INIT;
    uint64_t served = 0; /* samples --check counted, every epoch's */
    if (sc_plan_params_check(&p, &err) != SC_OK) { /* what a job's open refuses */
        cli_report("plan", rank, world, &err);
        status = 1;
    }
    if (status == 0)
        status = cmd_plan_epochs(&o, &p, &labels, rank, world, &last, &served, &err);
    if (status == 0)
        status = cmd_plan_finish(&o, n, rank, world, last, served, &err);
    sc_plan_free(last);
    free(sizes);
    free(labels.labels);
    MPI_Finalize();
    return status;
}
