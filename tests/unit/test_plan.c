/*
 * Properties of the epoch planner over randomized inputs: N up to 10^5
 * shards, equal, skewed and ragged sizes, 1 to 64 ranks, both modes, both
 * remainder policies, many seeds.  sc_plan_check() is the oracle for the
 * structural properties (exactly one owner, equal batches, balance, waste,
 * determinism); the statistical ones are tested here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash.h"
#include "plan_state.h"
#include "sc_test.h"

#define SC_T_GOLDEN_E0 0x4f13b59ce5ffe625
#define SC_T_GOLDEN_E1 0xf8ac0addba303c09
#define SC_T_GOLDEN_EQ 0x2f79eb65a9cc027b

typedef struct gen_case {
    uint64_t *sizes;
    sc_plan_params p;
} gen_case;

static uint64_t log_uniform(sc__rng *r, uint64_t lo, uint64_t hi)
{
    double x = log((double)lo) +
               (log((double)hi) - log((double)lo)) *
                   ((double)(sc__rng_next(r) >> 11) / 9007199254740992.0);
    uint64_t v = (uint64_t)exp(x);
    return v < lo ? lo : v > hi ? hi : v;
}

static void gen(gen_case *c, sc__rng *r)
{
    uint64_t n = log_uniform(r, 1, 100000);
    int shape = (int)sc__rng_below(r, 3);
    c->sizes = malloc(sizeof *c->sizes * n);
    assert_non_null(c->sizes);
    uint64_t k = log_uniform(r, 1, 4096);
    for (uint64_t i = 0; i < n; i++) {
        if (shape == 0) /* equal */
            c->sizes[i] = k;
        else if (shape == 1) /* skewed: heavy tail */
            c->sizes[i] = 1 + (uint64_t)(pow((double)sc__rng_below(r, 1000) / 1000.0, 4) * 5000);
        else /* equal with a short last shard, as a fixed-size layout gives */
            c->sizes[i] = i + 1 == n ? 1 + sc__rng_below(r, k) : k;
    }
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = c->sizes;
    p.nshards = n;
    p.world_size = (uint32_t)log_uniform(r, 1, n < 64 ? n : 64);
    p.seed = sc__rng_next(r);
    p.epoch = sc__rng_below(r, 3) == 0 ? 0 : sc__rng_below(r, 1000);
    p.remainder = sc__rng_below(r, 2) ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
    p.mode = sc__rng_below(r, 2) ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
    int qs = (int)sc__rng_below(r, 4);
    p.exchange = qs == 0 ? 0.0 : qs == 1 ? 1.0 : (double)sc__rng_below(r, 1001) / 1000.0;
    p.fingerprint = sc__rng_next(r);
    c->p = p;
}

/* A batch size that the smallest rank can fill under drop, most of the time. */
static uint64_t pick_batch(sc__rng *r, const gen_case *c)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < c->p.nshards; i++)
        total += c->sizes[i];
    uint64_t share = total / c->p.world_size / 2;
    return 1 + sc__rng_below(r, share > 512 ? 512 : share ? share : 1);
}

