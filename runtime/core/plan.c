/*
 * plan.c - computing and checking epoch plans.
 *
 * Assignment is "least loaded first" (LPT without the sort): shards are
 * taken in a seeded random order and each goes to the rank holding the
 * fewest samples.  Whatever the order, the rank that ends heaviest received
 * its last shard while it was the lightest, so per-rank sample counts never
 * differ by more than the largest shard.  Global mode then relabels ranks
 * with a random permutation, which makes every shard's owner uniform over
 * the ranks by symmetry; each rank's list is shuffled so positions are
 * uniform too.
 *
 * Sticky mode keeps last epoch's owners and releases a fraction q of each
 * rank's shards (stratified, so that what stays is still balanced), then
 * hands the released shards, least loaded first, to a rank other than their
 * previous owner.  If that leaves the spread above the largest shard, a
 * repair pass moves shards from the heaviest to the lightest rank; each such
 * move strictly lowers the sum of squared loads, so the pass terminates.
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"

/* Purposes that key independent random streams of one (seed, epoch). */
enum {
    PURPOSE_ORDER = 1,   /* order shards are assigned in */
    PURPOSE_LABEL = 2,   /* global: relabelling of ranks */
    PURPOSE_RELEASE = 3, /* sticky: which shards move */
    PURPOSE_WITHIN = 4   /* each rank's own shard order */
};

/* How far ahead random-order loops prefetch (a few hundred ns of work). */
#define PREFETCH 32

static void shuffle_u32(uint32_t *a, uint64_t n, sc__rng *rng)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = sc__rng_below(rng, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* ---- a min-heap of ranks keyed by (load, rank), for least-loaded-first --- */

typedef struct heap {
    uint32_t *slot; /* slot[i] = rank at heap position i */
    uint64_t *load; /* load[rank] */
    uint32_t n;
} heap;

static inline int heap_less(const heap *h, uint32_t a, uint32_t b)
{
    return h->load[a] < h->load[b] || (h->load[a] == h->load[b] && a < b);
}

static void heap_sift_down(heap *h, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < h->n && heap_less(h, h->slot[l], h->slot[m]))
            m = l;
        if (l + 1 < h->n && heap_less(h, h->slot[l + 1], h->slot[m]))
            m = l + 1;
        if (m == i)
            return;
        uint32_t t = h->slot[i];
        h->slot[i] = h->slot[m];
        h->slot[m] = t;
        i = m;
    }
}

static void heap_build(heap *h)
{
    for (uint32_t i = 0; i < h->n; i++)
        h->slot[i] = i;
    for (uint32_t i = h->n / 2; i-- > 0;)
        heap_sift_down(h, i);
}

/*
 * Gives `size` samples to the least loaded rank other than `avoid` (pass
 * UINT32_MAX to avoid none) and returns it.  The second smallest key is one
 * of the root's children, so avoiding a rank costs no pop and push.
 */
static uint32_t heap_give(heap *h, uint64_t size, uint32_t avoid)
{
    uint32_t pos = 0;
    if (h->slot[0] == avoid && h->n > 1) {
        pos = 1;
        if (h->n > 2 && heap_less(h, h->slot[2], h->slot[1]))
            pos = 2;
    }
    uint32_t r = h->slot[pos];
    h->load[r] += size;
    heap_sift_down(h, pos);
    return r;
}

/* ---- validation ---------------------------------------------------------- */

