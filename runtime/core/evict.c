/*
 * evict.c - entries in an array, found through an open-addressing map
 * (shard -> index); victims by a linear scan, since a rank holds at most
 * capacity / shard size entries (hundreds to thousands).  What to keep is
 * planned each time the future is given, in O(n log n): spans by earliest
 * end, each tested against the bytes already kept over its moments in a
 * segment tree (range add, range max), which is kept for the fills that
 * come later.
 */
#include "evict.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "vec.h"

#define EMPTY UINT32_MAX
#define NEVER UINT64_MAX

typedef struct entry {
    uint32_t shard;
    int flag;
    unsigned char keep;   /* its span to its next read is kept (Belady's plan) */
    unsigned char unread; /* written here (miss, fill), not read since */
    unsigned char ahead;  /* filled ahead of its read, not read since */
    unsigned char found;  /* admitted as found (sc__evict_admit), not read since */
    uint64_t bytes, last, next; /* next: position in the future, or NEVER */
} entry;

/*
 * The bytes kept at each moment of the planned future: moment 0 is now (at
 * the plan), moment t just after the read at position base + t - 1.
 */
typedef struct tree {
    uint64_t *mx, *add; /* [4 * n]: a node's max and what was added to all of it */
    uint64_t n, base;
} tree;

/* shard -> position map, used both for entries and for the future's scan. */
typedef struct map {
    uint32_t *key;
    uint64_t *val;
    uint64_t mask, n;
} map;

struct sc__evict {
    sc_cache_policy policy;
    uint64_t capacity, bytes, clock;
    entry *e;
    size_t n, cap;
    map idx;          /* shard -> index in e[] */
    uint32_t *seq;    /* the future */
    uint64_t *after;  /* after[i]: next unread position of seq[i] beyond i, or NEVER */
    unsigned char *done; /* [nseq] read already (reads may come out of order) */
    unsigned char *keep; /* [nseq] the span from this read to the next is kept */
    uint64_t nseq, cursor; /* cursor: the first position not read */
    map head;         /* shard -> its first unread position */
    tree t;
    uint64_t (*size)(void *, uint32_t);
    void *size_arg;
    uint64_t unread_n, unread_bytes; /* written, evicted before any read */
    uint32_t *victims;
    size_t nvictims, vcap;
};

static int evict_map_init(map *m, uint64_t want)
{
    uint64_t size = 16;
    while (size < 2 * want)
        size *= 2;
    m->key = malloc(sizeof *m->key * size);
    m->val = malloc(sizeof *m->val * size);
    if (!m->key || !m->val) {
        free(m->key);
        free(m->val);
        m->key = NULL;
        m->val = NULL;
        return SC_ENOMEM;
    }
    memset(m->key, 0xff, sizeof *m->key * size);
    m->mask = size - 1;
    m->n = 0;
    return SC_OK;
}

static void evict_map_free(map *m)
{
    free(m->key);
    free(m->val);
}

static uint64_t evict_slot_of(const map *m, uint32_t k)
{
    uint64_t i = sc__mix64(k) & m->mask;
    while (m->key[i] != EMPTY && m->key[i] != k)
        i = (i + 1) & m->mask;
    return i;
}

static uint64_t *evict_map_get(const map *m, uint32_t k)
{
    uint64_t i = evict_slot_of(m, k);
    return m->key[i] == k ? &m->val[i] : NULL;
}

static int evict_map_put(map *m, uint32_t k, uint64_t v)
{
    if (2 * (m->n + 1) > m->mask + 1) {
        map bigger;
        if (evict_map_init(&bigger, m->n + 1) != SC_OK)
            return SC_ENOMEM;
        for (uint64_t i = 0; i <= m->mask; i++)
            if (m->key[i] != EMPTY) {
                uint64_t j = evict_slot_of(&bigger, m->key[i]);
                bigger.key[j] = m->key[i];
                bigger.val[j] = m->val[i];
            }
        bigger.n = m->n;
        evict_map_free(m);
        *m = bigger;
    }
    uint64_t i = evict_slot_of(m, k);
    m->n += m->key[i] == EMPTY;
    m->key[i] = k;
    m->val[i] = v;
    return SC_OK;
}

