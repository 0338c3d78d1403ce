/*
 * Schedules over partitions (runtime/core/schedule.c): with P partitions
 * and a global batch of G samples, the job's global batches (every rank's
 * k-th batch of ids, in rank order) are the same on 1, 2, 4 or 8 ranks,
 * epoch after epoch, in global and sticky mode, with drop and with pad;
 * every sample is delivered once or dropped by the policy, on the rank
 * that serves it, and a rank's padding repeats its own samples at the end
 * of its slots, in its last batch.  And without partitions (the schedule
 * a resume recomputes): the same, deterministic, and a window's slots the
 * window's own samples.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "plan_state.h"
#include "sc_test.h"
#include "schedule.h"

enum { EPOCHS = 3, NR = 4 };
static const uint32_t ranks[NR] = {1, 2, 4, 8};

/* One job's inputs but the world size: shards, P, G, window, policy. */
typedef struct job {
    uint64_t sizes[96], first[97], n, total;
    uint64_t P, G, window, seed;
    sc_remainder remainder;
    sc_shuffle_mode mode;
} job;

/* What an epoch delivers on R ranks: the global batches, pads marked; the drops. */
typedef struct epoch_out {
    uint64_t *ids;        /* [b G]: global batch k is ids[k G, (k+1) G) */
    unsigned char *pad;   /* [b G]: 1 where the slot repeats a sample */
    uint64_t b, dropped;
} epoch_out;

static void job_gen(job *j, sc__rng *r)
{
    j->P = sc__rng_below(r, 2) ? 16 : 8;
    j->G = j->P * (1 + sc__rng_below(r, 5)); /* R = 8 divides P; P divides G */
    do {
        j->n = j->P + sc__rng_below(r, 96 - j->P);
        j->first[0] = 0;
        for (uint64_t i = 0; i < j->n; i++) {
            j->sizes[i] = 1 + sc__rng_below(r, sc__rng_below(r, 2) ? 8 : 40);
            j->first[i + 1] = j->first[i] + j->sizes[i];
        }
        j->total = j->first[j->n];
    } while (j->total < j->G); /* partitions need a global batch, with pad too */
    uint64_t windows[4] = {0, 1, 3 * j->P, 17 * j->P};
    j->window = windows[sc__rng_below(r, 4)];
    j->seed = sc__rng_next(r);
}

static sc_plan_params job_params(const job *j, uint32_t R, uint64_t epoch)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = j->sizes;
    p.nshards = j->n;
    p.world_size = R;
    p.batch_size = j->G / R;
    p.seed = j->seed;
    p.epoch = epoch;
    p.remainder = j->remainder;
    p.mode = j->mode;
    p.exchange = 0.3;
    p.partitions = j->P;
    return p;
}

/*
 * Rank `rank`'s schedule into the global batches: its slots are real
 * samples it serves, then padding that repeats them, in its last batch.
 * seen[] counts deliveries and drops of each sample.
 */
static void put_rank(const job *j, const sc_plan *plan, uint32_t R, uint32_t rank,
                     epoch_out *o, uint32_t *seen)
{
    uint64_t B = j->G / R;
    sc__sched sc;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__schedule(j->first, plan, rank, B, j->window, j->seed, 0, &sc, &err), &err);
    assert_int_equal(sc.nslots, o->b * B);
    assert_true(sc.nreal <= sc.nslots && (o->b < 2 || sc.nslots - sc.nreal <= B));
    for (uint64_t q = 0; q < sc.nslots; q++) {
        uint64_t id = sc.ids[q], at = q / B * j->G + rank * B + q % B;
        uint32_t owner = UINT32_MAX;
        SC_ASSERT_OK(sc_plan_sample_owner(plan, j->first, id, &owner), NULL);
        assert_int_equal(owner, rank);
        o->ids[at] = id;
        o->pad[at] = q >= sc.nreal;
        if (q < sc.nreal) {
            seen[id]++;
            continue;
        }
        int repeats = 0; /* a pad repeats one of the rank's real samples */
        for (uint64_t i = 0; i < sc.nreal && !repeats; i++)
            repeats = sc.ids[i] == id;
        assert_true(repeats);
    }
    for (uint64_t i = 0; i < sc.ndropped; i++) {
        SC_ASSERT_OK(sc_plan_sample_owner(plan, j->first, sc.dropped[i], &(uint32_t){0}), NULL);
        seen[sc.dropped[i]]++;
    }
    o->dropped += sc.ndropped;
    sc__sched_free(&sc);
}

