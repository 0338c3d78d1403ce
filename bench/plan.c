/*
 * bench/plan - how long rank 0 takes to plan an epoch and how big the
 * message is, at 10^7 shards on 4096 ranks by default.
 *
 *   bench_plan [--shards N] [--ranks R] [--runs K] [--doc docs/benchmarks.md]
 *
 * Each figure is the median of K runs on one core.  Sticky is timed for
 * epoch 1 (the epoch-0 plan is its input); global for a fresh epoch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_doc.h"
#include "plan_state.h"

typedef struct row {
    const char *mode;
    const char *sizes;
    double plan_s, decode_s;
    uint64_t bytes, moved;
} row;

static void run(row *out, const uint64_t *sizes, uint64_t n, uint32_t R,
                sc_shuffle_mode mode, int runs)
{
    double tp[16], td[16];
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = n;
    p.world_size = R;
    p.seed = 7;
    p.batch_size = 32;
    p.mode = mode;
    p.exchange = 0.1;
    sc_plan *prev = NULL;
    sc_error err;
    if (mode == SC_SHUFFLE_STICKY &&
        sc_plan_create(&p, NULL, &prev, &err) != SC_OK) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        exit(1);
    }
    p.epoch = 1;
    for (int i = 0; i < runs; i++) {
        sc_plan *plan = NULL, *back = NULL;
        double t0 = bench_now();
        if (sc_plan_create(&p, prev, &plan, &err) != SC_OK) {
            fprintf(stderr, "bench_plan: %s\n", err.msg);
            exit(1);
        }
        double t1 = bench_now();
        if (sc_plan_decode(plan->wire, plan->wire_len, &back, &err) != SC_OK) {
            fprintf(stderr, "bench_plan: %s\n", err.msg);
            exit(1);
        }
        double t2 = bench_now();
        tp[i] = t1 - t0;
        td[i] = t2 - t1;
        out->bytes = plan->info.bytes;
        out->moved = plan->info.moved;
        sc_plan_free(plan);
        sc_plan_free(back);
    }
    sc_plan_free(prev);
    out->plan_s = bench_median(tp, runs);
    out->decode_s = bench_median(td, runs);
}

int main(int argc, char **argv)
{
    uint64_t n = 10000000;
    uint32_t R = 4096;
    int runs = 3;
    const char *doc = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shards") && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            R = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--doc") && i + 1 < argc)
            doc = argv[++i];
        else {
            fprintf(stderr, "usage: bench_plan [--shards N] [--ranks R] [--runs K] [--doc FILE]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 16 || n < R || R == 0) {
        fprintf(stderr, "bench_plan: need 1 <= runs <= 16 and ranks <= shards\n");
        return 2;
    }
    uint64_t *equal = malloc(sizeof *equal * n), *skew = malloc(sizeof *skew * n);
    if (!equal || !skew)
        return 1;
    for (uint64_t i = 0; i < n; i++) {
        equal[i] = 1024;
        skew[i] = 64 + (i * 2654435761u) % 4000;
    }
    row rows[4] = {{"global", "equal", 0, 0, 0, 0}, {"sticky q=0.1", "equal", 0, 0, 0, 0},
                   {"global", "skewed", 0, 0, 0, 0}, {"sticky q=0.1", "skewed", 0, 0, 0, 0}};
    run(&rows[0], equal, n, R, SC_SHUFFLE_GLOBAL, runs);
    run(&rows[1], equal, n, R, SC_SHUFFLE_STICKY, runs);
    run(&rows[2], skew, n, R, SC_SHUFFLE_GLOBAL, runs);
    run(&rows[3], skew, n, R, SC_SHUFFLE_STICKY, runs);

    char host[64] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char text[4096];
    int off = snprintf(text, sizeof text,
                       "`bench_plan --shards %" PRIu64 " --ranks %u --runs %d` "
                       "(median of %d, one core, %ld cores online)\n\n"
                       "| mode | shard sizes | plan (s) | decode+check (s) | plan message | bytes/shard | shards moved |\n"
                       "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
                       n, R, runs, runs, sysconf(_SC_NPROCESSORS_ONLN));
    for (int i = 0; i < 4; i++)
        off += snprintf(text + off, sizeof text - (size_t)off,
                        "| %s | %s | %.3f | %.3f | %.1f MiB | %.2f | %.2f%% |\n",
                        rows[i].mode, rows[i].sizes, rows[i].plan_s, rows[i].decode_s,
                        (double)rows[i].bytes / 1048576.0,
                        (double)rows[i].bytes / (double)n,
                        100.0 * (double)rows[i].moved / (double)n);
    fputs(text, stdout);
    free(equal);
    free(skew);
    if (doc && bench_doc_write(doc, "plan", text) != 0) {
        fprintf(stderr, "bench_plan: cannot write %s\n", doc);
        return 1;
    }
    return 0;
}