static void test_properties_randomized(void **state)
{
    (void)state;
    unsigned cases = sc_test_cases(150);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 0, 0, 1));
    unsigned checked = 0;

    for (unsigned t = 0; t < cases; t++) {
        gen_case c;
        gen(&c, &r);
        c.p.batch_size = pick_batch(&r, &c);
        sc_plan *prev = NULL;
        for (int e = 0; e < 3; e++, c.p.epoch++) {
            sc_plan *plan = NULL;
            sc_error err = SC_ERROR_INIT;
            int rc = sc_plan_create(&c.p, prev, &plan, &err);
            if (rc == SC_EINVAL && c.p.remainder == SC_REMAINDER_DROP &&
                strstr(err.msg, "larger than")) {
                assert_null(plan);
                break; /* a legitimate refusal: the batch is too big */
            }
            if (rc != SC_OK)
                print_error("case %u: N=%llu R=%u B=%llu mode=%d q=%g\n", t,
                            (unsigned long long)c.p.nshards, c.p.world_size,
                            (unsigned long long)c.p.batch_size, c.p.mode,
                            c.p.exchange);
            SC_ASSERT_OK(rc, &err);
            SC_ASSERT_OK(sc_plan_check(plan, &c.p, prev, &err), &err);

            sc_plan_info in;
            SC_ASSERT_OK(sc_plan_get_info(plan, &in), NULL);
            /* Equal batches, and waste bounded by R*B plus the imbalance. */
            uint64_t waste = in.dropped + in.padded;
            uint64_t largest = 0;
            for (uint64_t i = 0; i < c.p.nshards; i++)
                largest = c.sizes[i] > largest ? c.sizes[i] : largest;
            assert_true(waste <= (uint64_t)in.world_size * in.batch_size +
                                     (uint64_t)(in.world_size - 1) * largest);
            /* Owner lookups agree with the rank lists. */
            for (uint32_t k = 0; k < in.world_size; k++) {
                const uint32_t *sh;
                uint64_t ns, samples;
                SC_ASSERT_OK(sc_plan_rank(plan, k, &sh, &ns, &samples), NULL);
                if (ns == 0)
                    print_error("case %u epoch %d: rank %u has no shard (N=%llu "
                                "R=%u mode=%d q=%g)\n", t, e, k,
                                (unsigned long long)c.p.nshards, c.p.world_size,
                                c.p.mode, c.p.exchange);
                assert_true(ns >= 1);
                for (uint64_t i = 0; i < ns; i++) {
                    uint32_t o;
                    SC_ASSERT_OK(sc_plan_owner(plan, sh[i], &o), NULL);
                    assert_int_equal(o, k);
                }
                if (in.remainder == SC_REMAINDER_DROP)
                    assert_true(samples >= in.batches_per_rank * in.batch_size);
                else
                    assert_true(samples <= in.batches_per_rank * in.batch_size);
            }
            /* The decoded plan is the same plan. */
            void *buf;
            size_t len;
            SC_ASSERT_OK(sc_plan_encode(plan, &buf, &len, &err), &err);
            sc_plan *back = NULL;
            SC_ASSERT_OK(sc_plan_decode(buf, len, &back, &err), &err);
            SC_ASSERT_OK(sc_plan_check(back, &c.p, prev, &err), &err);
            assert_int_equal(back->info.hash, in.hash);
            assert_memory_equal(back->wire, buf, len);
            sc_plan_free(back);
            free(buf);
            checked++;
            sc_plan_free(prev);
            prev = plan;
        }
        sc_plan_free(prev);
        free(c.sizes);
    }
    /* Most cases must really have been checked, not refused. */
    assert_true(checked >= cases);
}

/* ---- the remainder at sample granularity ---------------------------------- */

/* A case of the remainder test: shards of 1..4096 samples, R, B, P. */
typedef struct rem_case {
    uint64_t sizes[256], first[257], n, total;
    sc_plan_params p;
} rem_case;

/* P: 0, or R k with k | B (so P | R B) and P <= the shards, picked at random. */
static uint64_t rem_partitions(sc__rng *r, uint32_t R, uint64_t B, uint64_t n)
{
    uint64_t ks[64], nk = 0;
    for (uint64_t k = 1; k <= B && (uint64_t)R * k <= n && nk < 64; k++)
        if (B % k == 0)
            ks[nk++] = k;
    return sc__rng_below(r, 2) && nk ? R * ks[sc__rng_below(r, nk)] : 0;
}

