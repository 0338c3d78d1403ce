/*
 * hash.h - the 64-bit hashes and the counter-based random numbers that
 * everything deterministic in shardcache is built on.
 *
 * Plans must be byte-identical on every rank and every machine, so nothing
 * here may depend on the platform's rand(), on pointer values or on the
 * host's byte order.  xxh64 follows the published XXH64 specification and
 * reads its input as little-endian on any host.
 */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

uint64_t sc__xxh64(const void *data, size_t len, uint64_t seed);

/* Streaming XXH64 over several buffers: same digest as one call on their concatenation. */
typedef struct sc__xxh64_state {
    uint64_t v[4], total, seed;
    unsigned char buf[32];
    size_t buffered;
} sc__xxh64_state;

void sc__xxh64_init(sc__xxh64_state *s, uint64_t seed);
void sc__xxh64_update(sc__xxh64_state *s, const void *data, size_t len);
uint64_t sc__xxh64_final(const sc__xxh64_state *s);

/* A strong 64-bit mixer (the SplitMix64 finalizer): a bijection on uint64_t. */
static inline uint64_t sc__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/*
 * A counter-based generator: the n-th number of a stream is a pure function
 * of (key, n), so a stream can be re-derived anywhere from its key alone.
 * Streams are keyed by (seed, epoch, purpose[, rank]) with sc__rng_key().
 */
typedef struct sc__rng {
    uint64_t key;
    uint64_t ctr;
} sc__rng;

/*
 * The purposes that key independent random streams of one (seed, epoch):
 * every draw of shardcache, in one list so that no two collide.  The
 * values are part of every plan's and schedule's bytes: changing one moves
 * every plan, schedule and augmentation (and tests/unit/test_plan.c's
 * golden hashes), so add, never renumber.  Macros, not an enum: the
 * 64-bit keys are past what a C11 enumerator may hold.
 */
/* core/plan.c: the planner */
#define SC__PURPOSE_ORDER UINT64_C(1)   /* global: the stratified permutation */
#define SC__PURPOSE_LABEL UINT64_C(2)   /* global: relabelling of ranks */
#define SC__PURPOSE_RELEASE UINT64_C(3) /* sticky: which shards move */
#define SC__PURPOSE_WITHIN UINT64_C(4)  /* each rank's spread order */
/* storage/synth.c: synthetic datasets (`shardcache make-dataset`) */
#define SC__PURPOSE_SYNTH_SAMPLE UINT64_C(7) /* a sample's label and pixels (epoch: its id) */
#define SC__PURPOSE_SYNTH_PROTO UINT64_C(8)  /* the classes' prototypes */
/* core/schedule.c: a rank's schedule */
#define SC__PURPOSE_WINDOW UINT64_C(0x77696e646f77) /* "window": the shuffle within windows */
#define SC__PURPOSE_DROPS UINT64_C(0x64726f7073)    /* "drops": which samples drop leaves out */
/* core/quality.c: the uniform-shuffle baseline */
#define SC__PURPOSE_UNIFORM UINT64_C(0x756e69666f726d) /* "uniform" */
/* pipeline/batch.c: batch assembly (DECODE and STAGES + the field's index) */
#define SC__PURPOSE_AUGMENT UINT64_C(0x6175676d656e74) /* "augment" */
#define SC__PURPOSE_DECODE UINT64_C(0x6465636f6465)    /* "decode": its random crop */
#define SC__PURPOSE_STAGES UINT64_C(0x737461676573)    /* "stages": SC_AUGMENT's draws */
#define SC__PURPOSE_REPLACE UINT64_C(0x7265706c616365) /* "replace": a skipped sample's stand-in */

static inline uint64_t sc__rng_key(uint64_t seed, uint64_t epoch,
                                   uint64_t purpose, uint64_t sub)
{
    uint64_t k = sc__mix64(seed ^ UINT64_C(0x5348415244434143)); /* "SHARDCAC" */
    k = sc__mix64(k ^ epoch);
    k = sc__mix64(k ^ purpose);
    return sc__mix64(k ^ sub);
}

static inline void sc__rng_init(sc__rng *r, uint64_t key)
{
    r->key = key;
    r->ctr = 0;
}

static inline uint64_t sc__rng_next(sc__rng *r)
{
    return sc__mix64(r->key + (++r->ctr) * UINT64_C(0x9E3779B97F4A7C15));
}

/*
 * Uniform in [0, n), n >= 1, without modulo bias (Lemire's multiply-shift
 * with rejection).  Deterministic: the rejections depend only on the stream.
 */
static inline uint64_t sc__rng_below(sc__rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)sc__rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = (0 - n) % n;
        while (lo < t) {
            m = (unsigned __int128)sc__rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/*
 * Little-endian loads and stores, whatever the host's byte order.  On
 * little-endian hosts they are plain (unaligned-safe) memcpy, which the
 * compiler turns into single moves.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SC__HOST_LE 1
#else
#define SC__HOST_LE 0
#endif

static inline void sc__put_u64(unsigned char *p, uint64_t v)
{
    if (SC__HOST_LE) {
        memcpy(p, &v, 8);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A double's IEEE-754 bits and back: how doubles travel in wire formats. */
static inline uint64_t sc__double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double sc__bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t sc__get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    if (SC__HOST_LE) {
        memcpy(&v, p, 8);
        return v;
    }
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void sc__put_u32(unsigned char *p, uint32_t v)
{
    if (SC__HOST_LE) {
        memcpy(p, &v, 4);
        return;
    }
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t sc__get_u32(const unsigned char *p)
{
    uint32_t v;
    if (SC__HOST_LE) {
        memcpy(&v, p, 4);
        return v;
    }
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

#endif /* SC_HASH_H */