static int check_params(const sc_plan_params *p, const sc_plan *prev,
                        uint64_t *total, uint64_t *largest, sc_error *err)
{
    if (!p)
        return sc__seterr(err, SC_EINVAL, "plan parameters are NULL");
    if (p->nshards == 0)
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: the dataset has zero shards",
                          (unsigned long long)p->epoch);
    if (!p->shard_sizes)
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: shard sizes are NULL for %llu shards",
                          (unsigned long long)p->epoch,
                          (unsigned long long)p->nshards);
    if (p->nshards > SC__PLAN_MAX_SHARDS)
        return sc__seterr(err, SC_EOVERFLOW,
                          "epoch %llu: %llu shards is more than the %llu a "
                          "plan can hold",
                          (unsigned long long)p->epoch,
                          (unsigned long long)p->nshards,
                          (unsigned long long)SC__PLAN_MAX_SHARDS);
    if (p->world_size == 0)
        return sc__seterr(err, SC_EINVAL, "epoch %llu: world size is 0",
                          (unsigned long long)p->epoch);
    if (p->world_size > p->nshards)
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: more ranks (%u) than shards (%llu); "
                          "every rank needs at least one shard",
                          (unsigned long long)p->epoch, p->world_size,
                          (unsigned long long)p->nshards);
    if (p->batch_size == 0)
        return sc__seterr(err, SC_EINVAL, "epoch %llu: batch size is 0",
                          (unsigned long long)p->epoch);
    if (p->mode != SC_SHUFFLE_GLOBAL && p->mode != SC_SHUFFLE_STICKY)
        return sc__seterr(err, SC_EINVAL, "epoch %llu: unknown shuffle mode %d",
                          (unsigned long long)p->epoch, (int)p->mode);
    if (p->remainder != SC_REMAINDER_DROP && p->remainder != SC_REMAINDER_PAD)
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: unknown remainder policy %d",
                          (unsigned long long)p->epoch, (int)p->remainder);
    if (!(p->exchange >= 0.0 && p->exchange <= 1.0)) /* also rejects NaN */
        return sc__seterr(err, SC_EINVAL,
                          "epoch %llu: exchange fraction %g is outside [0,1]",
                          (unsigned long long)p->epoch, p->exchange);

    uint64_t sum = 0, big = 0;
    for (uint64_t s = 0; s < p->nshards; s++) {
        uint64_t n = p->shard_sizes[s];
        if (n == 0)
            return sc__seterr(err, SC_EINVAL,
                              "epoch %llu: shard %llu has no samples",
                              (unsigned long long)p->epoch,
                              (unsigned long long)s);
        if (__builtin_add_overflow(sum, n, &sum))
            return sc__seterr(err, SC_EOVERFLOW,
                              "epoch %llu: shard sizes overflow 64 bits at "
                              "shard %llu",
                              (unsigned long long)p->epoch,
                              (unsigned long long)s);
        if (n > big)
            big = n;
    }
    if (prev && p->mode == SC_SHUFFLE_STICKY &&
        (prev->info.nshards != p->nshards ||
         prev->info.world_size != p->world_size))
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: the previous plan (epoch %llu) has "
                          "%llu shards on %u ranks, this one %llu on %u",
                          (unsigned long long)p->epoch,
                          (unsigned long long)prev->info.epoch,
                          (unsigned long long)prev->info.nshards,
                          prev->info.world_size,
                          (unsigned long long)p->nshards, p->world_size);
    *total = sum;
    *largest = big;
    return SC_OK;
}

/* ---- assignment ------------------------------------------------------------ */

/*
 * A uniform random permutation of [0, n) that stays in cache: scatter to
 * random buckets, then shuffle each bucket (Rao-Sandelius).  A plain
 * Fisher-Yates over 10^7 shards misses the cache on every swap.  The bucket
 * draws are made twice from the same counter-based stream (count, then
 * place) instead of being stored.
 */
static void random_perm(uint32_t *perm, uint64_t n, uint64_t key,
                        uint64_t *cursor, uint64_t nbuckets)
{
    sc__rng rng;
    memset(cursor, 0, sizeof *cursor * (nbuckets + 1));
    sc__rng_init(&rng, key);
    for (uint64_t s = 0; s < n; s++)
        cursor[sc__rng_below(&rng, nbuckets) + 1]++;
    for (uint64_t b = 0; b < nbuckets; b++)
        cursor[b + 1] += cursor[b];
    sc__rng_init(&rng, key);
    for (uint64_t s = 0; s < n; s++)
        perm[cursor[sc__rng_below(&rng, nbuckets)]++] = (uint32_t)s;
    /* cursor[b] now ends bucket b; bucket b starts where b-1 ends. */
    for (uint64_t b = 0, lo = 0; b < nbuckets; lo = cursor[b++]) {
        sc__rng_init(&rng, sc__mix64(key ^ (b + 1)));
        shuffle_u32(perm + lo, cursor[b] - lo, &rng);
    }
}

/*
 * Global: cut a random permutation into R runs of about total/R samples
 * each (at least one shard each), and make run k the list of rank
 * label[k].  A run of a uniform permutation is already in uniform order, so
 * the lists are final unless the balance needs repair.
 */