/* An epoch of `plan` on its R ranks: every sample delivered or dropped once. */
static void put_epoch(const job *j, const sc_plan *plan, uint32_t R, epoch_out *o)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    o->b = in.batches_per_rank;
    o->dropped = 0;
    o->ids = calloc(o->b * j->G + 1, sizeof *o->ids);
    o->pad = calloc(o->b * j->G + 1, 1);
    uint32_t *seen = calloc(j->total, sizeof *seen);
    assert_true(o->ids && o->pad && seen);
    for (uint32_t rank = 0; rank < R; rank++)
        put_rank(j, plan, R, rank, o, seen);
    for (uint64_t id = 0; id < j->total; id++)
        if (seen[id] != 1)
            fail_msg("R=%u epoch %llu: sample %llu delivered or dropped %u times", R,
                     (unsigned long long)in.epoch, (unsigned long long)id, seen[id]);
    uint64_t pads = 0;
    for (uint64_t q = 0; q < o->b * j->G; q++)
        pads += o->pad[q];
    assert_int_equal(o->dropped, in.dropped);
    assert_int_equal(pads, in.padded);
    free(seen);
}

static void epoch_out_free(epoch_out *o)
{
    free(o->ids);
    free(o->pad);
}

/* The job on 1, 2, 4 and 8 ranks, epoch by epoch (sticky plans chained): the same batches. */
static void check_job(const job *j, unsigned t)
{
    sc_plan *prev[NR] = {0};
    for (uint64_t e = 0; e < EPOCHS; e++) {
        epoch_out want = {0};
        for (int k = 0; k < NR; k++) {
            sc_plan_params p = job_params(j, ranks[k], e);
            sc_plan *plan = NULL;
            sc_error err = SC_ERROR_INIT;
            SC_ASSERT_OK(sc_plan_create(&p, prev[k], &plan, &err), &err);
            SC_ASSERT_OK(sc_plan_check(plan, &p, prev[k], &err), &err);
            epoch_out got = {0};
            put_epoch(j, plan, ranks[k], &got);
            if (k == 0)
                want = got;
            else if (got.b != want.b || memcmp(got.ids, want.ids, sizeof *got.ids * got.b * j->G) ||
                     memcmp(got.pad, want.pad, got.b * j->G))
                fail_msg("case %u: N=%llu in %llu shards, P=%llu G=%llu window %llu %s %s: epoch "
                         "%llu's global batches on %u ranks differ from 1 rank's", t,
                         (unsigned long long)j->total, (unsigned long long)j->n,
                         (unsigned long long)j->P, (unsigned long long)j->G,
                         (unsigned long long)j->window,
                         j->remainder == SC_REMAINDER_PAD ? "pad" : "drop",
                         j->mode == SC_SHUFFLE_STICKY ? "sticky" : "global",
                         (unsigned long long)e, ranks[k]);
            if (k > 0)
                epoch_out_free(&got);
            sc_plan_free(prev[k]);
            prev[k] = plan;
        }
        epoch_out_free(&want);
    }
    for (int k = 0; k < NR; k++)
        sc_plan_free(prev[k]);
}

static void test_global_batches_independent_of_ranks(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 0, 0, 0x5c4ed));
    unsigned cases = sc_test_cases(100);
    job j;
    for (unsigned t = 0; t < cases; t++) {
        job_gen(&j, &r);
        j.mode = t % 2 ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
        j.remainder = t / 2 % 2 ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
        check_job(&j, t);
    }
}


/* Collects a unit's pieces as ids, in plan order. */
typedef struct ids_ctx {
    const uint64_t *first;
    uint64_t *ids, n;
} ids_ctx;

