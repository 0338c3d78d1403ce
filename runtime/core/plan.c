/*
 * plan.c - computing epoch plans (sc_plan_create) from validated inputs
 * (plan_params.c); verifying one is plan_check.c's.
 *
 * Global mode cuts a seeded permutation of the shards into R runs of about
 * total/R samples and relabels the runs with a random permutation of the
 * ranks, which makes every shard's owner uniform over the ranks by
 * symmetry.  The permutation is stratified: each run takes one shard of
 * every block of R neighbouring shards, so that each rank's share spreads
 * over the whole dataset (neighbours are often alike: a class-sorted file).
 *
 * Sticky mode keeps last epoch's owners and moves a fraction q of the
 * shards, each to another rank within its block, so that shares stay
 * spread.  If the moves leave the spread of the loads above the largest
 * shard (unequal shards), a repair pass moves shards from the heaviest to
 * the lightest rank; each such move strictly lowers the sum of squared
 * loads, so the pass terminates.
 *
 * Each rank's list is then put in a spread order (plan_spread): every run
 * of consecutive shards in it, which is what the schedule shuffles
 * together, covers the whole share.
 */
#include "plan_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"

/* How far ahead random-order loops prefetch (a few hundred ns of work). */
#define PREFETCH 32

/* ---- assignment ------------------------------------------------------------ */

/*
 * Stratified: cut the shard indices into blocks of R neighbours and give
 * row k of the permutation one shard of every block, block j's members
 * dealt to the rows by its own random cyclic offset.  Neighbouring shards
 * are often alike (a class-sorted file, one source file per crawl): a
 * uniform permutation gives a rank of s shards a mix whose make-up errs by
 * about 1/sqrt(s), one shard a block by at most a block.  A shard's row is
 * still uniform over the rows, and the writes are sequential.  The rows
 * come out in file order, which plan_spread() undoes.
 */
static void plan_stratified_perm(uint32_t *perm, uint64_t n, uint32_t R, uint64_t key)
{
    uint64_t blocks = (n + R - 1) / R, i = 0;
    for (uint32_t k = 0; k < R; k++)
        for (uint64_t j = 0; j < blocks; j++) {
            uint64_t s = j * R + (k + sc__mix64(key ^ j) % R) % R;
            if (s < n)
                perm[i++] = (uint32_t)s;
        }
}

static uint64_t plan_bitrev(uint64_t x, unsigned bits)
{
    x = (x >> 1 & UINT64_C(0x5555555555555555)) | (x & UINT64_C(0x5555555555555555)) << 1;
    x = (x >> 2 & UINT64_C(0x3333333333333333)) | (x & UINT64_C(0x3333333333333333)) << 2;
    x = (x >> 4 & UINT64_C(0x0f0f0f0f0f0f0f0f)) | (x & UINT64_C(0x0f0f0f0f0f0f0f0f)) << 4;
    x = __builtin_bswap64(x);
    return bits ? x >> (64 - bits) : 0;
}

/*
 * Orders a rank's list, given in shard order (or, for a global run that
 * crosses rows of the permutation, two such runs, which spread as well),
 * so that every run of consecutive entries spreads over the whole list:
 * entry i is the one at sorted position bitrev(i) ^ mask, positions past
 * the end skipped (a van der Corput order; the mask varies it by epoch and
 * rank).  The schedule
 * shuffles samples within windows of consecutive shards: a window of w
 * shards then holds one shard of every w-th of the share, not w
 * neighbours.
 */
static void plan_spread(uint32_t *list, uint64_t n, uint32_t *tmp, uint64_t key)
{
    unsigned bits = 0;
    while ((UINT64_C(1) << bits) < n)
        bits++;
    uint64_t mask = sc__mix64(key) & ((UINT64_C(1) << bits) - 1);
    memcpy(tmp, list, sizeof *tmp * n);
    for (uint64_t i = 0, o = 0; o < n; i++) {
        uint64_t t = plan_bitrev(i, bits) ^ mask;
        if (t < n)
            list[o++] = tmp[t];
    }
}

static void plan_spread_lists(const sc_plan_params *p, sc_plan *plan, uint32_t *tmp)
{
    for (uint32_t r = 0; r < p->world_size; r++) {
        uint64_t lo = plan->unit_off[r], cnt = plan->unit_off[r + 1] - lo;
        plan_spread(plan->order + lo, cnt, tmp,
                    sc__rng_key(p->seed, p->epoch, SC__PURPOSE_WITHIN, r));
    }
}