static void assign_fresh(const sc_plan_params *p, sc_plan *plan,
                         uint32_t *perm, uint64_t *load, uint64_t *cursor,
                         uint64_t nbuckets, uint64_t total)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards, i = 0;
    uint64_t *start = plan->rank_samples; /* run start in perm, until loads go in */
    uint64_t *off = plan->rank_off;
    sc__rng rng;

    random_perm(perm, n, sc__rng_key(p->seed, p->epoch, PURPOSE_ORDER, 0),
                cursor, nbuckets);

    /* label[] reuses cursor[]: the permutation is done with it. */
    uint64_t *label = cursor;
    for (uint32_t r = 0; r < R; r++)
        label[r] = r;
    sc__rng_init(&rng, sc__rng_key(p->seed, p->epoch, PURPOSE_LABEL, 0));
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
 * Sticky: release round(q * n_r) of each rank's shards, the per-rank counts
 * rounded so that they add up to round(q * N) exactly, and re-home them.
 * `byrank`/`off` list last epoch's shards per rank.
 */
static void assign_sticky(const sc_plan_params *p, const sc_plan *prev,
                          uint32_t *owner, uint32_t *scratch, heap *h)
{
    uint32_t R = h->n;
    uint64_t n = p->nshards;
    uint64_t released = 0;
    double q = p->exchange;
    sc__rng rng;

    memcpy(owner, prev->owner, sizeof *owner * n);
    memset(h->load, 0, sizeof *h->load * R);
    for (uint64_t s = 0; s < n; s++)
        h->load[owner[s]] += p->shard_sizes[s];

    sc__rng_init(&rng, sc__rng_key(p->seed, p->epoch, PURPOSE_RELEASE, 0));
    for (uint32_t r = 0; r < R; r++) {
        uint64_t lo = prev->rank_off[r], cnt = prev->rank_off[r + 1] - lo;
        /* Cumulative rounding: the totals up to each rank are round(q*prefix). */
        uint64_t upto = (uint64_t)llround(q * (double)prev->rank_off[r + 1]);
        uint64_t k = upto > released ? upto - released : 0;
        if (k > cnt)
            k = cnt;
        /* A partial Fisher-Yates picks k of this rank's shards uniformly. */
        uint32_t *mine = scratch + released;
        memcpy(mine, prev->order + lo, sizeof *mine * cnt);
        for (uint64_t i = 0; i < k; i++) {
            uint64_t j = i + sc__rng_below(&rng, cnt - i);
            uint32_t t = mine[i];
            mine[i] = mine[j];
            mine[j] = t;
            h->load[r] -= p->shard_sizes[mine[i]];
        }
        released += k;
    }

    /* Re-home the released shards in a random order, away from their owner. */
    shuffle_u32(scratch, released, &rng);
    heap_build(h);
    for (uint64_t i = 0; i < released; i++) {
        uint32_t s = scratch[i];
        if (i + PREFETCH < released) {
            __builtin_prefetch(&owner[scratch[i + PREFETCH]]);
            __builtin_prefetch(&p->shard_sizes[scratch[i + PREFETCH]]);
        }
        owner[s] = heap_give(h, p->shard_sizes[s], R > 1 ? owner[s] : UINT32_MAX);
    }
}

static void link_lists(const uint32_t *owner, uint64_t n, uint32_t R,
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
static void move_head(const sc_plan_params *p, uint32_t *owner, uint64_t *load,
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
static void repair_balance(const sc_plan_params *p, uint32_t *owner,
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
            link_lists(owner, n, R, next, head);
            built = 1;
        }
        uint32_t from = UINT32_MAX;
        for (uint32_t r = 0; r < R; r++)
            if (head[r] != UINT32_MAX && next[head[r]] != UINT32_MAX &&
                (from == UINT32_MAX || load[r] > load[from]))
                from = r;
        move_head(p, owner, load, next, head, from, empty, &head[from]);
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
            link_lists(owner, n, R, next, head);
            built = 1;
        }
        /* Any shard smaller than the spread lowers sum(load^2); one exists. */
        uint32_t *link = &head[hi];
        while (*link != UINT32_MAX && p->shard_sizes[*link] >= spread)
            link = &next[*link];
        move_head(p, owner, load, next, head, hi, lo, link);
    }
}

/*
 * Counting sort of shards by owner (R sequential output streams), then a
 * seeded shuffle of each rank's list, which is small enough to stay in cache.
 */
