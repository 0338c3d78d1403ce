/*
 * bench/scale - shardcache at scales this machine cannot run, on paper and
 * in simulation: what rank 0 pays to plan an epoch and what every rank
 * receives, for 10^4..10^8 shards and 8..65,536 ranks; the exactly-once
 * reduction's size; and the cache hit rate per epoch of sticky (q = 0,
 * 0.1, 0.3) against global assignment at 8..65,536 simulated ranks with a
 * cache of 1.2x a rank's share, simulated over the real plans with the
 * cache's own eviction code (Belady over the current and next epoch's
 * lists, as the loader gives it), and of global assignment with the
 * node's and the old owner's caches serving too (SC_PEERS=on).  No MPI
 * traffic: a singleton.
 *
 *   bench_scale [--max-shards N] [--sim-shards N] [--epochs E] [--doc FILE] [--svg FILE]
 *   bench_scale --partitions K [--batch B] [--ranks R1,R2,...] [--sim-shards N]
 *               [--epochs E] [--doc FILE]
 *
 * The second form simulates only the hit rates of SC_PARTITIONS = K x R
 * (batch B per rank, a multiple of K) beside the same modes without
 * partitions at the same batch, counting the shards cut to a rank as its
 * reads too, and writes the block "scale-partitions".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_doc.h"
#include "evict.h"
#include "plan_state.h"

static void die(const char *what, const sc_error *err)
{
    fprintf(stderr, "bench_scale: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(1);
}

/* One simulated job's settings. */
typedef struct simcfg {
    sc_shuffle_mode mode;
    double q;            /* sticky's exchange */
    int shared;          /* SC_PEERS=on: the node's and the old owner's caches serve too */
    uint64_t batch;      /* per rank */
    uint64_t partitions; /* SC_PARTITIONS, 0 off */
} simcfg;

static sc_plan_params params(const uint64_t *sizes, uint64_t n, uint32_t R, uint64_t epoch,
                             const simcfg *c)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = n;
    p.world_size = R;
    p.seed = 11;
    p.epoch = epoch;
    p.batch_size = c->batch;
    p.mode = c->mode;
    p.exchange = c->q;
    p.partitions = c->partitions;
    return p;
}

/* Plan time and bytes over the grid; appends table rows to `text`. */
static int plan_grid(char *text, size_t cap, uint64_t max_shards)
{
    static const uint32_t ranks[] = {8, 512, 65536};
    int n = snprintf(text, cap,
                     "| shards | ranks | plan (s) | decode+check (s) | plan message | bytes/shard "
                     "| sketch reduction per epoch |\n"
                     "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (uint64_t shards = 10000; shards <= max_shards; shards *= 10) {
        uint64_t *sizes = malloc(sizeof *sizes * shards);
        if (!sizes)
            die("sizes", NULL);
        for (uint64_t k = 0; k < shards; k++)
            sizes[k] = 1024;
        for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
            if (ranks[i] > shards)
                continue;
            simcfg c = {SC_SHUFFLE_GLOBAL, 0, 0, 1, 0};
            sc_plan_params p = params(sizes, shards, ranks[i], 0, &c);
            sc_plan *plan = NULL, *back = NULL;
            sc_error err;
            double t0 = bench_now();
            if (sc_plan_create(&p, NULL, &plan, &err) != SC_OK)
                die("plan", &err);
            double t_plan = bench_now() - t0;
            size_t len;
            const void *wire = sc__plan_wire(plan, &len);
            t0 = bench_now();
            if (sc_plan_decode(wire, len, &back, &err) != SC_OK)
                die("decode", &err);
            double t_dec = bench_now() - t0;
            n += snprintf(text + n, cap - (size_t)n,
                          "| %.0e | %u | %.3f | %.3f | %.1f MiB | %.2f | %u x 72 B |\n",
                          (double)shards, ranks[i], t_plan, t_dec, (double)len / 1048576.0,
                          (double)len / (double)shards, ranks[i]);
            fprintf(stderr, "plan: %llu shards, %u ranks: %.3f s\n", (unsigned long long)shards,
                    ranks[i], t_plan);
            sc_plan_free(plan);
            sc_plan_free(back);
        }
        free(sizes);
    }
    return n;
}

