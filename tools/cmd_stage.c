/*
 * cmd_stage.c - `shardcache stage`: warm each rank's node-local cache with
 * the shards the coming epochs' plans give it, so that a training job on
 * the same nodes starts with a hot cache.  Run under mpirun/srun with the
 * job's world size, seed and mode.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "plan_state.h"
#include "scan.h"
#include "source.h"
#include "vec.h"

static const char usage[] =
    "usage: shardcache stage --source PATH [options]   (under mpirun/srun)\n"
    "\n"
    "Computes the plans of the coming epochs exactly as the training job will\n"
    "and fills each rank's node-local cache with the shards it will read (its\n"
    "own, and those of the sample ranges cut to it), in order of first use,\n"
    "until the cache is full.  Prints per-rank counters.\n"
    "SC_* environment variables apply; flags override them.\n"
    "\n"
    "  --source PATH      HDF5 file, directory or list of files (SC_SOURCE)\n"
    "  --ranks R          world size of the training job (default: this one's;\n"
    "                     must equal the number of MPI ranks)\n"
    "  --epochs E         epochs to stage (default 1)\n"
    "  --first-epoch N    the first epoch to stage (default 0)\n"
    "  --shard-size K     samples per shard; layout B groups runs of smaller\n"
    "                     files up to it, cuts larger ones (SC_SHARD_SIZE)\n"
    "  --seed S           plan seed (SC_SEED)\n"
    "  --batch B          batch size (SC_BATCH_SIZE)\n"
    "  --mode MODE        global or sticky (SC_SHUFFLE)\n"
    "  --exchange Q       sticky exchange fraction (SC_EXCHANGE)\n"
    "  --partitions P     plan over P partitions (SC_PARTITIONS)\n"
    "  --cache-dir DIR    cache directory (SC_CACHE_DIR)\n"
    "  --cache-bytes N    capacity per rank, K/M/G suffixes, auto or unbounded (SC_CACHE_BYTES)\n"
    "  --fields LIST      the fields, by path, comma-separated (SC_FIELDS)\n"
    "  --sample-axis A    first, or none: layout B files of one sample (SC_SAMPLE_AXIS)\n"
    "  --check            read every staged shard back from the cache and\n"
    "                     compare it with the source; ends 'cache check: ok'\n"
    "  -h, --help         this text\n";

typedef struct stage_opts {
    uint64_t ranks, epochs, first;
    int check;
} stage_opts;

static int cmd_stage_parse(int argc, char **argv, sc_config *cfg, stage_opts *o)
{
    enum { SOURCE = 256, RANKS, EPOCHS, FIRST, SHARD_SIZE, SEED, BATCH, MODE,
           EXCHANGE, CACHE_DIR, CACHE_BYTES, FIELDS, SAMPLE_AXIS, PARTITIONS, CHECK };
    static const struct option longopts[] = {
        {"source", required_argument, 0, SOURCE},
        {"ranks", required_argument, 0, RANKS},
        {"epochs", required_argument, 0, EPOCHS},
        {"first-epoch", required_argument, 0, FIRST},
        {"shard-size", required_argument, 0, SHARD_SIZE},
        {"seed", required_argument, 0, SEED},
        {"batch", required_argument, 0, BATCH},
        {"mode", required_argument, 0, MODE},
        {"exchange", required_argument, 0, EXCHANGE},
        {"cache-dir", required_argument, 0, CACHE_DIR},
        {"cache-bytes", required_argument, 0, CACHE_BYTES},
        {"fields", required_argument, 0, FIELDS},
        {"sample-axis", required_argument, 0, SAMPLE_AXIS},
        {"partitions", required_argument, 0, PARTITIONS},
        {"check", no_argument, 0, CHECK},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    /* Flags are settings by another name: one parser, the config's. */
    static const char *const env_of[] = {
        [SOURCE - SOURCE] = "SC_SOURCE", [SHARD_SIZE - SOURCE] = "SC_SHARD_SIZE",
        [SEED - SOURCE] = "SC_SEED", [BATCH - SOURCE] = "SC_BATCH_SIZE",
        [MODE - SOURCE] = "SC_SHUFFLE", [EXCHANGE - SOURCE] = "SC_EXCHANGE",
        [CACHE_DIR - SOURCE] = "SC_CACHE_DIR", [CACHE_BYTES - SOURCE] = "SC_CACHE_BYTES",
        [FIELDS - SOURCE] = "SC_FIELDS", [SAMPLE_AXIS - SOURCE] = "SC_SAMPLE_AXIS",
        [PARTITIONS - SOURCE] = "SC_PARTITIONS"};
    int c, bad = 0;
    sc_error err = SC_ERROR_INIT;

    *o = (stage_opts){0, 1, 0, 0};
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case RANKS: bad = cli_u64("--ranks", optarg, 1, UINT32_MAX, &o->ranks); break;
        case EPOCHS: bad = cli_u64("--epochs", optarg, 1, 100000, &o->epochs); break;
        case FIRST: bad = cli_u64("--first-epoch", optarg, 0, UINT64_MAX / 2, &o->first); break;
        case CHECK: o->check = 1; break;
        case 'h': fputs(usage, stdout); return -1;
        case '?': bad = 2; break;
        default:
            if (sc_config_set(cfg, env_of[c - SOURCE], optarg, &err) != SC_OK) {
                fprintf(stderr, "shardcache stage: %s (%s)\n", err.msg,
                        longopts[c - SOURCE].name);
                bad = 2;
            }
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "shardcache stage: unexpected argument '%s'\n", argv[optind]);
        bad = 2;
    }
    if (bad)
        fprintf(stderr, "see `shardcache stage --help`\n");
    return bad;
}