/*
 * Global: cut a stratified permutation into R runs of about total/R
 * samples each (at least one shard each), and make run k the list of rank
 * label[k], in shard order until it is spread.
 */
static void plan_assign_fresh(const sc_plan_params *p, sc_plan *plan,
                              uint32_t *perm, uint64_t *load, uint64_t *label,
                              uint64_t total)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards, i = 0;
    uint64_t *start = plan->unit_samples; /* run start in perm, until loads go in */
    uint64_t *off = plan->unit_off;
    sc__rng rng;

    plan_stratified_perm(perm, n, R, sc__rng_key(p->seed, p->epoch, SC__PURPOSE_ORDER, 0));
    for (uint32_t r = 0; r < R; r++)
        label[r] = r;
    sc__rng_init(&rng, sc__rng_key(p->seed, p->epoch, SC__PURPOSE_LABEL, 0));
    for (uint32_t r = R; r > 1; r--) {
        uint64_t j = sc__rng_below(&rng, r), t = label[r - 1];
        label[r - 1] = label[j];
        label[j] = t;
    }

    unsigned __int128 acc = 0; /* samples handed out so far */
    for (uint32_t k = 0; k < R; k++) {
        uint32_t r = (uint32_t)label[k];
        /* Run k ends where the running total first reaches (k+1)*total/R. */
        unsigned __int128 goal = (unsigned __int128)total * (k + 1) / R;
        uint64_t keep = R - 1 - k; /* shards the later runs still need */
        start[r] = i;
        load[r] = 0;
        do {
            if (i + PREFETCH < n)
                __builtin_prefetch(&p->shard_sizes[perm[i + PREFETCH]]);
            uint64_t sz = p->shard_sizes[perm[i++]];
            load[r] += sz;
            acc += sz;
        } while (i < n - keep && (acc < goal || k + 1 == R));
        off[r + 1] = i - start[r];
    }
    off[0] = 0;
    for (uint32_t r = 0; r < R; r++) {
        memcpy(plan->order + off[r], perm + start[r], sizeof *perm * off[r + 1]);
        off[r + 1] += off[r];
    }
}

/*
 * Sticky: move round(q * N) shards, each within its block of R neighbours
 * (the blocks of plan_stratified_perm): m members of a block, picked at
 * random, pass their owners round a cycle.  A rank gives and takes a shard
 * of the same block, so a share that started spread over the dataset stays
 * spread, and equal shards leave every load as it was.  (Shards re-homed
 * anywhere, least loaded first, drift each rank's make-up towards a
 * uniform pick's within tens of epochs.)  A block's count comes from the
 * running total; one that would move a single shard waits for the next.
 * The blocks are visited from a random one each epoch: with q*R < 2 only
 * some blocks move, and a fixed start would move the same ones every time.
 */
/*
 * After a block's cycle: a picked member that kept its owner (the block
 * held two of that rank's shards: unequal shards cut a global run inside a
 * row) goes to a rank that holds none of the block, if one is left, which
 * also restores one shard a block.  Returns the members that moved.
 * mark[R] holds stamps; `stamp` is new for each block.
 */
static uint32_t plan_unstick(const sc_plan *prev, uint32_t *owner, uint64_t lo, uint32_t cnt,
                             const uint32_t *idx, uint32_t m, uint64_t *mark, uint64_t stamp,
                             uint32_t R, sc__rng *rng)
{
    uint32_t moved = 0, stuck = 0;
    for (uint32_t i = 0; i < m; i++) {
        moved += owner[lo + idx[i]] != prev->owner[lo + idx[i]];
        stuck += owner[lo + idx[i]] == prev->owner[lo + idx[i]];
    }
    if (!stuck)
        return moved;
    for (uint32_t i = 0; i < cnt; i++)
        mark[owner[lo + i]] = stamp;
    uint32_t r = (uint32_t)sc__rng_below(rng, R), left = R;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t s = lo + idx[i];
        if (owner[s] != prev->owner[s])
            continue;
        while (left && mark[r] == stamp)
            r = (r + 1) % R, left--;
        if (!left)
            break;
        mark[r] = stamp;
        owner[s] = r;
        moved++;
    }
    return moved;
}