/* What a simulated job's ranks hold: one Belady cache each. */
typedef struct sim {
    sc_plan **plans; /* epochs + 1 */
    sc__evict **ev;  /* [R] */
    uint32_t R;
    uint32_t *seq;
    uint32_t *reads;  /* this epoch's, rank after rank: home shards, then those cut to it */
    uint64_t *first;  /* [R + 1]: rank r's reads are reads[first[r] .. first[r+1]) */
    uint64_t *homes;  /* [R]: how many of rank r's reads are its home shards */
} sim;

enum { SIM_NODE = 8 }; /* ranks a node, where caches are shared */

/* Whether a rank of r's node holds `shard`. */
static int sim_node_has(const sim *m, uint32_t r, uint32_t shard)
{
    uint32_t node = r / SIM_NODE * SIM_NODE;
    for (uint32_t n = node; n < node + SIM_NODE && n < m->R; n++)
        if (sc__evict_has(m->ev[n], shard))
            return 1;
    return 0;
}

/*
 * Whether rank r's read of `shard` in epoch e is served by a cache
 * (shared: its node's, or over MPI its old owner's, as they stood when
 * epoch e began), and whether r keeps a copy: 0 the source, 1 its own,
 * 2 a neighbour's (no copy), 3 sent from the old owner's node (copied).
 */
static int sim_where(const sim *m, uint32_t r, uint32_t shard, uint64_t e, int shared)
{
    if (sc__evict_has(m->ev[r], shard))
        return 1;
    if (!shared)
        return 0;
    uint32_t old = 0;
    if (sim_node_has(m, r, shard))
        return 2;
    if (e > 0 && sc_plan_owner(m->plans[e - 1], shard, &old) == SC_OK &&
        sim_node_has(m, old, shard))
        return 3; /* the old owner answers from its node's entry (sc__cache_map_node) */
    return 0;
}

/* Whether rank r's cut reads of the epoch so far, reads[from..to), hold `shard`. */
static int sim_listed(const uint32_t *reads, uint64_t from, uint64_t to, uint32_t shard)
{
    for (uint64_t i = from; i < to; i++)
        if (reads[i] == shard)
            return 1;
    return 0;
}

/*
 * Every rank's reads of epoch e into m->reads: its home shards in plan
 * order, then each shard cut to it from another rank's (read whole, as
 * the cache's unit is the shard; once, however many ranges it gets).
 * Returns the cut reads.
 */
static uint64_t sim_reads(sim *m, uint64_t e)
{
    sc_plan_info in;
    sc_plan_get_info(m->plans[e], &in);
    /* The cuts by the rank they go to: a counting sort into cut[], by[r] .. by[r+1]. */
    uint64_t *by = calloc((size_t)m->R + 2, sizeof *by), at = 0, cuts = 0;
    sc_plan_cut *cut = malloc(sizeof *cut * (in.cuts + 1)), c;
    if (!by || !cut)
        die("cuts", NULL);
    for (uint64_t i = 0; i < in.cuts; i++)
        sc_plan_get_cut(m->plans[e], i, &c), by[c.to + 2]++;
    for (uint32_t r = 0; r < m->R; r++)
        by[r + 2] += by[r + 1];
    for (uint64_t i = 0; i < in.cuts; i++)
        sc_plan_get_cut(m->plans[e], i, &c), cut[by[c.to + 1]++] = c;
    for (uint32_t r = 0; r < m->R; r++) {
        const uint32_t *a;
        sc_plan_rank(m->plans[e], r, &a, &m->homes[r], NULL);
        m->first[r] = at;
        memcpy(m->reads + at, a, sizeof *a * m->homes[r]);
        at += m->homes[r];
        for (uint64_t i = by[r]; i < by[r + 1]; i++)
            if (cut[i].from != r &&
                !sim_listed(m->reads, m->first[r] + m->homes[r], at, (uint32_t)cut[i].shard))
                m->reads[at++] = (uint32_t)cut[i].shard, cuts++;
    }
    m->first[m->R] = at;
    free(by);
    free(cut);
    return cuts;
}