/* Per-field buffers big enough for the largest shard. */
static void **cmd_stage_field_buffers(const sc_dataset *ds, const sc_dataset_info *di)
{
    void **bufs = calloc((size_t)di->nfields, sizeof *bufs);
    for (int i = 0; bufs && i < di->nfields; i++) {
        uint64_t most = 0, bytes = 0;
        for (uint64_t k = 0; k < di->nshards; k++)
            if (sc_dataset_shard_bytes(ds, k, i, &bytes) == SC_OK && bytes > most)
                most = bytes;
        if (!(bufs[i] = malloc(most + 1)))
            return NULL;
    }
    return bufs;
}

static void cmd_stage_free_buffers(void **bufs, int n)
{
    for (int i = 0; bufs && i < n; i++)
        free(bufs[i]);
    free(bufs);
}

/*
 * The shards this rank reads in the coming epochs, and the distinct ones
 * to stage.  With SC_PEERS=on and uncapped caches, a shard it first reads
 * after the first staged epoch is not staged: the rank that reads it in
 * that epoch holds it then, and the job takes it from that rank's cache
 * (its node's, or over MPI).  Capped caches may evict it first: they
 * stage as before.
 */
typedef struct todo {
    uint32_t *seq, *first_use;
    uint64_t nseq, nfirst, moved; /* moved: later first uses left to the job */
    size_t seq_room, first_room;
} todo;

/* Appends an epoch's shards to the sequence, and their first uses to stage. */
static int cmd_stage_add_epoch(todo *t, unsigned char *seen, const uint32_t *list, uint64_t n,
                               int later_to_peers)
{
    uint32_t *seq = sc__vec_grow(t->seq, &t->seq_room, t->nseq + n + 1, sizeof *seq);
    if (seq)
        t->seq = seq;
    uint32_t *fu = sc__vec_grow(t->first_use, &t->first_room, t->nfirst + n + 1, sizeof *fu);
    if (fu)
        t->first_use = fu;
    if (!seq || !fu)
        return SC_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        t->seq[t->nseq++] = list[i];
        if (seen[list[i]]++)
            continue;
        if (later_to_peers)
            t->moved++;
        else
            t->first_use[t->nfirst++] = list[i];
    }
    return SC_OK;
}

