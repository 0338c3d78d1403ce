/*
 * bench/ownership - what exactly-once checking costs a batch: assembling
 * batches (one memcpy of B samples of S bytes, the least any loader does)
 * with and without the ledger's per-batch check and sketch update, side by
 * side in one run, plus the end-of-epoch reduction's size.
 *
 *   bench_ownership [--samples N] [--batch B] [--sample-bytes S] [--runs K] [--doc FILE]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_doc.h"
#include "ledger.h"
#include "plan_state.h"

int main(int argc, char **argv)
{
    uint64_t n = 1 << 20, B = 256, S = 3 * 64 * 64, shard = 1024;
    int runs = 5;
    const char *doc = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--samples"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            B = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--sample-bytes"))
            S = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--doc"))
            doc = argv[i + 1];
    }
    if (runs < 1 || runs > 21 || B == 0 || n < B)
        return 2;
    MPI_Init(&argc, &argv);
    uint64_t nshards = (n + shard - 1) / shard;
    uint64_t *sizes = malloc(sizeof *sizes * nshards), *first = malloc(sizeof *first * (nshards + 1));
    first[0] = 0;
    for (uint64_t k = 0; k < nshards; k++) {
        sizes[k] = k + 1 < nshards ? shard : n - k * shard;
        first[k + 1] = first[k] + sizes[k];
    }
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = nshards;
    p.batch_size = B;
    unsigned char *src = malloc(shard * S), *dst = malloc(B * S);
    memset(src, 7, shard * S);
    uint64_t *ids = malloc(sizeof *ids * B);
    double with[21], without[21], alone[21];
    sc_error err;
    for (int r = 0; r < runs; r++) {
        for (int mode = 0; mode < 3; mode++) {
            sc__ledger *l = NULL;
            sc_plan *plan = NULL;
            p.epoch = (uint64_t)r;
            sc_plan_create(&p, NULL, &plan, &err);
            if (mode >= 1 && (sc__ledger_open(MPI_COMM_WORLD, nshards, SC__PLAN_MAX_CUTS(p.world_size), first, NULL, &l, &err) ||
                         sc__ledger_begin(l, plan, &err))) {
                fprintf(stderr, "bench_ownership: %s\n", err.msg);
                return 1;
            }
            double t0 = bench_now();
            for (uint64_t b = 0; b + B <= n; b += B) {
                for (uint64_t k = 0; k < B; k++)
                    ids[k] = b + k;
                if (mode < 2)
                    memcpy(dst, src + ((b % shard) / B) * B * S % (shard * S), B * S);
                if (mode >= 1) {
                    sc__ledger_check(l, plan->info.epoch, ids, B, &err);
                    sc__ledger_consume(l, plan->info.epoch, ids, B, 0, &err);
                }
            }
            double t = bench_now() - t0;
            if (mode) {
                sc_exactly_once v;
                sc__ledger_end(l, plan->info.epoch, &err);
                sc__ledger_result(l, plan->info.epoch, 1, &v, &err);
                sc__ledger_close(l);
                *(mode == 1 ? &with[r] : &alone[r]) = t;
            } else {
                without[r] = t;
            }
            sc_plan_free(plan);
        }
    }
    double a = bench_median(without, runs), w = bench_median(with, runs),
           o = bench_median(alone, runs);
    char text[2048];
    snprintf(text, sizeof text,
             "`bench_ownership --samples %" PRIu64 " --batch %" PRIu64 " --sample-bytes %" PRIu64
             " --runs %d` (one rank, median of %d)\n\n"
             "| delivery loop | batches/s | overhead |\n"
             "| --- | ---: | ---: |\n"
             "| batch assembly (memcpy of %" PRIu64 " KiB per batch) | %.0f | - |\n"
             "| same, with ledger check + sketch per batch | %.0f | %.2f%% |\n"
             "| ledger check + sketch alone, no copy | %.0f | %.2f%% of the copy's time |\n\n"
             "End-of-epoch verification: one MPI_Iallreduce of 9 x 8 bytes per rank per "
             "epoch (default mode); SC_VERIFY=full adds %" PRIu64 " x 4 bytes.\n",
             n, B, S, runs, runs, B * S / 1024, (double)(n / B) / a, (double)(n / B) / w,
             100.0 * (w - a) / a, (double)(n / B) / o, 100.0 * o / a, n);
    fputs(text, stdout);
    int rc = doc && bench_doc_write(doc, "ownership", text) != 0;
    free(sizes);
    free(first);
    free(src);
    free(dst);
    free(ids);
    MPI_Finalize();
    return rc;
}