static void plan_assign_sticky(const sc_plan_params *p, const sc_plan *prev,
                               uint32_t *owner, uint64_t *load, uint32_t *idx, uint64_t *mark)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards, done = 0, seen = 0, blocks = (n + R - 1) / R;
    sc__rng rng;

    memcpy(owner, prev->owner, sizeof *owner * n);
    memset(mark, 0, sizeof *mark * R);
    sc__rng_init(&rng, sc__rng_key(p->seed, p->epoch, SC__PURPOSE_RELEASE, 0));
    uint64_t first_block = sc__rng_below(&rng, blocks);
    for (uint64_t b = 0; b < blocks; b++) {
        uint64_t lo = (first_block + b) % blocks * R;
        uint32_t cnt = n - lo < R ? (uint32_t)(n - lo) : R;
        seen += cnt;
        uint64_t goal = (uint64_t)llround(p->exchange * (double)seen);
        uint32_t m = goal - done < cnt ? (uint32_t)(goal - done) : cnt;
        if (m < 2)
            continue;
        for (uint32_t i = 0; i < cnt; i++)
            idx[i] = i;
        for (uint32_t i = 0; i < m; i++) { /* a partial Fisher-Yates picks m */
            uint32_t j = i + (uint32_t)sc__rng_below(&rng, cnt - i), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        uint32_t first = owner[lo + idx[0]];
        for (uint32_t i = 0; i + 1 < m; i++)
            owner[lo + idx[i]] = owner[lo + idx[i + 1]];
        owner[lo + idx[m - 1]] = first;
        done += plan_unstick(prev, owner, lo, cnt, idx, m, mark, b + 1, R, &rng);
    }
    memset(load, 0, sizeof *load * R);
    for (uint64_t s = 0; s < n; s++)
        load[owner[s]] += p->shard_sizes[s];
}

static void plan_link_lists(const uint32_t *owner, uint64_t n, uint32_t R,
                            uint32_t *next, uint32_t *head)
{
    for (uint32_t r = 0; r < R; r++)
        head[r] = UINT32_MAX;
    for (uint64_t s = n; s-- > 0;) {
        next[s] = head[owner[s]];
        head[owner[s]] = (uint32_t)s;
    }
}

/* Moves the shard that *link points at from rank `from` to rank `to`. */
static void plan_move_head(const sc_plan_params *p, uint32_t *owner, uint64_t *load,
                           uint32_t *next, uint32_t *head, uint32_t from, uint32_t to,
                           uint32_t *link)
{
    uint32_t s = *link;
    *link = next[s];
    next[s] = head[to];
    head[to] = s;
    owner[s] = to;
    load[from] -= p->shard_sizes[s];
    load[to] += p->shard_sizes[s];
}

/*
 * Moves shards from the heaviest to the lightest rank until the spread is
 * at most the largest shard.  Only sticky plans can need it, and rarely;
 * `next`/`head` are per-rank singly linked lists of shards.
 */
static void plan_repair_balance(const sc_plan_params *p, uint32_t *owner,
                                uint64_t *load, uint32_t R, uint64_t largest,
                                uint32_t *next, uint32_t *head)
{
    uint64_t n = p->nshards;
    int built = 0;

    /*
     * First, no rank may be left without a shard (a sticky rank can give
     * its last one away): it takes one from the heaviest rank that holds
     * two or more, which exists because there are at least R shards.
     */
    for (uint32_t empty = 0; empty < R; empty++) {
        if (load[empty] != 0)
            continue;
        if (!built) {
            plan_link_lists(owner, n, R, next, head);
            built = 1;
        }
        uint32_t from = UINT32_MAX;
        for (uint32_t r = 0; r < R; r++)
            if (head[r] != UINT32_MAX && next[head[r]] != UINT32_MAX &&
                (from == UINT32_MAX || load[r] > load[from]))
                from = r;
        plan_move_head(p, owner, load, next, head, from, empty, &head[from]);
    }

    for (;;) {
        uint32_t hi = 0, lo = 0;
        for (uint32_t r = 1; r < R; r++) {
            if (load[r] > load[hi])
                hi = r;
            if (load[r] < load[lo])
                lo = r;
        }
        uint64_t spread = load[hi] - load[lo];
        if (spread <= largest)
            return;
        if (!built) {
            plan_link_lists(owner, n, R, next, head);
            built = 1;
        }
        /* Any shard smaller than the spread lowers sum(load^2); one exists. */
        uint32_t *link = &head[hi];
        while (*link != UINT32_MAX && p->shard_sizes[*link] >= spread)
            link = &next[*link];
        plan_move_head(p, owner, load, next, head, hi, lo, link);
    }
}

