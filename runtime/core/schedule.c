/*
 * schedule.c - a rank's delivery order in an epoch, from the plan alone.
 */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"

#define SC__PURPOSE_WINDOW 0x77696e646f77ULL /* "window": the shuffle's random stream */

void sc__sched_free(sc__sched *sc)
{
    free(sc->ids);
    free(sc->dropped);
    memset(sc, 0, sizeof *sc);
}

int sc__schedule(const uint64_t *shard_first, const sc_plan *plan, uint32_t rank, uint64_t batch,
                 uint64_t window, uint64_t seed, unsigned faults, sc__sched *out, sc_error *err)
{
    const uint32_t *mine;
    uint64_t n;
    sc_plan_info in;
    memset(out, 0, sizeof *out);
    sc_plan_get_info(plan, &in);
    sc_plan_rank(plan, rank, &mine, &n, NULL);

    /* Test-only faults change which shards this rank reads, on purpose. */
    int dup = (faults & SC__SCHED_DUP_SHARD) && n > 0;
    int skip = (faults & SC__SCHED_SKIP_SHARD) && n > 1;
    uint64_t nsh = n + (uint64_t)dup - (uint64_t)skip, m = 0;
    uint64_t *first = malloc(sizeof *first * (nsh + 1)), *len = malloc(sizeof *len * (nsh + 1));
    if (!first || !len) {
        free(first);
        free(len);
        return sc__seterr(err, SC_ENOMEM, "rank %u: epoch %llu: no memory for the schedule",
                          rank, (unsigned long long)in.epoch);
    }
    for (uint64_t i = 0; i < nsh; i++) {
        uint32_t shard = mine[i < (uint64_t)dup ? 0 : i - (uint64_t)dup];
        first[i] = shard_first[shard];
        len[i] = shard_first[shard + 1] - shard_first[shard];
        m += len[i];
    }
    uint64_t want = in.batches_per_rank * batch;
    if (want && !m) {
        free(first);
        free(len);
        return sc__seterr(err, SC_EPLAN, "rank %u: epoch %llu: %llu batches but no samples",
                          rank, (unsigned long long)in.epoch,
                          (unsigned long long)in.batches_per_rank);
    }
    /* The rank's positions in plan order, then shuffled window by window. */
    uint64_t *perm = malloc(sizeof *perm * (m + 1));
    out->nslots = want;
    out->nreal = m < want ? m : want;
    out->ndropped = m > want ? m - want : 0;
    out->ids = malloc(sizeof *out->ids * (want + 1));
    out->dropped = malloc(sizeof *out->dropped * (out->ndropped + 1));
    if (!perm || !out->ids || !out->dropped) {
        free(perm);
        free(first);
        free(len);
        sc__sched_free(out);
        return sc__seterr(err, SC_ENOMEM, "rank %u: epoch %llu: no memory for the schedule",
                          rank, (unsigned long long)in.epoch);
    }
    for (uint64_t i = 0, p = 0; i < nsh; i++)
        for (uint64_t off = 0; off < len[i]; off++)
            perm[p++] = first[i] + off;
    uint64_t w = window > 1 ? window : 1;
    for (uint64_t lo = 0, blk = 0; w > 1 && lo < m; lo += w, blk++) {
        uint64_t cnt = m - lo < w ? m - lo : w;
        sc__rng r;
        sc__rng_init(&r, sc__rng_key(seed, in.epoch, SC__PURPOSE_WINDOW,
                                     ((uint64_t)rank << 40) ^ blk));
        for (uint64_t i = cnt - 1; i > 0; i--) {
            uint64_t j = sc__rng_below(&r, i + 1);
            uint64_t t = perm[lo + i];
            perm[lo + i] = perm[lo + j];
            perm[lo + j] = t;
        }
    }
    for (uint64_t q = 0; q < want; q++)
        out->ids[q] = perm[sc__pad_slot(q, m)];
    for (uint64_t q = want; q < m; q++)
        out->dropped[q - want] = perm[q];
    free(perm);
    free(first);
    free(len);
    return SC_OK;
}

