/*
 * bench/shuffle - how random a job's batches are, from its plans and
 * schedules alone (no data read): for a dataset whose labels are stored in
 * random order and the same labels stored class-sorted (as ImageNet-style
 * packs often are), in sticky and global mode, the per-rank batches'
 * label entropy (bits), classes per batch and distinct shards per batch,
 * against a uniform random permutation of the whole dataset cut into the
 * same batches.  Per-rank batch composition is what BatchNorm statistics
 * and any rank-local step see.  No MPI traffic: a singleton.
 *
 *   bench_shuffle [--samples N] [--classes K] [--shard S] [--batch B]
 *                 [--ranks R] [--window W|auto] [--sample-bytes S] [--epochs E]
 *                 [--partitions P1,P2,...] [--doc FILE]
 *
 * --window auto is what SC_SHUFFLE_WINDOW=auto gives a job with the default
 * SC_STREAM_BYTES (256M) and samples of --sample-bytes (3x32x32 + a label).
 * --partitions adds global-mode rows with SC_PARTITIONS=P (the batch per
 * rank stays B: each P divides R x B and is a multiple of R; each partition
 * shuffles within window / P) and writes the block "shuffle-partitions".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "config.h"
#include "hash.h"
#include "plan_state.h"
#include "shardcache/config.h"

enum { MAX_PARTS = 8 };

typedef struct opts {
    uint64_t samples, classes, shard, batch, ranks, window, epochs, sample_bytes;
    int nparts, parts[MAX_PARTS]; /* --partitions */
} opts;

/* What the batches look like, averaged over every batch of every epoch. */
typedef struct quality {
    sc_quality_figures plan, uniform;
    uint64_t batches;
} quality;