/* Counting sort of shards by owner (R sequential output streams). */
static void plan_build_order(const sc_plan_params *p, sc_plan *plan,
                             const uint64_t *load)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards;
    uint64_t *off = plan->unit_off;

    memset(off, 0, sizeof *off * (R + 1));
    for (uint64_t s = 0; s < n; s++)
        off[plan->owner[s] + 1]++;
    for (uint32_t r = 0; r < R; r++)
        off[r + 1] += off[r];
    /* unit_samples doubles as the fill cursor until the loads go in. */
    uint64_t *fill = plan->unit_samples;
    memcpy(fill, off, sizeof *fill * R);
    for (uint64_t s = 0; s < n; s++)
        plan->order[fill[plan->owner[s]]++] = (uint32_t)s;
    memcpy(plan->unit_samples, load, sizeof *load * R);
}

/* ---- planning ------------------------------------------------------------ */

/* Working memory of one sc_plan_create(), freed before it returns. */
typedef struct plan_work {
    uint32_t *scratch; /* [nshards] */
    uint32_t *head;    /* [R] */
    uint64_t *label;   /* [R] */
    uint64_t *load;    /* [R] samples per rank */
} plan_work;

static int plan_work_alloc(const sc_plan_params *p, plan_work *w, sc_error *err)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards;
    w->scratch = malloc(sizeof *w->scratch * n);
    w->head = malloc(sizeof *w->head * R);
    w->label = malloc(sizeof *w->label * R);
    w->load = malloc(sizeof *w->load * R);
    if (!w->scratch || !w->head || !w->label || !w->load)
        return sc__seterr(err, SC_ENOMEM,
                          "epoch %llu: no memory to plan %llu shards on %u ranks",
                          (unsigned long long)p->epoch, (unsigned long long)n, R);
    return SC_OK;
}

static void plan_work_free(plan_work *w)
{
    free(w->scratch);
    free(w->head);
    free(w->label);
    free(w->load);
}

static int plan_spread_exceeds(const uint64_t *load, uint32_t R, uint64_t largest)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t r = 0; r < R; r++) {
        lo = load[r] < lo ? load[r] : lo;
        hi = load[r] > hi ? load[r] : hi;
    }
    return hi - lo > largest;
}

/*
 * A global plan whose runs came out balanced keeps the permutation's runs;
 * any other plan is repaired and then listed by owner.  Either way each
 * list is in shard order until it is spread.
 */
static void plan_assign(const sc_plan_params *p, const sc_plan *prev,
                        sc_plan *plan, plan_work *w, uint64_t total,
                        uint64_t largest)
{
    uint32_t R = p->world_size;
    uint64_t *load = w->load;
    int reorder = 1;

    if (p->mode == SC_SHUFFLE_STICKY && prev) {
        plan_assign_sticky(p, prev, plan->owner, load, w->head, w->label);
    } else {
        plan_assign_fresh(p, plan, w->scratch, load, w->label, total);
        reorder = plan_spread_exceeds(load, R, largest);
        if (reorder)
            sc__plan_fill_owner(plan);
    }
    if (reorder) {
        /* scratch is free again and serves as the repair pass's links. */
        plan_repair_balance(p, plan->owner, load, R, largest, w->scratch, w->head);
        plan_build_order(p, plan, load);
    } else {
        memcpy(plan->unit_samples, load, sizeof *load * R);
        sc__plan_fill_owner(plan);
    }
    plan_spread_lists(p, plan, w->scratch);
}

static void plan_fill_info(const sc_plan_params *p, const sc_plan *prev,
                           sc_plan *plan, uint64_t total)
{
    sc_plan_info *info = &plan->info;
    info->epoch = p->epoch;
    info->seed = p->seed;
    info->fingerprint = p->fingerprint;
    info->mode = p->mode;
    info->remainder = p->remainder;
    info->exchange = p->exchange;
    info->batch_size = p->batch_size;
    info->partitions = p->partitions;
    info->total_samples = total;
    info->moved = sc__plan_moved(plan, prev);
}

/*
 * The plan over units: the shards assigned as if the units were ranks
 * with batches of their part of the global batch, then the remainder cut
 * (plan_cut.c).
 */
