/*
 * evict.c - entries in an array, found through an open-addressing map
 * (shard -> index); victims by a linear scan, since a rank holds at most
 * capacity / shard size entries (hundreds to thousands).
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
    uint64_t bytes, last, next; /* next: position in the future, or NEVER */
} entry;

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
    uint64_t *after;  /* after[i]: next position of seq[i] beyond i, or NEVER */
    uint64_t nseq, cursor;
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

int sc__evict_new(sc_cache_policy policy, uint64_t capacity, sc__evict **out)
{
    sc__evict *ev = calloc(1, sizeof *ev);
    if (!ev || evict_map_init(&ev->idx, 16) != SC_OK) {
        free(ev);
        return SC_ENOMEM;
    }
    ev->policy = policy;
    ev->capacity = capacity ? capacity : UINT64_MAX;
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

void sc__evict_free(sc__evict *ev)
{
    if (!ev)
        return;
    evict_map_free(&ev->idx);
    free(ev->e);
    free(ev->seq);
    free(ev->after);
    free(ev->victims);
    free(ev);
}

/* The next position at or after the cursor where `shard` is read, or NEVER. */
static uint64_t evict_first_use(const sc__evict *ev, uint32_t shard)
{
    for (uint64_t i = ev->cursor; i < ev->nseq; i++)
        if (ev->seq[i] == shard)
            return i;
    return NEVER;
}

int sc__evict_future(sc__evict *ev, const uint32_t *seq, uint64_t n)
{
    uint32_t *s = n ? malloc(sizeof *s * n) : NULL;
    uint64_t *after = n ? malloc(sizeof *after * n) : NULL;
    map last = {0};
    if ((n && (!s || !after)) || evict_map_init(&last, n) != SC_OK) {
        free(s);
        free(after);
        return SC_ENOMEM;
    }
    if (n)
        memcpy(s, seq, sizeof *s * n);
    /* Backwards: after[i] is where seq[i] is seen next. */
    for (uint64_t i = n; i-- > 0;) {
        uint64_t *v = evict_map_get(&last, s[i]);
        after[i] = v ? *v : NEVER;
        if (evict_map_put(&last, s[i], i) != SC_OK) {
            evict_map_free(&last);
            free(s);
            free(after);
            return SC_ENOMEM;
        }
    }
    free(ev->seq);
    free(ev->after);
    ev->seq = s;
    ev->after = after;
    ev->nseq = n;
    ev->cursor = 0;
    for (uint64_t k = 0; k < ev->n; k++) {
        uint64_t *v = evict_map_get(&last, ev->e[k].shard);
        ev->e[k].next = v ? *v : NEVER;
    }
    evict_map_free(&last);
    return SC_OK;
}

int sc__evict_extend(sc__evict *ev, const uint32_t *more, uint64_t n)
{
    uint64_t left = ev->nseq - ev->cursor;
    uint32_t *s = malloc(sizeof *s * (left + n + 1));
    if (!s)
        return SC_ENOMEM;
    if (left)
        memcpy(s, ev->seq + ev->cursor, sizeof *s * left);
    if (n)
        memcpy(s + left, more, sizeof *s * n);
    int rc = sc__evict_future(ev, s, left + n);
    free(s);
    return rc;
}

/* A read of `shard` now: move the cursor past it; its next use after that. */
static uint64_t evict_advance(sc__evict *ev, uint32_t shard)
{
    uint64_t pos = ev->cursor < ev->nseq && ev->seq[ev->cursor] == shard
                       ? ev->cursor
                       : evict_first_use(ev, shard); /* off plan: rare */
    if (pos == NEVER)
        return NEVER;
    ev->cursor = pos + 1;
    return ev->after[pos];
}

int sc__evict_has(const sc__evict *ev, uint32_t shard)
{
    return evict_map_get(&ev->idx, shard) != NULL;
}

void sc__evict_touch(sc__evict *ev, uint32_t shard)
{
    uint64_t *k = evict_map_get(&ev->idx, shard);
    if (!k)
        return;
    ev->e[*k].last = ++ev->clock;
    ev->e[*k].next = evict_advance(ev, shard);
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

/* Belady: furthest next use first; LRU: oldest last use first. */
static uint64_t evict_pick_victim(const sc__evict *ev)
{
    uint64_t best = 0;
    for (uint64_t k = 1; k < ev->n; k++) {
        const entry *a = &ev->e[k], *b = &ev->e[best];
        int better;
        if (ev->policy == SC_CACHE_BELADY && a->next != b->next)
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

int sc__evict_admit(sc__evict *ev, uint32_t shard, uint64_t bytes,
                    const uint32_t **victims, uint64_t *nvictims)
{
    ev->nvictims = 0;
    *victims = ev->victims;
    *nvictims = 0;
    if (bytes > ev->capacity) {
        evict_advance(ev, shard);
        return SC_EOVERFLOW;
    }
    entry *e = sc__vec_grow(ev->e, &ev->cap, ev->n + 1, sizeof *e);
    if (!e)
        return SC_ENOMEM;
    ev->e = e;
    while (ev->bytes + bytes > ev->capacity) {
        uint32_t *v = sc__vec_grow(ev->victims, &ev->vcap, ev->nvictims + 1, sizeof *v);
        if (!v)
            return SC_ENOMEM;
        ev->victims = v;
        uint64_t k = evict_pick_victim(ev);
        ev->victims[ev->nvictims++] = ev->e[k].shard;
        evict_drop(ev, k);
    }
    if (evict_map_put(&ev->idx, shard, ev->n) != SC_OK)
        return SC_ENOMEM;
    ev->e[ev->n++] = (entry){shard, 0, bytes, ++ev->clock, evict_advance(ev, shard)};
    ev->bytes += bytes;
    *victims = ev->victims;
    *nvictims = ev->nvictims;
    return SC_OK;
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
    if (!ev->capacity)
        return UINT64_MAX;
    uint64_t spare = ev->capacity > ev->bytes ? ev->capacity - ev->bytes : 0;
    for (uint64_t k = 0; ev->policy == SC_CACHE_BELADY && k < ev->n; k++)
        spare += ev->e[k].next == NEVER ? ev->e[k].bytes : 0;
    return spare;
}

uint64_t sc__evict_bytes(const sc__evict *ev)
{
    return ev->bytes;
}