/*
 * Rank r's reads of epoch e; where[i] says where each comes from
 * (sim_where).  Its cache's future is its home shards of this epoch and
 * the next, as the loader gives it (sc_plan_rank): cut reads are off it.
 */
static void sim_epoch(sim *m, uint32_t r, uint64_t e, const unsigned char *where,
                      uint64_t *hits, uint64_t *reads)
{
    const uint32_t *a = m->reads + m->first[r], *b;
    uint64_t na = m->first[r + 1] - m->first[r], nb;
    sc_plan_rank(m->plans[e + 1], r, &b, &nb, NULL);
    memcpy(m->seq, a, sizeof *m->seq * m->homes[r]);
    memcpy(m->seq + m->homes[r], b, sizeof *m->seq * nb);
    sc__evict_future(m->ev[r], m->seq, m->homes[r] + nb);
    for (uint64_t i = 0; i < na; i++) {
        /* Its own cache as it is now (an entry held at the start may have gone since). */
        int w = sc__evict_has(m->ev[r], a[i]) ? 1 : where[i] == 1 ? 0 : where[i];
        reads[e]++;
        hits[e] += w != 0;
        if (w == 1) {
            sc__evict_touch(m->ev[r], a[i]);
        } else if (w != 2) {
            const uint32_t *victims;
            uint64_t nv;
            sc__evict_admit(m->ev[r], a[i], 1024, &victims, &nv);
        }
    }
}

/*
 * Hit rate of epochs 1..E-1 (epoch 0 starts cold), over all ranks, for one
 * mode: each rank's cache holds `cap` shards and is told the current and
 * next epoch's lists at each epoch's start, as sc_epoch_begin does.  With
 * `shared`, a read is also served by a neighbour's cache (SIM_NODE ranks a
 * node) or sent from its old owner's: what SC_PEERS=on gives.
 */
static double simulate(const uint64_t *sizes, uint64_t nshards, uint32_t R, const simcfg *c,
                       uint64_t epochs, double *per_epoch, double *cut_share)
{
    /* Reads of an epoch: every shard at its home, and each cut's shard once more at most. */
    uint64_t units = c->partitions ? c->partitions : R, most = nshards + 2 * units + 1;
    sim m = {calloc(epochs + 1, sizeof *m.plans), calloc(R, sizeof *m.ev), R,
             malloc(sizeof *m.seq * (2 * nshards + 1)), malloc(sizeof *m.reads * most),
             malloc(sizeof *m.first * ((size_t)R + 1)), malloc(sizeof *m.homes * R)};
    unsigned char *where = malloc(most);
    sc_error err;
    if (!m.plans || !m.ev || !m.seq || !m.reads || !m.first || !m.homes || !where)
        die("simulate", NULL);
    for (uint64_t e = 0; e <= epochs; e++) {
        sc_plan_params p = params(sizes, nshards, R, e, c);
        if (sc_plan_create(&p, e ? m.plans[e - 1] : NULL, &m.plans[e], &err) != SC_OK)
            die("plan", &err);
    }
    uint64_t cap = (uint64_t)(1.2 * (double)nshards / R + 0.5);
    for (uint32_t r = 0; r < R; r++)
        if (sc__evict_new(SC_CACHE_BELADY, cap * 1024, &m.ev[r]) != SC_OK)
            die("evict", NULL);
    uint64_t hits[64] = {0}, reads[64] = {0}, cuts = 0, all = 0;
    for (uint64_t e = 0; e < epochs; e++) {
        cuts += sim_reads(&m, e);
        all += m.first[R];
        /* Where each read comes from, as the caches stand when the epoch begins. */
        for (uint32_t r = 0; r < R; r++)
            for (uint64_t i = m.first[r]; i < m.first[r + 1]; i++)
                where[i] = (unsigned char)sim_where(&m, r, m.reads[i], e, c->shared);
        for (uint32_t r = 0; r < R; r++)
            sim_epoch(&m, r, e, where + m.first[r], hits, reads);
    }
    if (cut_share)
        *cut_share = all ? 100.0 * (double)cuts / (double)all : 0;
    double later = 0;
    for (uint64_t e = 0; e < epochs; e++) {
        per_epoch[e] = reads[e] ? 100.0 * (double)hits[e] / (double)reads[e] : 0;
        later += e ? per_epoch[e] : 0;
    }
    for (uint32_t r = 0; r < R; r++)
        sc__evict_free(m.ev[r]);
    for (uint64_t e = 0; e <= epochs; e++)
        sc_plan_free(m.plans[e]);
    free(m.plans);
    free(m.ev);
    free(m.seq);
    free(m.reads);
    free(m.first);
    free(m.homes);
    free(where);
    return epochs > 1 ? later / (double)(epochs - 1) : 0;
}

