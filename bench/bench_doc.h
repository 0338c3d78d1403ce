/*
 * bench_doc.h - benchmarks write their tables into docs/benchmarks.md
 * between <!-- bench:NAME --> and <!-- /bench:NAME --> markers, so that
 * the document always shows the last run's figures and command.
 */
#ifndef SC_BENCH_DOC_H
#define SC_BENCH_DOC_H

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

/* The median of n values (sorts them). */
double bench_median(double *v, int n);

#endif
