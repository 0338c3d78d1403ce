/*
 * bench_doc.h - benchmarks write their tables into docs/benchmarks.md
 * between <!-- bench:NAME --> and <!-- /bench:NAME --> markers, so that
 * the document always shows the last run's figures and command.
 */
#ifndef SC_BENCH_DOC_H
#define SC_BENCH_DOC_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache.h"

/* Replaces (or appends) the block NAME in the file at path; 0 on success. */
int bench_doc_write(const char *path, const char *name, const char *text);

/* Seconds on a monotonic clock. */
double bench_now(void);

/*
 * A training step of s seconds: a sleep, as the consumer thread does while
 * it waits for a GPU kernel, or (spin) a busy loop, a CPU model that takes
 * a core from the producers.
 */
void bench_step(double s, int spin);

/* "2,4,8" into out[max]: the count, 0 if empty or not positive integers. */
int bench_int_list(const char *arg, int *out, int max);

/* The median of n values (sorts them). */
double bench_median(double *v, int n);

/*
 * The benchmarks' data: make-dataset's default samples, a 3x64x64 uint8
 * image and an int64 label, BENCH_SAMPLE_BYTES each.
 */
#define BENCH_SAMPLE_BYTES (3 * 64 * 64 + 8)

/* Writes ~mib MiB of them to path; the sample count, 0 on failure (err). */
uint64_t bench_images(const char *path, uint64_t mib, uint64_t seed, sc_error *err);

/*
 * A fresh directory BASE/bench_TAG.XXXXXX (base NULL: $TMPDIR or /tmp),
 * its path in dir[n]; 0 on success.
 */
int bench_scratch(const char *base, const char *tag, char *dir, size_t n);

/* rm -rf dir, saying on stderr (as prog) when that failed. */
void bench_rmtree(const char *prog, const char *dir);

#endif