static void build_order(const sc_plan_params *p, sc_plan *plan,
                        const uint64_t *load)
{
    uint32_t R = p->world_size;
    uint64_t n = p->nshards;
    uint64_t *off = plan->rank_off;

    memset(off, 0, sizeof *off * (R + 1));
    for (uint64_t s = 0; s < n; s++)
        off[plan->owner[s] + 1]++;
    for (uint32_t r = 0; r < R; r++)
        off[r + 1] += off[r];
    /* rank_samples doubles as the fill cursor until the loads go in. */
    uint64_t *fill = plan->rank_samples;
    memcpy(fill, off, sizeof *fill * R);
    for (uint64_t s = 0; s < n; s++)
        plan->order[fill[plan->owner[s]]++] = (uint32_t)s;
    memcpy(plan->rank_samples, load, sizeof *load * R);

    for (uint32_t r = 0; r < R; r++) {
        sc__rng rng;
        sc__rng_init(&rng, sc__rng_key(p->seed, p->epoch, PURPOSE_WITHIN, r));
        shuffle_u32(plan->order + off[r], off[r + 1] - off[r], &rng);
    }
}

/* Batches per rank and samples dropped or padded, from per-rank counts. */
static int count_batches(sc_plan_info *info, const uint64_t *rank_samples,
                         sc_error *err)
{
    uint32_t R = info->world_size;
    uint64_t lo = UINT64_MAX, hi = 0, B = info->batch_size, cap;

    for (uint32_t r = 0; r < R; r++) {
        if (rank_samples[r] < lo)
            lo = rank_samples[r];
        if (rank_samples[r] > hi)
            hi = rank_samples[r];
    }
    info->min_rank_samples = lo;
    info->max_rank_samples = hi;
    if (info->remainder == SC_REMAINDER_DROP) {
        info->batches_per_rank = lo / B;
        if (info->batches_per_rank == 0)
            return sc__seterr(err, SC_EINVAL,
                              "epoch %llu: batch size %llu is larger than the "
                              "%llu samples of the smallest rank; with "
                              "remainder=drop no rank would get a batch",
                              (unsigned long long)info->epoch,
                              (unsigned long long)B, (unsigned long long)lo);
    } else {
        info->batches_per_rank = hi / B + (hi % B != 0);
    }
    if (__builtin_mul_overflow(info->batches_per_rank, B, &cap) ||
        __builtin_mul_overflow(cap, (uint64_t)R, &cap))
        return sc__seterr(err, SC_EOVERFLOW,
                          "epoch %llu: %u ranks x %llu batches x %llu samples "
                          "overflows 64 bits",
                          (unsigned long long)info->epoch, R,
                          (unsigned long long)info->batches_per_rank,
                          (unsigned long long)B);
    info->dropped = cap <= info->total_samples ? info->total_samples - cap : 0;
    info->padded = cap >= info->total_samples ? cap - info->total_samples : 0;
    return SC_OK;
}