static void rem_gen(rem_case *c, sc__rng *r)
{
    uint32_t R = (uint32_t)log_uniform(r, 1, 64);
    c->n = R + sc__rng_below(r, sc__rng_below(r, 2) ? 8 : 256 - R);
    int small = sc__rng_below(r, 4) == 0; /* shards of 1..64: a rank's share near B */
    c->first[0] = 0;
    for (uint64_t i = 0; i < c->n; i++) {
        c->sizes[i] = small ? log_uniform(r, 1, 64)
                      : sc__rng_below(r, 4) ? log_uniform(r, 1, 4096) : 1 + sc__rng_below(r, 4096);
        c->first[i + 1] = c->first[i] + c->sizes[i];
    }
    c->total = c->first[c->n];
    /* Mostly a few global batches an epoch, where the remainder matters; some too few. */
    uint64_t most = c->total / R + c->total / R / 4 + 1, B;
    if (sc__rng_below(r, 4))
        B = log_uniform(r, 1, most < 512 ? most : 512);
    else /* about one global batch: N just above or below R x B */
        B = c->total / R + sc__rng_below(r, 2);
    B = B < 1 ? 1 : B > 512 ? 512 : B;
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = c->sizes;
    p.nshards = c->n;
    p.world_size = R;
    p.batch_size = B;
    p.seed = sc__rng_next(r);
    p.epoch = sc__rng_below(r, 100);
    p.remainder = sc__rng_below(r, 2) ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
    p.mode = sc__rng_below(r, 2) ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
    p.exchange = (double)sc__rng_below(r, 1001) / 1000.0;
    p.partitions = rem_partitions(r, R, B, c->n);
    c->p = p;
}

/* Drop refuses exactly N < R B; with partitions pad does too. */
static int rem_refused(const rem_case *c)
{
    uint64_t G = (uint64_t)c->p.world_size * c->p.batch_size;
    return c->total < G && (c->p.remainder == SC_REMAINDER_DROP || c->p.partitions);
}

/* The shards each rank reads (sc__plan_reads, sc__plan_reads_shard) are those it serves samples of. */
static void rem_check_reads(const rem_case *c, const sc_plan *plan, const sc_plan_info *in,
                            unsigned char reads[256][64])
{
    for (uint32_t k = 0; k < in->world_size; k++) {
        uint32_t *list = NULL;
        uint64_t n = 0;
        unsigned char listed[256] = {0};
        assert_int_equal(sc__plan_reads(plan, k, &list, &n), SC_OK);
        for (uint64_t i = 0; i < n; i++) {
            assert_true(list[i] < c->n && !listed[list[i]]); /* each once */
            listed[list[i]] = 1;
        }
        free(list);
        for (uint32_t s = 0; s < c->n; s++)
            if (listed[s] != reads[s][k] || sc__plan_reads_shard(plan, k, s) != reads[s][k])
                fail_msg("rank %u, shard %u: serves %d of its samples, listed %d, "
                         "sc__plan_reads_shard %d", k, s, reads[s][k], listed[s],
                         sc__plan_reads_shard(plan, k, s));
    }
}

/*
 * Every sample is served by exactly one rank: sc_plan_sample_owner over
 * all ids counts each rank's, which are its sc_plan_rank samples, which
 * add up to the dataset; each rank fills its batches (drop), or all but
 * the last with real samples and at least one (pad).
 */
static void rem_check_owners(const rem_case *c, const sc_plan *plan, const sc_plan_info *in)
{
    uint64_t count[64] = {0}, sum = 0, b = in->batches_per_rank, B = in->batch_size;
    static unsigned char reads[256][64]; /* [shard][rank]: it serves a sample of it */
    memset(reads, 0, sizeof reads);
    for (uint64_t id = 0, s = 0; id < c->total; id++) {
        uint32_t o = UINT32_MAX;
        SC_ASSERT_OK(sc_plan_sample_owner(plan, c->first, id, &o), NULL);
        assert_true(o < in->world_size);
        count[o]++;
        while (id >= c->first[s + 1])
            s++;
        reads[s][o] = 1;
    }
    rem_check_reads(c, plan, in, reads);
    for (uint32_t k = 0; k < in->world_size; k++) {
        uint64_t samples = 0;
        SC_ASSERT_OK(sc_plan_rank(plan, k, NULL, NULL, &samples), NULL);
        assert_int_equal(samples, count[k]);
        sum += samples;
        if (in->remainder == SC_REMAINDER_DROP)
            assert_true(samples >= b * B);
        else
            assert_true(samples <= b * B && samples >= 1 && (b == 1 || samples + B >= b * B));
    }
    assert_int_equal(sum, c->total);
}