static void write_svg(const char *path, const uint32_t *ranks, int nr, double hit[][8],
                      const char *const *names, const char *const *colors, int nm)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die(path, NULL);
    const double w = 640, h = 360, left = 60, top = 40, right = 200, bottom = 50;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
               "<text x=\"%.0f\" y=\"20\" font-size=\"14\">cache hit rate, epochs 1+ (%%), "
               "against ranks (cache = 1.2x a rank's share)</text>\n",
            w, h, left);
    double x0 = left, x1 = w - right, y0 = h - bottom, y1 = top;
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n"
               "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n",
            x0, y0, x1, y0, x0, y0, x0, y1);
    for (int k = 0; k <= 5; k++)
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%d</text>\n", x0 - 30, y0 - (y0 - y1) * k / 5 + 4,
                20 * k);
    for (int i = 0; i < nr; i++)
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%u</text>\n", x0 + (x1 - x0) * i / (nr - 1) - 8,
                y0 + 16, ranks[i]);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">ranks (log scale)</text>\n", (x0 + x1) / 2 - 40,
            h - 12);
    for (int m = 0; m < nm; m++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colors[m]);
        for (int i = 0; i < nr; i++)
            fprintf(f, "%.1f,%.1f ", x0 + (x1 - x0) * i / (nr - 1),
                    y0 - (y0 - y1) * hit[m][i] / 100.0);
        fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", x1 + 10,
                y1 + 16.0 * m + 10, colors[m], names[m]);
    }
    fprintf(f, "</svg>\n");
    fclose(f);
}

/* 1024-sample shards, at least 20 a rank: sizes[*n] (free it). */
static uint64_t *sim_sizes(uint64_t sim_shards, uint32_t R, uint64_t *n)
{
    *n = sim_shards > 20 * (uint64_t)R ? sim_shards : 20 * (uint64_t)R;
    uint64_t *sizes = malloc(sizeof *sizes * *n);
    if (!sizes)
        die("sizes", NULL);
    for (uint64_t k = 0; k < *n; k++)
        sizes[k] = 1024;
    return sizes;
}

/*
 * --partitions K: the hit rates of SC_PARTITIONS = K x R beside the same
 * modes without partitions, all at batch B a rank; the share of reads
 * that are cuts' (global, partitions).  Appends the table to `text`.
 */