static int plan_make(const sc_plan_params *params, const sc_plan *prev, sc_plan *plan,
                     uint64_t total, uint64_t largest, sc_error *err)
{
    plan_work w = {0};
    sc_plan_params q = *params; /* the units' view: U "ranks", batches of bu */
    q.world_size = plan->units;
    q.batch_size = params->batch_size * params->world_size / plan->units;
    plan->unit_batch = q.batch_size;
    plan->info.remainder = params->remainder;
    plan->info.epoch = params->epoch;
    plan->info.batch_size = params->batch_size;
    int rc = plan_work_alloc(&q, &w, err);
    if (rc == SC_OK) {
        plan_assign(&q, prev, plan, &w, total, largest);
        rc = sc__plan_cut(plan, params->shard_sizes, total, err);
    }
    plan_work_free(&w);
    if (rc == SC_OK) {
        plan_fill_info(params, prev, plan, total);
        rc = sc__plan_seal(plan, err);
    }
    return rc;
}

int sc_plan_create(const sc_plan_params *params, const sc_plan *prev,
                   sc_plan **out, sc_error *err)
{
    uint64_t total = 0, largest = 0;
    sc_plan *plan = NULL;
    int rc;

    if (!out)
        return sc__seterr(err, SC_EINVAL, "plan output pointer is NULL");
    *out = NULL;
    if ((rc = sc__plan_params_validate(params, prev, &total, &largest, err)) != SC_OK)
        return rc;
    if ((rc = sc__plan_alloc(params->world_size, sc__plan_units_of(params), params->nshards,
                             &plan, err)) != SC_OK)
        return rc;
    if ((rc = plan_make(params, prev, plan, total, largest, err)) == SC_OK)
        *out = plan;
    else
        sc_plan_free(plan);
    return rc;
}

int sc__plan_matches(const sc_plan *plan, const sc_plan_params *p, int rank,
                     sc_error *err)
{
    const sc_plan_info *i = &plan->info;
    unsigned long long e = (unsigned long long)p->epoch;

#define SC__MISMATCH(what, fmt, got, want)                                   \
    return sc__seterr(err, SC_EPLAN,                                         \
                      "rank %d: plan for epoch %llu has " what " " fmt       \
                      ", this rank expects " fmt,                            \
                      rank, e, got, want)
    if (i->epoch != p->epoch)
        SC__MISMATCH("epoch", "%llu", (unsigned long long)i->epoch, e);
    if (i->world_size != p->world_size)
        SC__MISMATCH("world size", "%u", i->world_size, p->world_size);
    if (i->fingerprint != p->fingerprint)
        SC__MISMATCH("dataset fingerprint", "%016llx",
                     (unsigned long long)i->fingerprint,
                     (unsigned long long)p->fingerprint);
    if (i->seed != p->seed)
        SC__MISMATCH("seed", "%llu", (unsigned long long)i->seed,
                     (unsigned long long)p->seed);
    if (i->nshards != p->nshards)
        SC__MISMATCH("shard count", "%llu", (unsigned long long)i->nshards,
                     (unsigned long long)p->nshards);
    if (i->batch_size != p->batch_size)
        SC__MISMATCH("batch size", "%llu", (unsigned long long)i->batch_size,
                     (unsigned long long)p->batch_size);
    if (i->mode != p->mode)
        SC__MISMATCH("shuffle mode", "%d", (int)i->mode, (int)p->mode);
    if (i->remainder != p->remainder)
        SC__MISMATCH("remainder policy", "%d", (int)i->remainder,
                     (int)p->remainder);
    if (i->partitions != p->partitions)
        SC__MISMATCH("partitions", "%llu", (unsigned long long)i->partitions,
                     (unsigned long long)p->partitions);
    if (i->mode == SC_SHUFFLE_STICKY && i->exchange != p->exchange)
        SC__MISMATCH("exchange fraction", "%g", i->exchange, p->exchange);
#undef SC__MISMATCH
    return SC_OK;
}

int sc__plan_at(const sc_plan_params *params, const sc_plan *prev, sc_plan **out,
                sc_error *err)
{
    sc_plan *chain = NULL;
    int rc = SC_OK;
    for (uint64_t e = 0; params->mode == SC_SHUFFLE_STICKY && !prev && e < params->epoch &&
                         rc == SC_OK;
         e++) {
        sc_plan_params q = *params;
        sc_plan *next = NULL;
        q.epoch = e;
        rc = sc_plan_create(&q, chain, &next, err);
        sc_plan_free(chain);
        chain = next;
    }
    if (rc == SC_OK)
        rc = sc_plan_create(params, prev ? prev : chain, out, err);
    sc_plan_free(chain);
    return rc;
}