/* At most 2 (U - 1) cuts, each a tail range of a shard, from its home to another unit. */
static void rem_check_cuts(const rem_case *c, const sc_plan *plan, const sc_plan_info *in)
{
    uint64_t U = in->partitions ? in->partitions : in->world_size;
    assert_true(in->cuts <= 2 * (U - 1));
    for (uint64_t i = 0; i < in->cuts; i++) {
        sc_plan_cut cut;
        uint32_t home;
        SC_ASSERT_OK(sc_plan_get_cut(plan, i, &cut), NULL);
        SC_ASSERT_OK(sc_plan_owner(plan, cut.shard, &home), NULL);
        assert_true(cut.begin < cut.end && cut.end <= c->sizes[cut.shard]);
        assert_true(cut.from_unit != cut.to_unit && cut.to_unit < U && cut.from == home);
        assert_int_equal(cut.to, cut.to_unit / (U / in->world_size));
    }
    assert_int_equal(sc_plan_get_cut(plan, in->cuts, &(sc_plan_cut){0}), SC_EINVAL);
}

/* One epoch's plan against the bounds; returns it for the next (sticky chains). */
static sc_plan *rem_epoch(const rem_case *c, const sc_plan *prev, unsigned t)
{
    sc_plan *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_plan_create(&c->p, prev, &plan, &err);
    if (rc != SC_OK)
        print_error("case %u: N=%llu in %llu shards, R=%u B=%llu P=%llu %s %s epoch %llu\n", t,
                    (unsigned long long)c->total, (unsigned long long)c->n, c->p.world_size,
                    (unsigned long long)c->p.batch_size, (unsigned long long)c->p.partitions,
                    c->p.remainder ? "pad" : "drop", c->p.mode ? "sticky" : "global",
                    (unsigned long long)c->p.epoch);
    SC_ASSERT_OK(rc, &err);
    SC_ASSERT_OK(sc_plan_check(plan, &c->p, prev, &err), &err);
    sc_plan_info in;
    SC_ASSERT_OK(sc_plan_get_info(plan, &in), NULL);
    uint64_t G = (uint64_t)in.world_size * in.batch_size;
    int drop = in.remainder == SC_REMAINDER_DROP;
    assert_int_equal(in.batches_per_rank, drop ? c->total / G : (c->total + G - 1) / G);
    assert_int_equal(in.dropped, drop ? c->total - in.batches_per_rank * G : 0);
    assert_int_equal(in.padded, drop ? 0 : in.batches_per_rank * G - c->total);
    assert_true(in.dropped < G && in.padded < G);
    rem_check_cuts(c, plan, &in);
    rem_check_owners(c, plan, &in);
    return plan;
}

/*
 * The remainder, randomized: shards of 1..4096 samples, 1..64 ranks,
 * batches of 1..512, drop and pad, global and sticky (chained over the
 * epochs), with and without partitions.  Drop refuses exactly N < R x B
 * (pad with partitions too), naming the sizes; otherwise every epoch's
 * plan passes sc_plan_check, drops or pads fewer than R x B samples with
 * equal batch counts, cuts at most 2 (U - 1) ranges, and serves every
 * sample from exactly one rank, which lists its shard among those it reads.
 * (Whole shards left up to a shard a rank over or under.)
 */