/* Linear-probing delete: shift later members of the run back into the hole. */
static void evict_map_del(map *m, uint32_t k)
{
    uint64_t i = evict_slot_of(m, k);
    if (m->key[i] != k)
        return;
    m->key[i] = EMPTY;
    m->n--;
    for (uint64_t j = (i + 1) & m->mask; m->key[j] != EMPTY; j = (j + 1) & m->mask) {
        uint64_t home = sc__mix64(m->key[j]) & m->mask;
        /* Move j into the hole i unless its home lies cyclically in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->key[i] = m->key[j];
            m->val[i] = m->val[j];
            m->key[j] = EMPTY;
            i = j;
        }
    }
}

static uint64_t evict_unit(void *arg, uint32_t shard)
{
    (void)arg;
    (void)shard;
    return 1;
}

int sc__evict_new(sc_cache_policy policy, uint64_t capacity, sc__evict **out)
{
    sc__evict *ev = calloc(1, sizeof *ev);
    if (!ev || evict_map_init(&ev->idx, 16) != SC_OK) {
        free(ev);
        return SC_ENOMEM;
    }
    if (evict_map_init(&ev->head, 16) != SC_OK) {
        evict_map_free(&ev->idx);
        free(ev);
        return SC_ENOMEM;
    }
    ev->policy = policy;
    ev->capacity = capacity ? capacity : UINT64_MAX;
    ev->size = evict_unit;
    *out = ev;
    return SC_OK;
}

void sc__evict_set_capacity(sc__evict *ev, uint64_t capacity)
{
    ev->capacity = capacity ? capacity : UINT64_MAX;
}

uint64_t sc__evict_capacity(const sc__evict *ev)
{
    return ev->capacity == UINT64_MAX ? 0 : ev->capacity;
}

void sc__evict_set_sizer(sc__evict *ev, uint64_t (*size)(void *arg, uint32_t shard), void *arg)
{
    ev->size = size ? size : evict_unit;
    ev->size_arg = arg;
}

static void evict_tree_free(tree *t)
{
    free(t->mx);
    free(t->add);
    memset(t, 0, sizeof *t);
}

void sc__evict_free(sc__evict *ev)
{
    if (!ev)
        return;
    evict_map_free(&ev->idx);
    evict_map_free(&ev->head);
    evict_tree_free(&ev->t);
    free(ev->e);
    free(ev->seq);
    free(ev->after);
    free(ev->done);
    free(ev->keep);
    free(ev->victims);
    free(ev);
}

/* ---- the segment tree of bytes kept per moment ------------------------------- */

static int evict_tree_init(tree *t, uint64_t n, uint64_t base)
{
    evict_tree_free(t);
    t->mx = calloc(4 * n, sizeof *t->mx);
    t->add = calloc(4 * n, sizeof *t->add);
    if (!t->mx || !t->add) {
        evict_tree_free(t); /* n = 0: nothing is taken from it */
        return SC_ENOMEM;
    }
    t->n = n;
    t->base = base;
    return SC_OK;
}

/* Nothing kept at any moment. */
static void evict_tree_clear(tree *t)
{
    memset(t->mx, 0, 4 * t->n * sizeof *t->mx);
    memset(t->add, 0, 4 * t->n * sizeof *t->add);
}

static uint64_t evict_max2(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Adds v to moments [ql, qr] under node k, which covers [l, r]. */
static void evict_tree_add(tree *t, uint64_t k, uint64_t l, uint64_t r, uint64_t ql,
                           uint64_t qr, uint64_t v)
{
    if (qr < l || r < ql)
        return;
    if (ql <= l && r <= qr) {
        t->add[k] += v;
        t->mx[k] += v;
        return;
    }
    uint64_t mid = l + (r - l) / 2;
    evict_tree_add(t, 2 * k, l, mid, ql, qr, v);
    evict_tree_add(t, 2 * k + 1, mid + 1, r, ql, qr, v);
    t->mx[k] = t->add[k] + evict_max2(t->mx[2 * k], t->mx[2 * k + 1]);
}

/* The most bytes kept at any moment of [ql, qr] under node k. */
static uint64_t evict_tree_max(const tree *t, uint64_t k, uint64_t l, uint64_t r, uint64_t ql,
                               uint64_t qr)
{
    if (qr < l || r < ql)
        return 0;
    if (ql <= l && r <= qr)
        return t->mx[k];
    uint64_t mid = l + (r - l) / 2;
    return t->add[k] + evict_max2(evict_tree_max(t, 2 * k, l, mid, ql, qr),
                                  evict_tree_max(t, 2 * k + 1, mid + 1, r, ql, qr));
}

/* Keeps `bytes` over moments [from, to] if they fit the capacity: 1 if kept. */
static int evict_tree_take(sc__evict *ev, uint64_t from, uint64_t to, uint64_t bytes)
{
    tree *t = &ev->t;
    if (!t->n || to >= t->n || from > to)
        return 0;
    if (evict_tree_max(t, 1, 0, t->n - 1, from, to) + bytes > ev->capacity)
        return 0;
    evict_tree_add(t, 1, 0, t->n - 1, from, to, bytes);
    return 1;
}

/* ---- the future and the plan of what to keep -------------------------------- */

/* Belady decides admissions: bounded, and a future known. */
static int evict_selective(const sc__evict *ev)
{
    return ev->policy == SC_CACHE_BELADY && ev->capacity != UINT64_MAX && ev->seq;
}

/*
 * after[] and head over the positions not read yet (prev[j]: the unread
 * position whose next read is j, or NEVER), the cursor at the first.
 */
static int evict_chain(sc__evict *ev, uint64_t *prev)
{
    evict_map_free(&ev->head);
    if (evict_map_init(&ev->head, ev->nseq) != SC_OK)
        return SC_ENOMEM;
    for (uint64_t i = 0; i < ev->nseq; i++)
        prev[i] = NEVER;
    for (uint64_t i = ev->nseq; i-- > 0;) {
        ev->after[i] = NEVER;
        if (ev->done[i])
            continue;
        uint64_t *v = evict_map_get(&ev->head, ev->seq[i]);
        if (v)
            ev->after[i] = *v, prev[*v] = i;
        if (evict_map_put(&ev->head, ev->seq[i], i) != SC_OK)
            return SC_ENOMEM;
    }
    ev->cursor = 0;
    while (ev->cursor < ev->nseq && ev->done[ev->cursor])
        ev->cursor++;
    for (uint64_t k = 0; k < ev->n; k++) {
        uint64_t *v = evict_map_get(&ev->head, ev->e[k].shard);
        ev->e[k].next = v ? *v : NEVER;
        ev->e[k].keep = 0;
    }
    return SC_OK;
}

/* Whether the read at unread position i finds its shard held, as planned so far. */
static int evict_planned_hit(const sc__evict *ev, const uint64_t *prev, uint64_t i)
{
    if (prev[i] != NEVER)
        return ev->keep[prev[i]];
    uint64_t *k = evict_map_get(&ev->idx, ev->seq[i]);
    return k && ev->e[*k].next == i && ev->e[*k].keep;
}

enum { PASS_ALL, PASS_NO_WRITE, PASS_REST };

/*
 * One pass over the spans by earliest end (one span ends at each unread
 * position j: a held entry's, from now, or that of the read before j),
 * each kept when it fits at every moment it covers: all of them, or only
 * those that need no write (a held entry's, or one from a read that finds
 * its shard held), or the rest.  The spans kept.
 */
static uint64_t evict_pass(sc__evict *ev, const uint64_t *prev, int which)
{
    uint64_t base = ev->cursor, kept = 0;
    for (uint64_t j = base; j < ev->nseq; j++) {
        if (ev->done[j])
            continue;
        uint64_t end = j - base; /* the moment just before the read at j */
        uint64_t *k = evict_map_get(&ev->idx, ev->seq[j]);
        if (prev[j] != NEVER) {
            uint64_t i = prev[j];
            if (ev->keep[i] ||
                (which == PASS_NO_WRITE && !evict_planned_hit(ev, prev, i)))
                continue;
            uint64_t bytes = k ? ev->e[*k].bytes : ev->size(ev->size_arg, ev->seq[j]);
            ev->keep[i] = (unsigned char)evict_tree_take(ev, i - base + 1, end, bytes);
            kept += ev->keep[i];
        } else if (k && ev->e[*k].next == j && !ev->e[*k].unread && !ev->e[*k].keep &&
                   which != PASS_REST) {
            ev->e[*k].keep = (unsigned char)evict_tree_take(ev, 0, end, ev->e[*k].bytes);
            kept += ev->e[*k].keep;
        }
    }
    return kept;
}

/* The counts of a plan: hits (spans kept) and writes (kept spans that start with a miss). */
typedef struct plan_counts {
    uint64_t hits, writes;
} plan_counts;

/*
 * A plan from scratch in the tree (allocated): entries written and not
 * read yet keep their spans first (dropping one now would waste its write;
 * they fit: they are held, within capacity), then the passes.
 */
static plan_counts evict_plan_once(sc__evict *ev, const uint64_t *prev, int held_first)
{
    uint64_t base = ev->cursor;
    plan_counts c = {0, 0};
    evict_tree_clear(&ev->t);
    memset(ev->keep, 0, ev->nseq);
    for (uint64_t k = 0; k < ev->n; k++) {
        ev->e[k].keep = 0;
        if (ev->e[k].unread && ev->e[k].next != NEVER)
            ev->e[k].keep = (unsigned char)evict_tree_take(ev, 0, ev->e[k].next - base,
                                                           ev->e[k].bytes);
        c.hits += ev->e[k].keep;
    }
    if (held_first)
        c.hits += evict_pass(ev, prev, PASS_NO_WRITE) + evict_pass(ev, prev, PASS_REST);
    else
        c.hits += evict_pass(ev, prev, PASS_ALL);
    for (uint64_t i = base; i < ev->nseq; i++)
        c.writes += !ev->done[i] && ev->keep[i] && !evict_planned_hit(ev, prev, i);
    return c;
}

/*
 * The offline optimum for the capacity: spans by earliest end, which for
 * shards of one size keeps the most (Belady's bound).  It keeps, at an
 * epoch's end, the shards the next epoch reads first, whether held or
 * not: under epochs that read every shard once it rewrote most of the
 * cache every epoch for no hit more (a slot serves one hit an epoch,
 * whichever shard it holds).  So a second plan takes the spans that need
 * no write first, and stands where it has as many hits and no more
 * writes (exact for such epochs; a heuristic elsewhere).
 */
static int evict_select(sc__evict *ev, const uint64_t *prev)
{
    if (evict_tree_init(&ev->t, ev->nseq - ev->cursor + 1, ev->cursor) != SC_OK)
        return SC_ENOMEM;
    plan_counts any = evict_plan_once(ev, prev, 0), held = evict_plan_once(ev, prev, 1);
    if (held.hits < any.hits || (held.hits == any.hits && held.writes > any.writes))
        evict_plan_once(ev, prev, 0);
    return SC_OK;
}

/* Re-plans from the unread part of seq[] (done[] says what was read). */
static int evict_plan(sc__evict *ev)
{
    uint64_t *prev = malloc(sizeof *prev * (ev->nseq + 1));
    int rc = prev ? evict_chain(ev, prev) : SC_ENOMEM;
    memset(ev->keep, 0, ev->nseq);
    evict_tree_free(&ev->t);
    if (rc == SC_OK && evict_selective(ev)) {
        rc = evict_select(ev, prev);
    } else if (rc == SC_OK) {
        memset(ev->keep, 1, ev->nseq); /* every span kept: LRU or unbounded */
        for (uint64_t k = 0; k < ev->n; k++)
            ev->e[k].keep = 1;
    }
    free(prev);
    return rc;
}

/* Takes seq[0..n) (done[] from `done`, or none read) as the future and plans. */
static int evict_set_future(sc__evict *ev, const uint32_t *seq, const unsigned char *done,
                            uint64_t n)
{
    uint32_t *s = malloc(sizeof *s * (n + 1));
    uint64_t *after = malloc(sizeof *after * (n + 1));
    unsigned char *d = calloc(n + 1, 1), *keep = calloc(n + 1, 1);
    if (!s || !after || !d || !keep) {
        free(s);
        free(after);
        free(d);
        free(keep);
        return SC_ENOMEM;
    }
    if (n)
        memcpy(s, seq, sizeof *s * n);
    if (n && done)
        memcpy(d, done, n);
    free(ev->seq);
    free(ev->after);
    free(ev->done);
    free(ev->keep);
    ev->seq = s, ev->after = after, ev->done = d, ev->keep = keep;
    ev->nseq = n;
    return evict_plan(ev);
}

int sc__evict_future(sc__evict *ev, const uint32_t *seq, uint64_t n)
{
    return evict_set_future(ev, seq, NULL, n);
}

int sc__evict_extend(sc__evict *ev, const uint32_t *more, uint64_t n)
{
    uint64_t left = ev->nseq - ev->cursor;
    uint32_t *s = malloc(sizeof *s * (left + n + 1));
    unsigned char *d = calloc(left + n + 1, 1);
    if (!s || !d) {
        free(s);
        free(d);
        return SC_ENOMEM;
    }
    if (left) {
        memcpy(s, ev->seq + ev->cursor, sizeof *s * left);
        memcpy(d, ev->done + ev->cursor, left); /* read ahead, out of order */
    }
    if (n)
        memcpy(s + left, more, sizeof *s * n);
    int rc = evict_set_future(ev, s, d, left + n);
    free(s);
    free(d);
    return rc;
}

/* A read of `shard` now: its first unread position (NEVER: not in the future), now read. */
static uint64_t evict_consume(sc__evict *ev, uint32_t shard)
{
    uint64_t *h = evict_map_get(&ev->head, shard);
    if (!h)
        return NEVER;
    uint64_t p = *h;
    ev->done[p] = 1;
    if (ev->after[p] == NEVER)
        evict_map_del(&ev->head, shard);
    else
        *h = ev->after[p];
    while (ev->cursor < ev->nseq && ev->done[ev->cursor])
        ev->cursor++;
    return p;
}

int sc__evict_has(const sc__evict *ev, uint32_t shard)
{
    return evict_map_get(&ev->idx, shard) != NULL;
}

int sc__evict_touch(sc__evict *ev, uint32_t shard)
{
    uint64_t *k = evict_map_get(&ev->idx, shard);
    if (!k)
        return 0;
    entry *e = &ev->e[*k];
    uint64_t p = evict_consume(ev, shard);
    e->last = ++ev->clock;
    if (p != NEVER) /* else a read off the plan: its next read stays the same */
        e->next = ev->after[p], e->keep = ev->keep[p];
    int first = e->ahead;
    e->ahead = e->unread = e->found = 0;
    return first;
}

static void evict_drop(sc__evict *ev, uint64_t k)
{
    ev->bytes -= ev->e[k].bytes;
    evict_map_del(&ev->idx, ev->e[k].shard);
    if (k != ev->n - 1) {
        ev->e[k] = ev->e[ev->n - 1];
        *evict_map_get(&ev->idx, ev->e[k].shard) = k;
    }
    ev->n--;
}

void sc__evict_remove(sc__evict *ev, uint32_t shard)
{
    uint64_t *k = evict_map_get(&ev->idx, shard);
    if (k)
        evict_drop(ev, *k);
}

/*
 * Belady: (for a kept miss or fill: spans not kept first, then) furthest
 * next use; LRU: oldest last use first; then the lowest shard id.
 */
static uint64_t evict_pick_victim(const sc__evict *ev, int by_keep)
{
    uint64_t best = 0;
    for (uint64_t k = 1; k < ev->n; k++) {
        const entry *a = &ev->e[k], *b = &ev->e[best];
        int better;
        if (by_keep && ev->policy == SC_CACHE_BELADY && a->keep != b->keep)
            better = a->keep < b->keep;
        else if (ev->policy == SC_CACHE_BELADY && a->next != b->next)
            better = a->next > b->next;
        else if (a->last != b->last)
            better = a->last < b->last;
        else
            better = a->shard < b->shard;
        if (better)
            best = k;
    }
    return best;
}

/* Makes room for `bytes`, listing the victims in ev->victims. */
static int evict_make_room(sc__evict *ev, uint64_t bytes, int by_keep)
{
    while (ev->bytes + bytes > ev->capacity) {
        uint32_t *v = sc__vec_grow(ev->victims, &ev->vcap, ev->nvictims + 1, sizeof *v);
        if (!v)
            return SC_ENOMEM;
        ev->victims = v;
        uint64_t k = evict_pick_victim(ev, by_keep);
        ev->victims[ev->nvictims++] = ev->e[k].shard;
        if (ev->e[k].unread)
            ev->unread_n++, ev->unread_bytes += ev->e[k].bytes;
        evict_drop(ev, k);
    }
    return SC_OK;
}

/*
 * Holds `shard` as entry `proto` says (its shard, bytes, next, keep and
 * flags); victims by Belady's plan when `by_keep`.
 */
static int evict_insert(sc__evict *ev, entry proto, int by_keep, const uint32_t **victims,
                        uint64_t *nvictims)
{
    entry *e = sc__vec_grow(ev->e, &ev->cap, ev->n + 1, sizeof *e);
    if (!e)
        return SC_ENOMEM;
    ev->e = e;
    int rc = evict_make_room(ev, proto.bytes, by_keep);
    *victims = ev->victims;
    *nvictims = ev->nvictims;
    if (rc != SC_OK || evict_map_put(&ev->idx, proto.shard, ev->n) != SC_OK)
        return SC_ENOMEM;
    proto.last = ++ev->clock;
    ev->e[ev->n++] = proto;
    ev->bytes += proto.bytes;
    return SC_OK;
}

/* An entry for a read at position p (NEVER: off the plan). */
static entry evict_entry_at(const sc__evict *ev, uint32_t shard, uint64_t bytes, uint64_t p)
{
    entry e = {.shard = shard, .bytes = bytes, .next = NEVER};
    if (p != NEVER)
        e.next = ev->after[p], e.keep = ev->keep[p];
    return e;
}

/* A read of shard begun: no victims yet, its place in the plan consumed, its entry in *e. */
static int evict_read(sc__evict *ev, uint32_t shard, uint64_t bytes, const uint32_t **victims,
                      uint64_t *nvictims, entry *e)
{
    ev->nvictims = 0;
    *victims = ev->victims;
    *nvictims = 0;
    uint64_t p = evict_consume(ev, shard);
    if (bytes > ev->capacity)
        return SC_EOVERFLOW;
    *e = evict_entry_at(ev, shard, bytes, p);
    return SC_OK;
}

int sc__evict_admit(sc__evict *ev, uint32_t shard, uint64_t bytes,
                    const uint32_t **victims, uint64_t *nvictims)
{
    entry e;
    int rc = evict_read(ev, shard, bytes, victims, nvictims, &e);
    if (rc != SC_OK)
        return rc;
    e.found = 1;
    return evict_insert(ev, e, 0, victims, nvictims);
}

/* Room no entry holds. */
static uint64_t evict_unheld(const sc__evict *ev)
{
    return ev->capacity > ev->bytes ? ev->capacity - ev->bytes : 0;
}

/*
 * Room for a miss the known future does not read again: room no entry
 * holds, and entries found on disk that nothing here has read and the
 * known future does not read (an earlier job's, for other ranks or
 * another subset), so that one-epoch jobs still renew a cache an earlier
 * job filled.  Victims come in that order: those entries have the oldest
 * last use of all that the plan does not keep (evict_pick_victim).
 */
static uint64_t evict_room_unplanned(const sc__evict *ev)
{
    uint64_t room = evict_unheld(ev);
    for (uint64_t k = 0; k < ev->n; k++)
        room += ev->e[k].found && ev->e[k].next == NEVER && !ev->e[k].keep ? ev->e[k].bytes : 0;
    return room;
}

int sc__evict_miss(sc__evict *ev, uint32_t shard, uint64_t bytes,
                   const uint32_t **victims, uint64_t *nvictims)
{
    entry e;
    int rc = evict_read(ev, shard, bytes, victims, nvictims, &e);
    if (rc != SC_OK)
        return rc;
    e.unread = 1;
    /*
     * Not kept: written now, it would be evicted before its next read (or
     * never read), unless room no kept span needs is left until the end of
     * the known future (for other ranks' reads and later epochs).
     * Nor when only a kept entry's eviction makes room (reads out of plan
     * order): one of the two writes would be wasted.
     */
    if (evict_selective(ev)) {
        /*
         * One the known future does not read again does not take the place
         * of another such entry this process has read: the swap gains no
         * hit and costs a write.  Until the next epoch's plan arrives,
         * every entry read this epoch is one, and the epoch's misses
         * rewrote most of the cache every epoch for no hit more
         * (bench/storage.py, 13 ranks: 53 to 76 writes an epoch of about
         * 85 entries).
         */
        int fits = bytes <= (e.next == NEVER ? evict_room_unplanned(ev) : sc__evict_spare(ev));
        e.keep = (unsigned char)(fits && e.keep);
        if (fits && !e.keep && ev->t.n)
            e.keep = (unsigned char)evict_tree_take(ev, ev->cursor - ev->t.base, ev->t.n - 1,
                                                    bytes);
        if (!e.keep)
            return SC_EOVERFLOW;
    }
    return evict_insert(ev, e, 1, victims, nvictims);
}

int sc__evict_fill(sc__evict *ev, uint32_t shard, uint64_t bytes,
                   const uint32_t **victims, uint64_t *nvictims)
{
    ev->nvictims = 0;
    *victims = ev->victims;
    *nvictims = 0;
    uint64_t *h = evict_map_get(&ev->head, shard);
    entry e = {.shard = shard, .bytes = bytes, .next = h ? *h : NEVER, .keep = 1,
               .unread = 1, .ahead = 1};
    if (bytes > ev->capacity)
        return SC_EOVERFLOW;
    if (evict_selective(ev) &&
        (e.next == NEVER || bytes > sc__evict_spare(ev) ||
         !evict_tree_take(ev, ev->cursor - ev->t.base, e.next - ev->t.base, bytes)))
        return SC_EOVERFLOW;
    return evict_insert(ev, e, 1, victims, nvictims);
}

void sc__evict_unread_evictions(const sc__evict *ev, uint64_t *n, uint64_t *bytes)
{
    *n = ev->unread_n;
    *bytes = ev->unread_bytes;
}

int sc__evict_flag(const sc__evict *ev, uint32_t shard)
{
    uint64_t *k = evict_map_get(&ev->idx, shard);
    return k ? ev->e[*k].flag : 0;
}

void sc__evict_set_flag(sc__evict *ev, uint32_t shard, int flag)
{
    uint64_t *k = evict_map_get(&ev->idx, shard);
    if (k)
        ev->e[*k].flag = flag;
}

uint64_t sc__evict_count(const sc__evict *ev)
{
    return ev->n;
}

uint64_t sc__evict_spare(const sc__evict *ev)
{
    if (ev->capacity == UINT64_MAX)
        return UINT64_MAX;
    uint64_t spare = evict_unheld(ev);
    for (uint64_t k = 0; ev->policy == SC_CACHE_BELADY && k < ev->n; k++)
        spare += ev->e[k].next == NEVER || !ev->e[k].keep ? ev->e[k].bytes : 0;
    return spare;
}

uint64_t sc__evict_bytes(const sc__evict *ev)
{
    return ev->bytes;
}
