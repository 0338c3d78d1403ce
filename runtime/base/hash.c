/*
 * hash.c - XXH64, written from the public specification (xxhash.com's
 * "xxHash fast digest algorithm" document), so that plan hashes and cache
 * checksums can be checked against any other XXH64 implementation.
 */
#include "hash.h"

#include <string.h>

#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)
#define P4 UINT64_C(0x85EBCA77C2B2AE63)
#define P5 UINT64_C(0x27D4EB2F165667C5)

static inline uint64_t hash_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t hash_round64(uint64_t acc, uint64_t lane)
{
    acc += lane * P2;
    acc = hash_rotl(acc, 31);
    return acc * P1;
}

static inline uint64_t hash_merge64(uint64_t acc, uint64_t v)
{
    acc ^= hash_round64(0, v);
    return acc * P1 + P4;
}

void sc__xxh64_init(sc__xxh64_state *s, uint64_t seed)
{
    s->seed = seed;
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
    s->total = 0;
    s->buffered = 0;
}

static void hash_stripe(uint64_t *v, const unsigned char *p)
{
    v[0] = hash_round64(v[0], sc__get_u64(p));
    v[1] = hash_round64(v[1], sc__get_u64(p + 8));
    v[2] = hash_round64(v[2], sc__get_u64(p + 16));
    v[3] = hash_round64(v[3], sc__get_u64(p + 24));
}

void sc__xxh64_update(sc__xxh64_state *s, const void *data, size_t len)
{
    const unsigned char *p = data, *end = p + len;
    s->total += len;
    if (s->buffered + len < 32) {
        if (len)
            memcpy(s->buf + s->buffered, p, len);
        s->buffered += len;
        return;
    }
    if (s->buffered) {
        size_t take = 32 - s->buffered;
        memcpy(s->buf + s->buffered, p, take);
        hash_stripe(s->v, s->buf);
        p += take;
        s->buffered = 0;
    }
    /* Four independent lanes: keep them in registers for the long run. */
    uint64_t v[4] = {s->v[0], s->v[1], s->v[2], s->v[3]};
    for (; end - p >= 32; p += 32)
        hash_stripe(v, p);
    memcpy(s->v, v, sizeof v);
    s->buffered = (size_t)(end - p);
    if (s->buffered)
        memcpy(s->buf, p, s->buffered);
}

uint64_t sc__xxh64_final(const sc__xxh64_state *s)
{
    const unsigned char *p = s->buf, *end = p + s->buffered;
    uint64_t h;
    if (s->total >= 32) {
        const uint64_t *v = s->v;
        h = hash_rotl(v[0], 1) + hash_rotl(v[1], 7) + hash_rotl(v[2], 12) + hash_rotl(v[3], 18);
        for (int i = 0; i < 4; i++)
            h = hash_merge64(h, v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    while (end - p >= 8) {
        h ^= hash_round64(0, sc__get_u64(p));
        h = hash_rotl(h, 27) * P1 + P4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)sc__get_u32(p) * P1;
        h = hash_rotl(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)(*p++) * P5;
        h = hash_rotl(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t sc__xxh64(const void *data, size_t len, uint64_t seed)
{
    sc__xxh64_state s;
    sc__xxh64_init(&s, seed);
    sc__xxh64_update(&s, data, len);
    return sc__xxh64_final(&s);
}