static void test_remainder_randomized(void **state)
{
    (void)state;
    unsigned cases = sc_test_cases(200), refused = 0, cut = 0, parts = 0, few = 0;
    clock_t t0 = clock();
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 0, 0, 32));
    rem_case *c = malloc(sizeof *c);
    assert_non_null(c);
    for (unsigned t = 0; t < cases; t++) {
        rem_gen(c, &r);
        sc_error err = SC_ERROR_INIT;
        int rc = sc_plan_params_check(&c->p, &err);
        if (rem_refused(c)) {
            char want[128];
            snprintf(want, sizeof want, "%llu samples", (unsigned long long)c->total);
            const char *why = c->p.partitions ? "with SC_PARTITIONS" : "with remainder=drop";
            if (rc != SC_EINVAL || !strstr(err.msg, want) ||
                ((c->p.partitions || c->p.remainder == SC_REMAINDER_DROP) &&
                 !strstr(err.msg, why)))
                fail_msg("case %u: N=%llu < %u x %llu: %s '%s'", t,
                         (unsigned long long)c->total, c->p.world_size,
                         (unsigned long long)c->p.batch_size, sc_status_name(rc), err.msg);
            refused++;
            continue;
        }
        SC_ASSERT_OK(rc, &err);
        sc_plan *prev = NULL;
        for (int e = 0; e < 4; e++, c->p.epoch++) {
            sc_plan *plan = rem_epoch(c, prev, t);
            cut += plan->info.cuts > 0;
            parts += plan->info.partitions > 0;
            few += plan->info.batches_per_rank <= 3;
            sc_plan_free(prev);
            prev = plan;
        }
        sc_plan_free(prev);
    }
    free(c);
    print_message("%u cases, %u refused; epochs: %u with cuts, %u partitioned, %u of at most "
                  "3 batches (%.2f s)\n", cases, refused, cut, parts, few,
                  (double)(clock() - t0) / CLOCKS_PER_SEC);
    assert_true(refused < cases / 2 + 1 && (cases < 100 || cut > cases));
}

/* Wilson-Hilferty: a chi-square value as a standard normal deviate. */
static double chi2_z(double x, double dof)
{
    double a = 2.0 / (9.0 * dof);
    return (cbrt(x / dof) - (1.0 - a)) / sqrt(a);
}

static void owner_position_uniformity(int skewed)
{
    enum { N = 48, R = 6, EPOCHS = 3000 };
    uint64_t sizes[N];
    static unsigned owner[N][R], pos[N][N / R];
    memset(owner, 0, sizeof owner);
    memset(pos, 0, sizeof pos);
    for (int i = 0; i < N; i++)
        sizes[i] = skewed ? 100 + (uint64_t)(i % 7) : 100;

    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = N;
    p.world_size = R;
    p.seed = sc_test_seed();
    p.batch_size = 10;
    for (uint64_t e = 0; e < EPOCHS; e++) {
        sc_plan *plan;
        sc_error err;
        p.epoch = e;
        SC_ASSERT_OK(sc_plan_create(&p, NULL, &plan, &err), &err);
        for (uint32_t k = 0; k < R; k++) {
            const uint32_t *sh;
            uint64_t ns;
            sc_plan_rank(plan, k, &sh, &ns, NULL);
            for (uint64_t i = 0; i < ns; i++) {
                owner[sh[i]][k]++;
                if (!skewed) /* every rank holds N/R shards */
                    pos[sh[i]][i]++;
            }
        }
        sc_plan_free(plan);
    }
    double x = 0, expect = (double)EPOCHS / R;
    for (int s = 0; s < N; s++)
        for (int k = 0; k < R; k++)
            x += (owner[s][k] - expect) * (owner[s][k] - expect) / expect;
    double z = chi2_z(x, N * (R - 1));
    print_message("owners: chi2=%.1f dof=%d z=%.2f\n", x, N * (R - 1), z);
    assert_true(fabs(z) < 5.0);
    if (!skewed) {
        x = 0;
        expect = (double)EPOCHS / (N / R);
        for (int s = 0; s < N; s++)
            for (int i = 0; i < N / R; i++)
                x += (pos[s][i] - expect) * (pos[s][i] - expect) / expect;
        z = chi2_z(x, N * (N / R - 1));
        print_message("positions: chi2=%.1f dof=%d z=%.2f\n", x, N * (N / R - 1), z);
        assert_true(fabs(z) < 5.0);
    }
}

static void test_global_uniform_equal(void **state)
{
    (void)state;
    owner_position_uniformity(0);
}

static void test_global_uniform_skewed(void **state)
{
    (void)state;
    owner_position_uniformity(1);
}