static int cmd_stage_plan_epochs(const sc_dataset *ds, const sc_config *cfg,
                                 const stage_opts *o, int rank, int world, todo *t,
                                 sc_error *err)
{
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    sc_plan *prev = NULL;
    unsigned char *seen = calloc(di.nshards, 1);
    int rc = seen ? SC_OK : SC_ENOMEM;
    /* auto: the free space's bound, which on a node's disk is rarely reached */
    int uncapped = !cfg->cache_bytes || cfg->cache_bytes == SC_CACHE_AUTO;
    memset(t, 0, sizeof *t);
    for (uint64_t e = o->first; rc == SC_OK && e < o->first + o->epochs; e++) {
        sc_plan_params p;
        sc_plan *plan = NULL;
        uint32_t *list = NULL;
        uint64_t n = 0;
        sc__dataset_plan_params(ds, cfg, (uint32_t)world, e, &p);
        if ((rc = sc_plan_share(MPI_COMM_WORLD, &p, prev, &plan, err)) != SC_OK)
            break;
        if ((rc = sc__plan_reads(plan, (uint32_t)rank, &list, &n)) == SC_OK)
            rc = cmd_stage_add_epoch(t, seen, list, n,
                                     e > o->first && cfg->peers == SC_PEERS_ON && uncapped);
        free(list);
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    free(seen);
    if (rc == SC_ENOMEM && err && !err->msg[0])
        snprintf(err->msg, sizeof err->msg, "no memory to plan the epochs");
    if (err && rc != SC_OK)
        err->code = rc;
    return rc;
}

/* Reads shard k from the cache and from the source and compares them. */
static int cmd_stage_check_shard(sc_cache *cache, sc_dataset *ds, int nfields,
                                 uint64_t shard, void **a, void **b, sc_error *err)
{
    int rc = sc_cache_read(cache, shard, a, err);
    if (rc == SC_OK)
        rc = sc_dataset_read_shard(ds, shard, b, err);
    for (int i = 0; rc == SC_OK && i < nfields; i++) {
        sc_field_info f;
        uint64_t bytes = 0;
        sc_dataset_field(ds, i, &f);
        sc_dataset_shard_bytes(ds, shard, i, &bytes);
        if (memcmp(a[i], b[i], bytes) != 0) {
            snprintf(err->msg, sizeof err->msg,
                     "shard %" PRIu64 " field '%s': the cached bytes differ from the source",
                     shard, f.name);
            rc = err->code = SC_ECHECKSUM;
        }
    }
    return rc;
}

/* One rank's staging: what it opened and planned, and what it did. */
typedef struct stage_run {
    sc_config *cfg;
    const stage_opts *o;
    int rank, world;
    sc_error err;
    sc_dataset *ds;
    sc_cache *cache;
    sc_dataset_info di;
    const uint64_t *sizes;
    todo t;
    void **bufs, **src;
    uint64_t total; /* bytes of every rank's first uses */
    uint64_t staged, staged_bytes, checked;
    sc_cache_stats st; /* of the staging itself, before --check */
} stage_run;

/* MPI_Init, and -1 (after saying so on rank 0) if the world is not --ranks. */
static int cmd_stage_mpi_start(stage_run *s, int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &s->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s->world);
    if (s->o->ranks && s->o->ranks != (uint64_t)s->world) {
        if (s->rank == 0)
            fprintf(stderr, "shardcache stage: --ranks %" PRIu64 " but running on %d MPI "
                    "ranks; stage under mpirun -np %" PRIu64 "\n", s->o->ranks, s->world,
                    s->o->ranks);
        return -1;
    }
    return 0;
}

/*
 * Rank 0, layout B from a directory: saves the scan beside the files, so
 * that the jobs after this one open them without it; a failure is said,
 * and staging goes on.
 */
static void cmd_stage_manifest(const stage_run *s)
{
    struct stat st;
    sc_error e = SC_ERROR_INIT;
    if (s->rank != 0 || s->di.layout != 'B' || stat(s->cfg->source, &st) != 0 ||
        !S_ISDIR(st.st_mode))
        return;
    if (s->di.from_manifest)
        printf("manifest: %s/.shardcache-manifest is up to date (%" PRIu64 " files)\n",
               s->cfg->source, s->di.nfiles);
    else if (sc__scan_save(s->ds, &e) == SC_OK)
        printf("manifest: saved %s/.shardcache-manifest (%" PRIu64 " files): the next jobs "
               "open them without scanning them\n", s->cfg->source, s->di.nfiles);
    else
        fprintf(stderr, "shardcache stage: warning: %s: each job will scan the %" PRIu64
                " files\n", e.msg, s->di.nfiles);
}