static int partitions_table(char *text, size_t cap, const int *ranks, int nr, uint64_t K,
                            uint64_t B, uint64_t sim_shards, uint64_t epochs)
{
    static const char *const head[] = {"sticky q=0.1", "sticky q=0.1, P", "global", "global, P",
                                       "global + transfers", "global, P + transfers"};
    enum { NM = sizeof head / sizeof head[0] };
    int n = snprintf(text, cap,
                     "Cache hit rate, epochs 1..%llu averaged, %llu shards of 1024 samples (at "
                     "least 20 a rank), batch %llu a rank, P = %llu x ranks partitions, a cache "
                     "of 1.2x a rank's share, Belady over the current and next epoch's lists.  "
                     "A rank's reads are its home shards, then each shard cut to it from another "
                     "rank (read whole: the cache's unit is the shard), which its cache's future "
                     "does not list (the loader gives it sc_plan_rank's home shards); the last "
                     "columns are the share of reads that are cut reads (global, without and "
                     "with P):\n\n| ranks | P |",
                     (unsigned long long)(epochs - 1), (unsigned long long)sim_shards,
                     (unsigned long long)B, (unsigned long long)K);
    for (int m = 0; m < NM; m++)
        n += snprintf(text + n, cap - (size_t)n, " %s |", head[m]);
    n += snprintf(text + n, cap - (size_t)n,
                  " cut reads, global | cut reads, global, P |\n"
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < nr; i++) {
        uint32_t R = (uint32_t)ranks[i];
        uint64_t shards, *sizes = sim_sizes(sim_shards, R, &shards);
        double hit, per_epoch[64], cut[NM] = {0};
        n += snprintf(text + n, cap - (size_t)n, "| %u | %llu |", R, (unsigned long long)(K * R));
        for (int m = 0; m < NM; m++) {
            simcfg c = {m < 2 ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL, m < 2 ? 0.1 : 0, m >= 4,
                        B, m % 2 ? K * R : 0};
            hit = simulate(sizes, shards, R, &c, epochs, per_epoch, &cut[m]);
            n += snprintf(text + n, cap - (size_t)n, " %.1f%% |", hit);
        }
        n += snprintf(text + n, cap - (size_t)n, " %.2f%% | %.2f%% |\n", cut[2], cut[3]);
        fprintf(stderr, "simulated %u ranks, %llu partitions\n", R, (unsigned long long)(K * R));
        free(sizes);
    }
    return n;
}