/* Sticky moves q*N +- 2% of shards per epoch, and still balances. */
static void test_sticky_exchange_fraction(void **state)
{
    (void)state;
    static const double qs[] = {0.0, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0};
    static const uint32_t ranks[] = {2, 8, 64};
    enum { N = 20000 };
    uint64_t *sizes = malloc(sizeof *sizes * N);
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 1, 2, 3));

    for (int skew = 0; skew < 2; skew++) {
        for (uint64_t i = 0; i < N; i++)
            sizes[i] = skew ? 1 + sc__rng_below(&r, 3000) : 1000;
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
            for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
                sc_plan_params p = SC_PLAN_PARAMS_INIT;
                p.shard_sizes = sizes;
                p.nshards = N;
                p.world_size = ranks[ri];
                p.seed = sc__rng_next(&r);
                p.batch_size = 64;
                p.mode = SC_SHUFFLE_STICKY;
                p.exchange = qs[qi];
                sc_plan *prev = NULL;
                for (p.epoch = 0; p.epoch < 4; p.epoch++) {
                    sc_plan *plan;
                    sc_error err;
                    SC_ASSERT_OK(sc_plan_create(&p, prev, &plan, &err), &err);
                    SC_ASSERT_OK(sc_plan_check(plan, &p, prev, &err), &err);
                    if (prev) {
                        double want = qs[qi] * N;
                        double got = (double)plan->info.moved;
                        if (fabs(got - want) > 0.02 * N)
                            print_error("q=%g R=%u skew=%d: moved %.0f of %d\n",
                                        qs[qi], ranks[ri], skew, got, N);
                        assert_true(fabs(got - want) <= 0.02 * N);
                        if (qs[qi] == 0.0 && !skew)
                            assert_int_equal(plan->info.moved, 0);
                    }
                    sc_plan_free(prev);
                    prev = plan;
                }
                sc_plan_free(prev);
            }
        }
    }
    free(sizes);
}

/*
 * Sticky moves reach every shard: with q*R < 2 only some blocks move in an
 * epoch, and which ones must change from epoch to epoch (a fixed set would
 * leave most shards on their first owner forever).
 */
static void test_sticky_moves_every_shard(void **state)
{
    (void)state;
    enum { N = 1000, EPOCHS = 100 };
    static const uint32_t ranks[] = {2, 3, 4, 8, 16};
    uint64_t sizes[N];
    unsigned char moved[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 100;
    for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
        sc_plan_params p = SC_PLAN_PARAMS_INIT;
        p.shard_sizes = sizes, p.nshards = N, p.world_size = ranks[ri], p.batch_size = 10;
        p.seed = sc_test_seed(), p.mode = SC_SHUFFLE_STICKY, p.exchange = 0.1;
        sc_plan *prev = NULL, *plan;
        sc_error err;
        memset(moved, 0, sizeof moved);
        for (p.epoch = 0; p.epoch < EPOCHS; p.epoch++) {
            SC_ASSERT_OK(sc_plan_create(&p, prev, &plan, &err), &err);
            for (uint64_t s = 0; prev && s < N; s++) {
                uint32_t a, b;
                sc_plan_owner(prev, s, &a);
                sc_plan_owner(plan, s, &b);
                moved[s] |= a != b;
            }
            sc_plan_free(prev);
            prev = plan;
        }
        sc_plan_free(prev);
        int never = 0;
        for (int s = 0; s < N; s++)
            never += !moved[s];
        /* Moving 10% a epoch at random leaves 0.9^99 = 0.003% unmoved. */
        print_message("R=%u: %d of %d shards never moved in %d epochs\n", ranks[ri], never, N,
                      EPOCHS);
        assert_true(never < N / 100);
    }
}

/*
 * Shares spread over the dataset: with equal shards, each rank holds one
 * shard of every block of R neighbours in a global plan and still after
 * epochs of sticky moves; and each rank's list is in spread order, so that
 * its first 2^k shards fall into 2^k different 2^k-ths of its share.
 */
