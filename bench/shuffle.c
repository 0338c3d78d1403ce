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
 *                 [--ranks R] [--window W] [--epochs E] [--doc FILE]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "hash.h"
#include "plan.h"
#include "schedule.h"

typedef struct opts {
    uint64_t samples, classes, shard, batch, ranks, window, epochs;
} opts;

/* What the batches look like, averaged over every batch. */
typedef struct quality {
    double bits, classes, shards;
    uint64_t batches;
} quality;

static void die(const char *what, const sc_error *err)
{
    fprintf(stderr, "bench_shuffle: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(1);
}

/* Adds one batch of ids (labels[id], shard = id / shard) to q. */
static void add_batch(quality *q, const uint64_t *ids, const opts *o, const uint32_t *labels,
                      uint64_t *count, unsigned char *seen)
{
    uint64_t nclasses = 0, nshards = 0;
    memset(count, 0, sizeof *count * o->classes);
    for (uint64_t i = 0; i < o->batch; i++) {
        nclasses += count[labels[ids[i]]]++ == 0;
        uint64_t s = ids[i] / o->shard;
        nshards += !seen[s];
        seen[s] = 1;
    }
    double h = 0;
    for (uint64_t k = 0; k < o->classes; k++)
        if (count[k]) {
            double p = (double)count[k] / (double)o->batch;
            h -= p * log2(p);
        }
    for (uint64_t i = 0; i < o->batch; i++)
        seen[ids[i] / o->shard] = 0;
    q->bits += h, q->classes += (double)nclasses, q->shards += (double)nshards;
    q->batches++;
}

static quality finish(quality q)
{
    double n = q.batches ? (double)q.batches : 1.0;
    q.bits /= n, q.classes /= n, q.shards /= n;
    return q;
}

/* Every rank's batches over the epochs of one mode. */
static quality measure(const opts *o, sc_shuffle_mode mode, const uint32_t *labels)
{
    uint64_t nshards = o->samples / o->shard;
    uint64_t *sizes = malloc(sizeof *sizes * nshards), *first = malloc(sizeof *first * (nshards + 1));
    uint64_t *count = malloc(sizeof *count * o->classes);
    unsigned char *seen = calloc(nshards, 1);
    if (!sizes || !first || !count || !seen)
        die("measure", NULL);
    for (uint64_t k = 0; k <= nshards; k++) {
        first[k] = k * o->shard;
        if (k < nshards)
            sizes[k] = o->shard;
    }
    quality q = {0};
    sc_plan *prev = NULL;
    sc_error err;
    for (uint64_t e = 0; e < o->epochs; e++) {
        sc_plan_params p = SC_PLAN_PARAMS_INIT;
        p.shard_sizes = sizes, p.nshards = nshards, p.world_size = (uint32_t)o->ranks;
        p.seed = 7, p.epoch = e, p.batch_size = o->batch, p.mode = mode, p.exchange = 0.1;
        sc_plan *plan = NULL;
        if (sc_plan_create(&p, prev, &plan, &err) != SC_OK)
            die("plan", &err);
        for (uint32_t r = 0; r < o->ranks; r++) {
            sc__sched s;
            if (sc__schedule(first, plan, r, o->batch, o->window, 7, 0, &s, &err) != SC_OK)
                die("schedule", &err);
            for (uint64_t b = 0; (b + 1) * o->batch <= s.nreal; b++)
                add_batch(&q, s.ids + b * o->batch, o, labels, count, seen);
            sc__sched_free(&s);
        }
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    free(sizes), free(first), free(count), free(seen);
    return finish(q);
}

/* A uniform random permutation of the whole dataset, cut into batches. */
static quality uniform(const opts *o, const uint32_t *labels)
{
    uint64_t *ids = malloc(sizeof *ids * o->samples), *count = malloc(sizeof *count * o->classes);
    unsigned char *seen = calloc(o->samples / o->shard + 1, 1);
    if (!ids || !count || !seen)
        die("uniform", NULL);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(7, 0, 0, 99));
    quality q = {0};
    for (uint64_t e = 0; e < o->epochs; e++) {
        for (uint64_t i = 0; i < o->samples; i++)
            ids[i] = i;
        for (uint64_t i = o->samples; i > 1; i--) {
            uint64_t j = sc__rng_below(&r, i), t = ids[i - 1];
            ids[i - 1] = ids[j], ids[j] = t;
        }
        for (uint64_t b = 0; (b + 1) * o->batch <= o->samples; b++)
            add_batch(&q, ids + b * o->batch, o, labels, count, seen);
    }
    free(ids), free(count), free(seen);
    return finish(q);
}

static void parse(int argc, char **argv, opts *o, const char **doc)
{
    struct {
        const char *flag;
        uint64_t *v;
    } f[] = {{"--samples", &o->samples}, {"--classes", &o->classes}, {"--shard", &o->shard},
             {"--batch", &o->batch},     {"--ranks", &o->ranks},     {"--window", &o->window},
             {"--epochs", &o->epochs}};
    for (int i = 1; i + 1 < argc; i += 2) {
        int known = !strcmp(argv[i], "--doc");
        if (known)
            *doc = argv[i + 1];
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
            if (!strcmp(argv[i], f[k].flag))
                *f[k].v = strtoull(argv[i + 1], NULL, 10), known = 1;
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
}

int main(int argc, char **argv)
{
    opts o = {65536, 10, 256, 64, 4, 4096, 3};
    const char *doc = NULL;
    parse(argc, argv, &o, &doc);
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
    static char text[4096];
    int n = snprintf(text, sizeof text,
                     "`bench_shuffle --samples %llu --classes %llu --shard %llu --batch %llu "
                     "--ranks %llu --window %llu --epochs %llu` (plans and schedules only)\n\n"
                     "| labels stored | order | label entropy per batch (bits) | classes per "
                     "batch | shards per batch |\n| --- | --- | ---: | ---: | ---: |\n",
                     (unsigned long long)o.samples, (unsigned long long)o.classes,
                     (unsigned long long)o.shard, (unsigned long long)o.batch,
                     (unsigned long long)o.ranks, (unsigned long long)o.window,
                     (unsigned long long)o.epochs);
    const char *layout[] = {"random", "class-sorted"};
    const uint32_t *labels[] = {random, sorted};
    for (int l = 0; l < 2; l++) {
        quality q[3] = {uniform(&o, labels[l]), measure(&o, SC_SHUFFLE_STICKY, labels[l]),
                        measure(&o, SC_SHUFFLE_GLOBAL, labels[l])};
        const char *name[3] = {"uniform permutation", "shardcache sticky", "shardcache global"};
        for (int k = 0; k < 3; k++)
            n += snprintf(text + n, sizeof text - (size_t)n, "| %s | %s | %.2f | %.1f | %.1f |\n",
                          layout[l], name[k], q[k].bits, q[k].classes, q[k].shards);
    }
    printf("%s", text);
    int rc = doc && bench_doc_write(doc, "shuffle", text) != 0;
    free(random);
    free(sorted);
    return rc;
}