static int collect(void *ctx, uint32_t shard, uint64_t lo, uint64_t hi)
{
    ids_ctx *c = ctx;
    for (uint64_t k = lo; k < hi; k++)
        c->ids[c->n++] = c->first[shard] + k;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * The shards a schedule reads (sc__sched_order): each once, in order of
 * first use, each slot pointing at its own; within the plan's bound, and
 * SC_EPLAN (no endless probe, nothing filled) with a bound one short.
 */
static void check_shard_order(const job *j, const sc_plan *plan, uint32_t rank, sc__sched *a)
{
    uint64_t k = 0, bound = sc__sched_bound(plan, rank, a->nslots, j->n);
    assert_int_equal(sc__sched_order(a, j->first, j->n, bound), SC_OK);
    const uint32_t *sh = a->shards, *at = a->slot_shard;
    uint64_t n = a->nshards;
    for (uint64_t q = 0; q < a->nslots; q++) {
        uint64_t s = 0;
        assert_int_equal(sc__shard_of(j->first, j->n, a->ids[q], &s), SC_OK);
        uint64_t i = 0;
        while (i < k && sh[i] != s)
            i++;
        k += i == k; /* a shard not seen before is the next one listed */
        assert_true(i < n && sh[i] == s && at[q] == i);
    }
    assert_int_equal(k, n);
    assert_true(n <= bound);
    if (n > 0) {
        assert_int_equal(sc__sched_order(a, j->first, j->n, n - 1), SC_EPLAN);
        assert_true(a->shards == sh && a->slot_shard == at && a->nshards == n); /* it stands */
    }
}

/*
 * One rank's plain schedule: computed twice the same; real slots then
 * pads (its own samples); without drops, window k's slots are a
 * permutation of plan positions [k w, (k+1) w).  Counts into seen[].
 */
static void check_plain_rank(const job *j, const sc_plan *plan, uint32_t rank, uint64_t B,
                             uint32_t *seen)
{
    sc__sched a, b;
    SC_ASSERT_OK(sc__schedule(j->first, plan, rank, B, j->window, j->seed, 0, &a, NULL), NULL);
    SC_ASSERT_OK(sc__schedule(j->first, plan, rank, B, j->window, j->seed, 0, &b, NULL), NULL);
    assert_int_equal(a.nslots, b.nslots);
    assert_memory_equal(a.ids, b.ids, sizeof *a.ids * a.nslots);
    check_shard_order(j, plan, rank, &a);
    ids_ctx c = {j->first, malloc(sizeof(uint64_t) * (j->total + 1)), 0};
    sc__plan_visit(plan, rank, j->first, collect, &c);
    for (uint64_t q = 0; q < a.nreal; q++)
        seen[a.ids[q]]++;
    for (uint64_t q = 0; q < a.ndropped; q++)
        seen[a.dropped[q]]++;
    qsort(c.ids, c.n, sizeof *c.ids, cmp_u64);
    for (uint64_t q = a.nreal; q < a.nslots; q++) /* a pad repeats this rank's own */
        assert_non_null(bsearch(&a.ids[q], c.ids, c.n, sizeof *c.ids, cmp_u64));
    c.n = 0;
    sc__plan_visit(plan, rank, j->first, collect, &c);
    uint64_t w = j->window > 1 ? j->window : 1;
    for (uint64_t lo = 0; !a.ndropped && lo < a.nreal; lo += w) {
        uint64_t cnt = a.nreal - lo < w ? a.nreal - lo : w;
        uint64_t *x = malloc(sizeof *x * cnt), *y = malloc(sizeof *y * cnt);
        memcpy(x, a.ids + lo, sizeof *x * cnt);
        memcpy(y, c.ids + lo, sizeof *y * cnt);
        qsort(x, cnt, sizeof *x, cmp_u64);
        qsort(y, cnt, sizeof *y, cmp_u64);
        assert_memory_equal(x, y, sizeof *x * cnt);
        free(x);
        free(y);
    }
    free(c.ids);
    sc__sched_free(&a);
    sc__sched_free(&b);
}

static void test_plain_schedules(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 0, 0, 0x91a1));
    job j;
    for (unsigned t = 0; t < sc_test_cases(100); t++) {
        job_gen(&j, &r);
        j.P = 0;
        j.mode = t % 2 ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
        j.remainder = t / 2 % 2 ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
        uint32_t R = 1 + (uint32_t)sc__rng_below(&r, 8);
        uint64_t B = 1 + sc__rng_below(&r, j.total / R < 16 ? j.total / R : 16);
        sc_plan_params p = job_params(&j, R, 0);
        p.batch_size = B;
        p.partitions = 0;
        sc_plan *plan = NULL;
        SC_ASSERT_OK(sc__plan_at(&p, NULL, &plan, NULL), NULL);
        uint32_t *seen = calloc(j.total, sizeof *seen);
        for (uint32_t k = 0; k < R; k++)
            check_plain_rank(&j, plan, k, B, seen);
        for (uint64_t id = 0; id < j.total; id++)
            if (seen[id] != 1)
                fail_msg("case %u: sample %llu delivered or dropped %u times", t,
                         (unsigned long long)id, seen[id]);
        free(seen);
        sc_plan_free(plan);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_batches_independent_of_ranks),
        cmocka_unit_test(test_plain_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