int sc_plan_create(const sc_plan_params *params, const sc_plan *prev,
                   sc_plan **out, sc_error *err)
{
    uint64_t total = 0, largest = 0, *cursor = NULL;
    sc_plan *plan = NULL;
    uint32_t *scratch = NULL, *head = NULL;
    heap h = {0};
    int rc;

    if (!out)
        return sc__seterr(err, SC_EINVAL, "plan output pointer is NULL");
    *out = NULL;
    if ((rc = check_params(params, prev, &total, &largest, err)) != SC_OK)
        return rc;

    uint32_t R = params->world_size;
    uint64_t n = params->nshards;
    int sticky = params->mode == SC_SHUFFLE_STICKY && prev;
    /* Buckets of ~4096 shards (16 KiB) for the cache-friendly permutation. */
    uint64_t nbuckets = n / 4096 < 1 ? 1 : n / 4096 > 4096 ? 4096 : n / 4096;
    uint64_t ncursor = nbuckets + 1 > R ? nbuckets + 1 : R;

    if ((rc = sc__plan_alloc(R, n, &plan, err)) != SC_OK)
        return rc;
    scratch = malloc(sizeof *scratch * n);
    head = malloc(sizeof *head * R);
    cursor = malloc(sizeof *cursor * ncursor);
    h.slot = malloc(sizeof *h.slot * R);
    h.load = malloc(sizeof *h.load * R);
    h.n = R;
    if (!scratch || !head || !cursor || !h.slot || !h.load) {
        rc = sc__seterr(err, SC_ENOMEM,
                        "epoch %llu: no memory to plan %llu shards on %u ranks",
                        (unsigned long long)params->epoch,
                        (unsigned long long)n, R);
        goto out;
    }

    int reorder = 1;
    if (sticky) {
        assign_sticky(params, prev, plan->owner, scratch, &h);
    } else {
        assign_fresh(params, plan, scratch, h.load, cursor, nbuckets, total);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t r = 0; r < R; r++) {
            lo = h.load[r] < lo ? h.load[r] : lo;
            hi = h.load[r] > hi ? h.load[r] : hi;
        }
        reorder = hi - lo > largest;
        if (reorder)
            sc__plan_fill_owner(plan);
    }
    if (reorder) {
        /* scratch is free again and serves as the repair pass's links. */
        repair_balance(params, plan->owner, h.load, R, largest, scratch, head);
        build_order(params, plan, h.load);
    } else {
        memcpy(plan->rank_samples, h.load, sizeof *h.load * R);
        sc__plan_fill_owner(plan);
    }

    sc_plan_info *info = &plan->info;
    info->epoch = params->epoch;
    info->seed = params->seed;
    info->fingerprint = params->fingerprint;
    info->mode = params->mode;
    info->remainder = params->remainder;
    info->exchange = params->exchange;
    info->batch_size = params->batch_size;
    info->total_samples = total;
    info->moved = 0;
    if (prev && prev->info.nshards == n)
        for (uint64_t s = 0; s < n; s++)
            info->moved += plan->owner[s] != prev->owner[s];
    if ((rc = count_batches(info, plan->rank_samples, err)) != SC_OK)
        goto out;
    rc = sc__plan_seal(plan, err);

out:
    free(scratch);
    free(head);
    free(cursor);
    free(h.slot);
    free(h.load);
    if (rc == SC_OK)
        *out = plan;
    else
        sc_plan_free(plan);
    return rc;
}

int sc_plan_get_info(const sc_plan *plan, sc_plan_info *out)
{
    if (!plan || !out)
        return SC_EINVAL;
    *out = plan->info;
    return SC_OK;
}

int sc_plan_rank(const sc_plan *plan, uint32_t rank, const uint32_t **shards,
                 uint64_t *nshards, uint64_t *samples)
{
    if (!plan || rank >= plan->info.world_size)
        return SC_EINVAL;
    uint64_t lo = plan->rank_off[rank];
    if (shards)
        *shards = plan->order + lo;
    if (nshards)
        *nshards = plan->rank_off[rank + 1] - lo;
    if (samples)
        *samples = plan->rank_samples[rank];
    return SC_OK;
}

int sc_plan_owner(const sc_plan *plan, uint64_t shard, uint32_t *rank)
{
    if (!plan || !rank || shard >= plan->info.nshards)
        return SC_EINVAL;
    *rank = plan->owner[shard];
    return SC_OK;
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
    if (i->mode == SC_SHUFFLE_STICKY && i->exchange != p->exchange)
        SC__MISMATCH("exchange fraction", "%g", i->exchange, p->exchange);
#undef SC__MISMATCH
    return SC_OK;
}