static void check_spread(const sc_plan *plan, uint32_t R, uint64_t B)
{
    unsigned char *held = calloc(R * B, 1);
    uint64_t *sorted = malloc(sizeof *sorted * B);
    unsigned char *hit = malloc(B);
    for (uint32_t r = 0; r < R; r++) {
        const uint32_t *sh;
        uint64_t ns;
        sc_plan_rank(plan, r, &sh, &ns, NULL);
        assert_int_equal(ns, B);
        for (uint64_t i = 0; i < ns; i++) {
            assert_int_equal(held[(uint64_t)r * B + sh[i] / R], 0); /* one a block */
            held[(uint64_t)r * B + sh[i] / R] = 1;
            sorted[sh[i] / R] = i; /* the block is the shard's rank in its share */
        }
        for (uint64_t k = 1; k <= B; k *= 2) {
            memset(hit, 0, B);
            for (uint64_t b = 0; b < B; b++)
                if (sorted[b] < k) {
                    assert_int_equal(hit[b * k / B], 0);
                    hit[b * k / B] = 1;
                }
        }
    }
    free(held), free(sorted), free(hit);
}

static void test_shares_spread(void **state)
{
    (void)state;
    sc__rng r;
    sc__rng_init(&r, sc__rng_key(sc_test_seed(), 5, 6, 7));
    for (int c = 0; c < 40; c++) {
        uint32_t R = 1 + (uint32_t)sc__rng_below(&r, 24);
        uint64_t B = UINT64_C(1) << sc__rng_below(&r, 8), n = R * B;
        uint64_t *sizes = malloc(sizeof *sizes * n);
        for (uint64_t i = 0; i < n; i++)
            sizes[i] = 100;
        sc_plan_params p = SC_PLAN_PARAMS_INIT;
        p.shard_sizes = sizes, p.nshards = n, p.world_size = R, p.batch_size = 10;
        p.seed = sc__rng_next(&r);
        p.mode = c % 2 ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
        p.exchange = (double)sc__rng_below(&r, 101) / 100.0;
        sc_plan *prev = NULL, *plan;
        sc_error err;
        for (p.epoch = 0; p.epoch < 12; p.epoch++) {
            SC_ASSERT_OK(sc_plan_create(&p, prev, &plan, &err), &err);
            check_spread(plan, R, B);
            sc_plan_free(prev);
            prev = plan;
        }
        sc_plan_free(prev);
        free(sizes);
    }
}

/*
 * Determinism across machines: a fixed input must hash to the same value
 * forever (a change here is a wire-format or algorithm change: bump the
 * plan version and say so).  Also independent of allocation or call order.
 */
static void test_golden_hashes(void **state)
{
    (void)state;
    uint64_t sizes[1000];
    for (int i = 0; i < 1000; i++)
        sizes[i] = 500 + (uint64_t)(i * 7919 % 300);
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = 1000;
    p.world_size = 7;
    p.seed = 42;
    p.batch_size = 32;
    p.mode = SC_SHUFFLE_STICKY;
    p.exchange = 0.25;
    p.fingerprint = 0xfeed;
    sc_plan *a = NULL, *b = NULL;
    sc_error err;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &a, &err), &err);
    p.epoch = 1;
    SC_ASSERT_OK(sc_plan_create(&p, a, &b, &err), &err);
    print_message("golden: %016llx %016llx\n", (unsigned long long)a->info.hash,
                  (unsigned long long)b->info.hash);
    assert_int_equal(a->info.hash, (uint64_t)SC_T_GOLDEN_E0);
    assert_int_equal(b->info.hash, (uint64_t)SC_T_GOLDEN_E1);
    sc_plan_free(a);
    sc_plan_free(b);

    /* Equal sizes take the direct global path (no repair, no reorder). */
    for (int i = 0; i < 1000; i++)
        sizes[i] = 64;
    p.mode = SC_SHUFFLE_GLOBAL;
    p.epoch = 3;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &a, &err), &err);
    print_message("golden equal: %016llx\n", (unsigned long long)a->info.hash);
    assert_int_equal(a->info.hash, (uint64_t)SC_T_GOLDEN_EQ);
    sc_plan_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_properties_randomized),
        cmocka_unit_test(test_remainder_randomized),
        cmocka_unit_test(test_global_uniform_equal),
        cmocka_unit_test(test_global_uniform_skewed),
        cmocka_unit_test(test_sticky_exchange_fraction),
        cmocka_unit_test(test_shares_spread),
        cmocka_unit_test(test_sticky_moves_every_shard),
        cmocka_unit_test(test_golden_hashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
