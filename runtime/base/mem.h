/*
 * mem.h - buffers of megabytes that fault in 2 MiB at a time, a pool
 * that keeps freed ones for the next use, and a copy that bypasses the
 * CPU's cache for batches no one reads before the cache would evict them.
 */
#ifndef SC_MEM_H
#define SC_MEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * At least `bytes` for a shard, a chunk or a batch, aligned to a page;
 * from 2 MiB on, aligned to 2 MiB and advised as transparent huge pages.
 * Freed with free(); NULL when out of memory.
 */
void *sc__big_alloc(size_t bytes);

/*
 * Faults p's `bytes` in now (its contents become undefined): for a buffer
 * that will be written soon on a path that must not wait for fresh pages.
 * 0, or -1 where the kernel has no memory for them (nothing is touched).
 */
int sc__big_prefault(void *p, size_t bytes);

/*
 * A scratch buffer of at least n bytes: `old` (of *cap bytes) when it is
 * big enough, else a new one (the contents are never kept, so no realloc
 * copies them); NULL when out of memory, old freed and *cap 0.
 */
void *sc__scratch(void *old, size_t *cap, size_t n);

/*
 * This thread's buffer number `slot` (< SC__THREAD_BUFFERS), at least n
 * bytes, from sc__big_alloc, or NULL: kept between calls (a fresh buffer
 * faults on every first touch, which costs more than filling it), its
 * contents not kept when it grows, freed when the thread ends.  Slots:
 * SC__TB_CHUNK* for chunks.c, SC__TB_BOUNCE for io.c's aligned transfers.
 */
enum { SC__TB_CHUNK_RAW, SC__TB_CHUNK, SC__TB_CHUNK_TMP, SC__TB_BOUNCE, SC__THREAD_BUFFERS };
void *sc__thread_buffer(int slot, size_t n);

/*
 * Freed buffers kept for reuse: a fresh buffer of megabytes faults on
 * every first touch, which costs more than filling it, while a reused one
 * is warm.  Not thread-safe: its owner serializes (the stream, under its
 * mutex).  Zero-initialized it is empty.
 */
typedef struct sc__pool {
    struct sc__pooled {
        void *buf;
        uint64_t cap; /* buf holds cap bytes */
    } *v;
    size_t n, room;
    uint64_t bytes;
} sc__pool;

/* The smallest pooled buffer of at least `bytes` (its size in *cap), or NULL. */
void *sc__pool_take(sc__pool *p, uint64_t bytes, uint64_t *cap);
/*
 * Keeps b (cap bytes) while the pool holds at most `limit` bytes: NULL;
 * else b, for the caller to free (outside its locks: a large block's free
 * is an munmap).
 */
void *sc__pool_put(sc__pool *p, void *b, uint64_t cap, uint64_t limit);
/*
 * While the pool holds more than `limit` bytes: its largest buffer, out of
 * the pool, for the caller to free (its size in *cap); else NULL.
 */
void *sc__pool_shed(sc__pool *p, uint64_t limit, uint64_t *cap);
/* Frees every pooled buffer; the pool is empty again. */
void sc__pool_free(sc__pool *p);

/*
 * memcpy's result, written with non-temporal stores where the CPU has
 * them (x86's SSE2; all but a copy's first and last few bytes, and all of
 * one under 256 bytes, which go by memcpy): for a destination that the
 * cache would evict before anyone reads it, such as a large ring of
 * batches (sc__copy_bypasses).
 * The copy then skips reading each destination line in first
 * (read-for-ownership), a third of its memory traffic.  The stores are
 * weakly ordered: sc__copy_fence() before the destination goes to another
 * thread or a device, on every path, a failed one too.  Elsewhere, and
 * under ASan and TSan (which check memcpy's bytes, not these stores), it
 * is memcpy.
 */
void *sc__copy_nt(void *to, const void *from, size_t n);
void sc__copy_fence(void);
/*
 * Whether copies that rewrite `bytes` in turn (a batch ring) should use
 * sc__copy_nt: 4 MiB or more, the crossover measured on a 2-core guest
 * (mem.c), not a figure read from the CPU.
 */
int sc__copy_bypasses(uint64_t bytes);
/* The copy for such a region: sc__copy_nt where it bypasses, else memcpy. */
typedef void *(*sc__copy_fn)(void *to, const void *from, size_t n);
sc__copy_fn sc__copy_for(uint64_t bytes);

#endif