/* The second form (--partitions): its table alone, in the block "scale-partitions". */
static int partitions_main(const char *ranks_arg, uint64_t K, uint64_t B, uint64_t sim_shards,
                           uint64_t epochs, const char *doc)
{
    int ranks[16], nr = bench_int_list(ranks_arg, ranks, 16);
    if (!nr || !K || !B || B % K) {
        fprintf(stderr, "bench_scale: --ranks %s --partitions %llu --batch %llu: needs rank "
                        "counts and a batch that is a multiple of the partitions a rank\n",
                ranks_arg, (unsigned long long)K, (unsigned long long)B);
        return 2;
    }
    static char text[8192];
    int n = snprintf(text, sizeof text,
                     "`bench_scale --partitions %llu --batch %llu --ranks %s --sim-shards %llu "
                     "--epochs %llu`\n\n", (unsigned long long)K, (unsigned long long)B,
                     ranks_arg, (unsigned long long)sim_shards, (unsigned long long)epochs);
    partitions_table(text + n, sizeof text - (size_t)n, ranks, nr, K, B, sim_shards, epochs);
    printf("%s", text);
    if (doc && bench_doc_write(doc, "scale-partitions", text) != 0) {
        fprintf(stderr, "bench_scale: cannot write %s\n", doc);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t max_shards = 100000000, sim_shards = 20480, epochs = 5, parts = 0, batch = 64;
    const char *doc = NULL, *svg = NULL, *ranks_arg = "8,32,128,512,1024";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--partitions"))
            parts = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--ranks"))
            ranks_arg = argv[i + 1];
        else if (!strcmp(argv[i], "--max-shards"))
            max_shards = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--sim-shards"))
            sim_shards = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--epochs"))
            epochs = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--doc"))
            doc = argv[i + 1];
        else if (!strcmp(argv[i], "--svg"))
            svg = argv[i + 1];
    }
    if (epochs < 2 || epochs > 60 || sim_shards < 1024 || max_shards < 10000)
        return 2;
    if (parts)
        return partitions_main(ranks_arg, parts, batch, sim_shards, epochs, doc);
    MPI_Init(&argc, &argv);
    static char text[16384];
    int n = snprintf(text, sizeof text,
                     "`bench_scale --max-shards %llu --sim-shards %llu --epochs %llu` (one core, "
                     "%ld cores online)\n\nPlanning, global mode, 1024-sample shards: rank 0 "
                     "plans, every rank decodes and checks the plan's hash and structure; the "
                     "exactly-once sketch is 9 words per rank per epoch in one MPI_Iallreduce "
                     "(SC_VERIFY=full adds 4 bytes per sample).\n\n",
                     (unsigned long long)max_shards, (unsigned long long)sim_shards,
                     (unsigned long long)epochs, sysconf(_SC_NPROCESSORS_ONLN));
    n += plan_grid(text + n, sizeof text - (size_t)n, max_shards);

    static const uint32_t ranks[] = {8, 32, 128, 512, 1024, 8192, 65536};
    static const char *const names[] = {"sticky q=0", "sticky q=0.1", "sticky q=0.3", "global",
                                        "global + transfers"};
    static const char *const colors[] = {"#1e88e5", "#43a047", "#fb8c00", "#e53935", "#8e24aa"};
    static const double qs[] = {0, 0.1, 0.3, 0, 0};
    enum { NR = sizeof ranks / sizeof ranks[0], NM = 5 };
    double hit[NM][8], per_epoch[64];
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "\nCache hit rate, epochs 1..%llu averaged (epoch 0 is cold), %llu shards "
                  "(at least 20 a rank), a cache of 1.2x a rank's share, Belady over the current "
                  "and next epoch's lists (the loader's own eviction code over the real plans). "
                  "The first four columns: one cache per rank, nothing shared.  Global + "
                  "transfers (SC_PEERS=on): %d ranks a node, a read is also served by a "
                  "neighbour's cache or sent from its old owner's, as they stood when the epoch "
                  "began; its complement is the share of bytes read from the source:\n\n"
                  "| ranks | sticky q=0 | sticky q=0.1 | sticky q=0.3 | global | global + transfers |\n"
                  "| ---: | ---: | ---: | ---: | ---: | ---: |\n",
                  (unsigned long long)(epochs - 1), (unsigned long long)sim_shards, SIM_NODE);
    for (int i = 0; i < NR; i++) {
        uint64_t shards, *sizes = sim_sizes(sim_shards, ranks[i], &shards);
        for (int m = 0; m < NM; m++) {
            simcfg c = {m >= 3 ? SC_SHUFFLE_GLOBAL : SC_SHUFFLE_STICKY, qs[m], m == 4, 1, 0};
            hit[m][i] = simulate(sizes, shards, ranks[i], &c, epochs, per_epoch, NULL);
        }
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "| %u | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", ranks[i],
                      hit[0][i], hit[1][i], hit[2][i], hit[3][i], hit[4][i]);
        fprintf(stderr, "simulated %u ranks (%llu shards)\n", ranks[i], (unsigned long long)shards);
        free(sizes);
    }
    if (svg) {
        write_svg(svg, ranks, NR, hit, names, colors, NM);
        n += snprintf(text + n, sizeof text - (size_t)n, "\nPlot: `%s`.\n", svg);
    }
    printf("%s", text);
    int rc = 0;
    if (doc && bench_doc_write(doc, "scale", text) != 0) {
        fprintf(stderr, "bench_scale: cannot write %s\n", doc);
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