/* Opens the source and the cache, plans the epochs and tells the cache the plan. */
static int cmd_stage_open(stage_run *s)
{
    int rc = sc_dataset_open(MPI_COMM_WORLD, s->cfg, &s->ds, &s->err);
    if (rc == SC_OK) {
        sc_dataset_get_info(s->ds, &s->di);
        sc_dataset_shard_sizes(s->ds, &s->sizes);
        cmd_stage_manifest(s);
        rc = sc_cache_open(s->ds, MPI_COMM_WORLD, s->cfg, &s->cache, &s->err);
    }
    if (rc == SC_OK)
        rc = cmd_stage_plan_epochs(s->ds, s->cfg, s->o, s->rank, s->world, &s->t, &s->err);
    if (rc == SC_OK && (!(s->bufs = cmd_stage_field_buffers(s->ds, &s->di)) ||
                        (s->o->check && !(s->src = cmd_stage_field_buffers(s->ds, &s->di))))) {
        rc = s->err.code = SC_ENOMEM;
        snprintf(s->err.msg, sizeof s->err.msg, "no memory for shard buffers");
    }
    if (rc == SC_OK)
        rc = sc_cache_plan_ahead(s->cache, s->t.seq, s->t.nseq);
    return rc;
}

/* Shard k's bytes, every field (a variable-length field's vary by shard). */
static uint64_t cmd_stage_bytes(const stage_run *s, uint64_t k)
{
    uint64_t total = 0, bytes = 0;
    for (int i = 0; i < s->di.nfields; i++)
        if (sc_dataset_shard_bytes(s->ds, k, i, &bytes) == SC_OK)
            total += bytes;
    return total;
}

/* Stages first uses [*next, until), or until the cache is full. */
static int cmd_stage_slice(stage_run *s, uint64_t *next, uint64_t until)
{
    int rc = SC_OK;
    uint64_t i = *next;
    for (; rc == SC_OK && i < until; i++) {
        uint64_t k = s->t.first_use[i], bytes = cmd_stage_bytes(s, k);
        sc_cache_stats st;
        sc_cache_get_stats(s->cache, &st);
        /* A full cache: staging more would evict shards needed sooner. */
        if (st.capacity && st.bytes_cached + bytes > st.capacity)
            break;
        rc = sc_cache_read(s->cache, k, s->bufs, &s->err);
        s->staged++;
        s->staged_bytes += bytes;
    }
    if (i < until && rc == SC_OK)
        i = until; /* the cache is full: skip the rest of the slice */
    *next = i;
    return rc;
}