int sc_plan_check(const sc_plan *plan, const sc_plan_params *params,
                  const sc_plan *prev, sc_error *err)
{
    uint64_t total = 0, largest = 0;
    int rc;

    if (!plan)
        return sc__seterr(err, SC_EINVAL, "plan is NULL");
    if ((rc = check_params(params, prev, &total, &largest, err)) != SC_OK)
        return rc;
    if ((rc = sc__plan_matches(plan, params, 0, err)) != SC_OK)
        return rc;

    const sc_plan_info *in = &plan->info;
    unsigned long long e = (unsigned long long)in->epoch;
    uint32_t R = in->world_size;
    uint64_t n = in->nshards, B = in->batch_size;

    /* Every shard exactly once, and its owner is the rank whose list has it. */
    unsigned char *seen = calloc(n, 1);
    if (!seen)
        return sc__seterr(err, SC_ENOMEM, "no memory to check the plan");
    for (uint32_t r = 0; r < R; r++) {
        uint64_t sum = 0;
        for (uint64_t i = plan->rank_off[r]; i < plan->rank_off[r + 1]; i++) {
            uint32_t s = plan->order[i];
            if (s >= n || seen[s]++ || plan->owner[s] != r) {
                free(seen);
                return sc__seterr(err, SC_EPLAN,
                                  "epoch %llu: shard %u is listed twice or "
                                  "out of range (rank %u)",
                                  e, s, r);
            }
            sum += params->shard_sizes[s];
        }
        if (sum != plan->rank_samples[r]) {
            free(seen);
            return sc__seterr(err, SC_EPLAN,
                              "epoch %llu: rank %u's shards hold %llu samples, "
                              "the plan says %llu",
                              e, r, (unsigned long long)sum,
                              (unsigned long long)plan->rank_samples[r]);
        }
        if (r == 0 ? plan->rank_off[0] != 0
                   : plan->rank_off[r] < plan->rank_off[r - 1]) {
            free(seen);
            return sc__seterr(err, SC_EPLAN, "epoch %llu: bad offsets", e);
        }
    }
    for (uint64_t s = 0; s < n; s++)
        if (!seen[s]) {
            free(seen);
            return sc__seterr(err, SC_EPLAN, "epoch %llu: shard %llu has no owner",
                              e, (unsigned long long)s);
        }
    free(seen);

    /* Balance: ranks differ by at most the largest shard. */
    if (in->max_rank_samples - in->min_rank_samples > largest)
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: rank sample counts span %llu..%llu, "
                          "more than the largest shard (%llu)",
                          e, (unsigned long long)in->min_rank_samples,
                          (unsigned long long)in->max_rank_samples,
                          (unsigned long long)largest);

    /*
     * Equal batches: with drop every rank can fill them and none could fill
     * one more; with pad every rank needs the last one and pads less than a
     * batch beyond the largest rank.  The waste is then at most R*(B-1)
     * plus the imbalance sum(S_r - min S), which whole-shard ownership
     * cannot avoid (docs/plan.md explains why).
     */
    uint64_t b = in->batches_per_rank, lo = in->min_rank_samples,
             hi = in->max_rank_samples, imbalance = 0;
    for (uint32_t r = 0; r < R; r++)
        imbalance += (in->remainder == SC_REMAINDER_DROP)
                         ? plan->rank_samples[r] - lo
                         : hi - plan->rank_samples[r];
    int ok_b = in->remainder == SC_REMAINDER_DROP
                   ? (b >= 1 && b * B <= lo && (b + 1) * B > lo)
                   : (b * B >= hi && (b - 1) * B < hi);
    uint64_t waste = in->remainder == SC_REMAINDER_DROP ? in->dropped : in->padded;
    if (!ok_b || in->total_samples != total ||
        (in->remainder == SC_REMAINDER_DROP ? in->padded : in->dropped) != 0 ||
        in->total_samples + in->padded - in->dropped != (uint64_t)R * b * B ||
        waste > imbalance + (uint64_t)R * (B - 1))
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: %llu batches per rank of %llu with "
                          "%llu..%llu samples per rank, %llu dropped, %llu "
                          "padded: the batch counts do not add up",
                          e, (unsigned long long)b, (unsigned long long)B,
                          (unsigned long long)lo, (unsigned long long)hi,
                          (unsigned long long)in->dropped,
                          (unsigned long long)in->padded);

    uint64_t moved = 0;
    if (prev && prev->info.nshards == n)
        for (uint64_t s = 0; s < n; s++)
            moved += plan->owner[s] != prev->owner[s];
    if (moved != in->moved)
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: %llu shards moved, the plan says %llu",
                          e, (unsigned long long)moved,
                          (unsigned long long)in->moved);

    /* Determinism: the same inputs give the same bytes. */
    sc_plan *again = NULL;
    if ((rc = sc_plan_create(params, prev, &again, err)) != SC_OK)
        return sc__errctx(err, "epoch %llu: re-planning failed", e);
    int same = again->wire_len == plan->wire_len &&
               memcmp(again->wire, plan->wire, plan->wire_len) == 0;
    sc_plan_free(again);
    if (!same)
        return sc__seterr(err, SC_EPLAN,
                          "epoch %llu: re-planning the same inputs gave "
                          "different bytes (hash %016llx)",
                          e, (unsigned long long)in->hash);
    return sc__errok(err);
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

int sc_shard_of(const uint64_t *first, uint64_t nshards, uint64_t id, uint64_t *shard)
{
    if (!first || !shard || !nshards || id >= first[nshards])
        return SC_EINVAL;
    uint64_t lo = 0, hi = nshards;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (first[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    *shard = lo;
    return SC_OK;
}
