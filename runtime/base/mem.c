/*
 * mem.c - buffers of megabytes that fault in 2 MiB at a time, and the
 * copy that bypasses the cache (at the end).
 *
 * A shard buffer is fresh anonymous memory in the first epoch (glibc
 * serves the first blocks this size with mmap; once some are freed it
 * raises its threshold and serves later ones from the heap, fresh too
 * until touched), and its first touch faults 4 KiB at a time.  Under a hypervisor each fault is a trip out of the guest:
 * on our CI machines the cold epoch spent more time in the fault path
 * than in reading, and a shard's checksum stalled on the TLB after it,
 * so that the cold epoch ran at a small fraction of the file's read rate.
 * Huge pages fault once per 2 MiB and need 512 times fewer TLB entries,
 * and the same epoch ran several times faster (the figures, before and
 * after: docs/benchmarks.md, "Streaming").  The kernel's default THP mode,
 * "madvise", honours the advice; "never" ignores it and nothing is lost.
 * Only the buffer's whole 2 MiB pages are advised: a tail in a huge page
 * of its own would hold up to 2 MiB more than the bytes asked for, and
 * the loader counts the bytes against SC_STREAM_BYTES.
 *
 * The pool keeps such buffers once freed, so that later epochs reuse warm
 * ones instead of faulting fresh ones in; the stream may fill it at open
 * with buffers faulted in by sc__big_prefault, for the first epoch too.
 */
#define _GNU_SOURCE
#include "mem.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "vec.h"

/* Under ASan and TSan the copy is memcpy, whose bytes they check. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MEM_SANITIZED 1
#endif
#endif
#if defined(__SSE2__) && !defined(MEM_SANITIZED)
#include <emmintrin.h>
#define MEM_NT 1
#endif

#define HUGE_BYTES ((size_t)2 << 20)

void *sc__big_alloc(size_t bytes)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    if (bytes > SIZE_MAX - HUGE_BYTES)
        return NULL;
    size_t len = bytes ? (bytes + page - 1) & ~(page - 1) : page;
    void *p = NULL;
    if (posix_memalign(&p, len < HUGE_BYTES ? page : HUGE_BYTES, len) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (len >= HUGE_BYTES) /* advice: a kernel without THP just says no */
        (void)madvise(p, len & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; an older kernel says EINVAL */
#endif

int sc__big_prefault(void *p, size_t bytes)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
    size_t len = ((uintptr_t)p + bytes - a + page - 1) & ~(page - 1);
    if (!p || !bytes || madvise((void *)a, len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL) /* ENOMEM: touching them would meet the OOM killer */
        return -1;
    for (size_t at = 0; at < bytes; at += page) /* one write a page faults it */
        ((volatile unsigned char *)p)[at] = 0;
    return 0;
}

void *sc__scratch(void *old, size_t *cap, size_t n)
{
    if (old && n <= *cap)
        return old;
    free(old);
    void *p = malloc(n ? n : 1);
    *cap = p ? n : 0;
    return p;
}

/* Each thread's buffers (sc__thread_buffer), freed by the key's destructor. */
typedef struct mem_thread {
    void *buf[SC__THREAD_BUFFERS];
    size_t cap[SC__THREAD_BUFFERS];
} mem_thread;

static pthread_key_t mem_key;
static pthread_once_t mem_once = PTHREAD_ONCE_INIT;

static void mem_thread_free(void *p)
{
    mem_thread *t = p;
    for (int i = 0; i < SC__THREAD_BUFFERS; i++)
        free(t->buf[i]);
    free(t);
}

static void mem_key_make(void)
{
    pthread_key_create(&mem_key, mem_thread_free);
}

void *sc__thread_buffer(int slot, size_t n)
{
    if (slot < 0 || slot >= SC__THREAD_BUFFERS)
        return NULL;
    pthread_once(&mem_once, mem_key_make);
    mem_thread *t = pthread_getspecific(mem_key);
    if (!t && (t = calloc(1, sizeof *t)) && pthread_setspecific(mem_key, t) != 0) {
        free(t);
        t = NULL;
    }
    if (!t)
        return NULL;
    if (t->cap[slot] < n) { /* its bytes are not kept: no realloc's copy */
        free(t->buf[slot]);
        t->cap[slot] = (t->buf[slot] = sc__big_alloc(n)) ? n : 0;
    }
    return t->buf[slot];
}

void *sc__pool_take(sc__pool *p, uint64_t bytes, uint64_t *cap)
{
    size_t best = p->n;
    for (size_t k = 0; k < p->n; k++)
        if (p->v[k].cap >= bytes && (best == p->n || p->v[k].cap < p->v[best].cap))
            best = k;
    if (best == p->n)
        return NULL;
    void *b = p->v[best].buf;
    *cap = p->v[best].cap;
    p->bytes -= *cap;
    p->v[best] = p->v[--p->n];
    return b;
}

void *sc__pool_put(sc__pool *p, void *b, uint64_t cap, uint64_t limit)
{
    struct sc__pooled *v;
    if (p->bytes + cap <= limit && (v = sc__vec_grow(p->v, &p->room, p->n + 1, sizeof *v))) {
        p->v = v;
        p->v[p->n++] = (struct sc__pooled){b, cap};
        p->bytes += cap;
        return NULL;
    }
    return b;
}

void *sc__pool_shed(sc__pool *p, uint64_t limit, uint64_t *cap)
{
    if (p->bytes <= limit || p->n == 0)
        return NULL;
    size_t big = 0;
    for (size_t k = 1; k < p->n; k++)
        big = p->v[k].cap > p->v[big].cap ? k : big;
    void *b = p->v[big].buf;
    *cap = p->v[big].cap;
    p->bytes -= *cap;
    p->v[big] = p->v[--p->n];
    return b;
}

void sc__pool_free(sc__pool *p)
{
    for (size_t k = 0; k < p->n; k++)
        free(p->v[k].buf);
    free(p->v);
    *p = (sc__pool){0};
}

/*
 * Samples copied in a random order into a ring of three batches, one
 * core (`bench_deliver --gather --depth 3`): memcpy was 1.19x faster into
 * a ring of 2.4 MB, the non-temporal copy 1.26x faster into 4.7 MB and
 * 1.46x into 138 MB (docs/benchmarks.md, "Batch copies past the cache").
 * The cache's size as the CPU reports it says little inside a guest (64
 * MiB by CPUID on the machine measured, 8 MiB by the kernel) or beside
 * other ranks, so the bound is the measured crossover.
 */
#define MEM_BYPASS_BYTES ((uint64_t)4 << 20)

int sc__copy_bypasses(uint64_t bytes)
{
    return bytes >= MEM_BYPASS_BYTES;
}

sc__copy_fn sc__copy_for(uint64_t bytes)
{
    return sc__copy_bypasses(bytes) ? sc__copy_nt : memcpy;
}

void *sc__copy_nt(void *to, const void *from, size_t n)
{
#ifdef MEM_NT
    unsigned char *d = to;
    const unsigned char *s = from;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (n < 256 || head) { /* short, or up to the destination's first 16-byte block */
        size_t k = n < 256 ? n : head;
        memcpy(d, s, k);
        d += k, s += k, n -= k;
    }
    for (; n >= 64; d += 64, s += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
    return to;
#else
    return memcpy(to, from, n);
#endif
}

void sc__copy_fence(void)
{
#ifdef MEM_NT
    _mm_sfence();
#endif
}