static void die(const char *what, const sc_error *err)
{
    fprintf(stderr, "bench_shuffle: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(1);
}

static void add(sc_quality_figures *sum, const sc_quality_figures *f, double w)
{
    sum->shards += f->shards * w, sum->moved += f->moved * w;
    sum->bits += f->bits * w, sum->classes += f->classes * w;
}

static void mean(sc_quality_figures *f, uint64_t n)
{
    double d = n ? (double)n : 1.0;
    f->shards /= d, f->moved /= d, f->bits /= d, f->classes /= d;
}

/* Every rank's batches over the epochs of one mode and partitions (sc_plan_quality). */
static quality measure(const opts *o, sc_shuffle_mode mode, uint64_t partitions,
                       const uint32_t *labels)
{
    uint64_t nshards = o->samples / o->shard;
    uint64_t *sizes = malloc(sizeof *sizes * nshards);
    if (!sizes)
        die("measure", NULL);
    for (uint64_t k = 0; k < nshards; k++)
        sizes[k] = o->shard;
    quality q = {0};
    sc_plan *prev = NULL;
    sc_error err;
    for (uint64_t e = 0; e < o->epochs; e++) {
        sc_plan_params p = SC_PLAN_PARAMS_INIT;
        p.shard_sizes = sizes, p.nshards = nshards, p.world_size = (uint32_t)o->ranks;
        p.seed = 7, p.epoch = e, p.batch_size = o->batch, p.mode = mode, p.exchange = 0.1;
        p.partitions = partitions;
        sc_plan *plan = NULL;
        if (sc_plan_create(&p, prev, &plan, &err) != SC_OK)
            die("plan", &err);
        sc_quality_params qp = {.shard_sizes = sizes, .nshards = nshards, .batch_size = o->batch,
                                .window = o->window, .seed = 7, .labels = labels,
                                .nclasses = (uint32_t)o->classes};
        sc_quality one;
        if (sc_plan_quality(plan, &qp, &one, &err) != SC_OK)
            die("quality", &err);
        add(&q.plan, &one.plan, (double)one.batches);
        add(&q.uniform, &one.uniform, (double)one.batches);
        q.batches += one.batches;
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    free(sizes);
    mean(&q.plan, q.batches);
    mean(&q.uniform, q.batches);
    return q;
}

static void parse(int argc, char **argv, opts *o, const char **doc)
{
    struct {
        const char *flag;
        uint64_t *v;
    } f[] = {{"--samples", &o->samples}, {"--classes", &o->classes}, {"--shard", &o->shard},
             {"--batch", &o->batch},     {"--ranks", &o->ranks},     {"--window", &o->window},
             {"--epochs", &o->epochs},   {"--sample-bytes", &o->sample_bytes}};
    for (int i = 1; i + 1 < argc; i += 2) {
        int known = !strcmp(argv[i], "--doc") || !strcmp(argv[i], "--partitions");
        if (!strcmp(argv[i], "--doc"))
            *doc = argv[i + 1];
        else if (known && !(o->nparts = bench_int_list(argv[i + 1], o->parts, MAX_PARTS))) {
            fprintf(stderr, "bench_shuffle: --partitions %s: a list of counts\n", argv[i + 1]);
            exit(2);
        }
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
            if (!strcmp(argv[i], f[k].flag))
                *f[k].v = f[k].v == &o->window && !strcmp(argv[i + 1], "auto")
                              ? SC_WINDOW_AUTO
                              : strtoull(argv[i + 1], NULL, 10),
                known = 1;
        if (!known) {
            fprintf(stderr, "bench_shuffle: unknown flag %s\n", argv[i]);
            exit(2);
        }
    }
    if (!o->classes || !o->shard || !o->batch || !o->ranks || !o->epochs ||
        o->samples < o->shard * o->ranks || o->classes > 1u << 20) {
        fprintf(stderr, "bench_shuffle: settings out of range\n");
        exit(2);
    }
    for (int k = 0; k < o->nparts; k++)
        if (o->parts[k] % o->ranks || (o->batch * o->ranks) % (uint64_t)o->parts[k]) {
            fprintf(stderr, "bench_shuffle: --partitions %d: needs a multiple of --ranks %llu "
                            "dividing the global batch %llu\n", o->parts[k],
                    (unsigned long long)o->ranks, (unsigned long long)(o->batch * o->ranks));
            exit(2);
        }
}

/* One row of the table: a layout, an order and its figures. */
static int row(char *text, size_t cap, const char *layout, const char *name,
               const sc_quality_figures *f)
{
    return snprintf(text, cap, "| %s | %s | %.2f | %.1f | %.1f | %.3f |\n", layout, name, f->bits,
                    f->classes, f->shards, f->moved);
}

int main(int argc, char **argv)
{
    opts o = {65536, 10, 256, 64, 4, SC_WINDOW_AUTO, 3, 3 * 32 * 32 + 8, 0, {0}};
    const char *doc = NULL;
    parse(argc, argv, &o, &doc);
    int automatic = o.window == SC_WINDOW_AUTO;
    sc_config cfg = {.shuffle_window = o.window, .stream_bytes = UINT64_C(256) << 20};
    o.window = sc__config_window(&cfg, o.sample_bytes, o.shard, o.batch);
    o.samples -= o.samples % o.shard;
    uint32_t *random = malloc(sizeof *random * o.samples), *sorted = malloc(sizeof *sorted * o.samples);
    if (!random || !sorted)
        die("labels", NULL);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(7, 0, 0, 98));
    for (uint64_t i = 0; i < o.samples; i++) {
        random[i] = (uint32_t)sc__rng_below(&r, o.classes);
        sorted[i] = (uint32_t)(i * o.classes / o.samples);
    }
    static char text[8192];
    char window[64], parts[96] = "";
    snprintf(window, sizeof window, automatic ? "auto --sample-bytes %llu" : "%llu",
             (unsigned long long)(automatic ? o.sample_bytes : o.window));
    for (int k = 0, m = 0; k < o.nparts; k++)
        m += snprintf(parts + m, sizeof parts - (size_t)m, "%s%d", k ? "," : " --partitions ",
                      o.parts[k]);
    int n = snprintf(text, sizeof text,
                     "`bench_shuffle --samples %llu --classes %llu --shard %llu --batch %llu "
                     "--ranks %llu --window %s --epochs %llu%s` (plans and schedules only; "
                     "window %llu samples)\n\n"
                     "| labels stored | order | label entropy per batch (bits) | classes per "
                     "batch | shards per batch | moved |\n| --- | --- | ---: | ---: | ---: | ---: |\n",
                     (unsigned long long)o.samples, (unsigned long long)o.classes,
                     (unsigned long long)o.shard, (unsigned long long)o.batch,
                     (unsigned long long)o.ranks, window, (unsigned long long)o.epochs,
                     parts, (unsigned long long)o.window);
    const char *layout[] = {"random", "class-sorted"};
    const uint32_t *labels[] = {random, sorted};
    for (int l = 0; l < 2; l++) {
        quality sticky = measure(&o, SC_SHUFFLE_STICKY, 0, labels[l]);
        quality global = measure(&o, SC_SHUFFLE_GLOBAL, 0, labels[l]);
        const sc_quality_figures *f[3] = {&global.uniform, &sticky.plan, &global.plan};
        const char *name[3] = {"uniform permutation", "shardcache sticky", "shardcache global"};
        for (int k = 0; k < 3; k++)
            n += row(text + n, sizeof text - (size_t)n, layout[l], name[k], f[k]);
        for (int k = 0; k < o.nparts; k++) {
            quality part = measure(&o, SC_SHUFFLE_GLOBAL, (uint64_t)o.parts[k], labels[l]);
            char what[64];
            snprintf(what, sizeof what, "shardcache global, P = %d", o.parts[k]);
            n += row(text + n, sizeof text - (size_t)n, layout[l], what, &part.plan);
        }
    }
    printf("%s", text);
    const char *block = o.nparts ? "shuffle-partitions" : "shuffle";
    int rc = doc && bench_doc_write(doc, block, text) != 0;
    free(random);
    free(sorted);
    return rc;
}