/* Stages this rank's shards in order of first use; rc is cmd_stage_open()'s. */
static int cmd_stage_fill(stage_run *s, int rc)
{
    /* Work in a fixed number of slices, so every rank makes the same number
       of progress reductions whatever its share. */
    enum { SLICES = 50 };
    uint64_t mine_total = 0, done_all = 0;
    for (uint64_t i = 0; rc == SC_OK && i < s->t.nfirst; i++)
        mine_total += cmd_stage_bytes(s, s->t.first_use[i]);
    int bad = rc != SC_OK, anybad = bad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&mine_total, &s->total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    cli_progress prog;
    cli_progress_init(&prog, "stage");
    uint64_t next = 0;
    for (int sl = 0; !anybad && sl < SLICES; sl++) {
        rc = cmd_stage_slice(s, &next, s->t.nfirst * (uint64_t)(sl + 1) / SLICES);
        bad = rc != SC_OK;
        uint64_t in[2] = {s->staged_bytes, (uint64_t)bad}, out2[2];
        MPI_Allreduce(in, out2, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        done_all = out2[0];
        anybad = out2[1] != 0;
        if (s->rank == 0)
            cli_progress_cb(&prog, sl + 1 == SLICES || anybad ? s->total : done_all, s->total);
    }
    return rc;
}

/* --check: reads every staged shard back and compares it with the source. */
static int cmd_stage_check_all(stage_run *s, int rc)
{
    for (uint64_t i = 0; rc == SC_OK && s->o->check && i < s->staged; i++, s->checked++)
        rc = cmd_stage_check_shard(s->cache, s->ds, s->di.nfields, s->t.first_use[i], s->bufs,
                                   s->src, &s->err);
    return rc;
}

/* Per-rank counters, in rank order on rank 0. */
static void cmd_stage_report_ranks(const stage_run *s)
{
    const sc_cache_stats *st = &s->st;
    char line[SC_PATH_MAX + 512];
    snprintf(line, sizeof line,
             "rank %d: %" PRIu64 " shards staged, hits %" PRIu64 ", misses %" PRIu64
             ", from source %.1f MiB, from cache %.1f MiB, evictions %" PRIu64
             ", repairs %" PRIu64 ", cached %" PRIu64 " entries (%.1f MiB) in %s",
             s->rank, s->staged, st->hits, st->misses,
             (double)st->bytes_from_source / 1048576.0, (double)st->bytes_from_cache / 1048576.0,
             st->evictions, st->repairs, st->entries, (double)st->bytes_cached / 1048576.0,
             s->cache ? sc_cache_dir(s->cache) : "-");
    for (int r = 0; r < s->world; r++) {
        if (r == s->rank && s->rank == 0)
            printf("%s\n", line);
        else if (r == s->rank)
            MPI_Send(line, (int)strlen(line) + 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        else if (s->rank == 0) {
            char other[sizeof line];
            MPI_Recv(other, (int)sizeof other, MPI_CHAR, r, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            printf("%s\n", other);
        }
    }
}

/* The job's totals on rank 0 if every rank succeeded; 1 if one did not. */
static int cmd_stage_report_job(const stage_run *s, int rc)
{
    uint64_t mine[5] = {(uint64_t)(rc != SC_OK), s->checked, s->st.hits, s->st.misses,
                        s->t.moved}, sum[5];
    MPI_Allreduce(mine, sum, 5, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (s->rank == 0 && sum[0] == 0) {
        printf("staged: %" PRIu64 " epoch%s from epoch %" PRIu64 ", %.1f MiB on %d rank%s, "
               "hit rate %.1f%%\n", s->o->epochs, s->o->epochs == 1 ? "" : "s", s->o->first,
               (double)s->total / 1048576.0, s->world, s->world == 1 ? "" : "s",
               sum[2] + sum[3] ? 100.0 * (double)sum[2] / (double)(sum[2] + sum[3]) : 0.0);
        if (sum[4])
            printf("not staged: %" PRIu64 " first reads by a rank after epoch %" PRIu64
                   ": the job takes those shards from the caches of the ranks that read them in "
                   "epoch %" PRIu64 " (SC_PEERS=on, uncapped caches)\n",
                   sum[4], s->o->first, s->o->first);
        if (s->o->check)
            printf("cache check: ok (%" PRIu64 " shards)\n", sum[1]);
    }
    return sum[0] ? 1 : 0;
}

static void cmd_stage_close(stage_run *s)
{
    cmd_stage_free_buffers(s->bufs, s->di.nfields);
    cmd_stage_free_buffers(s->src, s->di.nfields);
    free(s->t.seq);
    free(s->t.first_use);
    sc_cache_close(s->cache);
    sc_dataset_close(s->ds);
}

int cmd_stage(int argc, char **argv)
{
    sc_config cfg;
    stage_opts o;
    int rc;
    if ((rc = cli_config(&cfg)))
        return rc;
    if ((rc = cmd_stage_parse(argc, argv, &cfg, &o)))
        return rc < 0 ? 0 : rc;

    stage_run s = {.cfg = &cfg, .o = &o, .rank = 0, .world = 1, .err = SC_ERROR_INIT};
    if (cmd_stage_mpi_start(&s, &argc, &argv)) {
        MPI_Finalize();
        return 2;
    }
    rc = cmd_stage_fill(&s, cmd_stage_open(&s));
    /* Counters of the staging itself, before --check reads it all again. */
    if (s.cache)
        sc_cache_get_stats(s.cache, &s.st);
    rc = cmd_stage_check_all(&s, rc);
    if (rc != SC_OK)
        cli_report("stage", s.rank, s.world, &s.err);
    cmd_stage_report_ranks(&s);
    rc = cmd_stage_report_job(&s, rc);
    cmd_stage_close(&s);
    MPI_Finalize();
    return rc;
}
