/*
 * cli.h - what every `shardcache` subcommand shares: strict number parsing
 * (a typo is an error, never a zero), and one way to report failures that
 * names the rank when running under MPI.
 */
#ifndef SC_CLI_H
#define SC_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "shardcache.h"

/* Each returns 0 on success, or prints "shardcache FLAG: ..." and returns 2. */
int cli_u64(const char *flag, const char *arg, uint64_t min, uint64_t max,
            uint64_t *out);
int cli_double(const char *flag, const char *arg, double min, double max,
               double *out);

/* Index of `arg` in names[0..n), or prints "FLAG must be a, b or c" and returns 2. */
int cli_choice(const char *flag, const char *arg, const char *const *names,
               int n, int *out);

/* The whole of a stream into memory, or NULL (no memory, or a read error: errno says). */
void *cli_slurp(FILE *f, size_t *len);

/* Reads whitespace-separated unsigned counts from a file into *out. */
int cli_read_counts(const char *path, uint64_t **out, uint64_t *n);

/* Prints "shardcache CMD: [rank R: ]STATUS: message" to stderr. */
void cli_report(const char *cmd, int rank, int nranks, const sc_error *err);

/*
 * A progress bar on a terminal ("\r[####    ] 42%"), plain lines every 10%
 * otherwise, so that logs stay readable.  Pass to sc__progress_fn users.
 */
typedef struct cli_progress {
    const char *what;
    int tty, last_pct;
    double t0;
} cli_progress;

void cli_progress_init(cli_progress *p, const char *what);
void cli_progress_cb(void *arg, uint64_t done, uint64_t total);

/*
 * A new output file at path for stdio (sc_output_open: 0600, never through
 * a planted link, one's own old file replaced, another user's refused), or
 * NULL after printing "shardcache CMD: message".
 */
FILE *cli_output(const char *cmd, const char *path, const char *mode);

/* Reads SC_* settings from the environment; prints and returns 2 if bad. */
int cli_config(sc_config *cfg);

/*
 * The flags of `plan`, which `verify` shares: it re-derives a job's plans
 * from the job's dataset and plan flags.  Defined in cmd_plan.c.
 */
typedef struct plan_opts {
    uint64_t nshards, shard_size, ranks, epochs, seed, batch;
    uint64_t samples;       /* --samples; 0: --shards x --shard-size */
    double exchange;
    sc_shuffle_mode mode;
    sc_remainder remainder;
    int check;
    const char *sizes_file, *save;
    const char *audit_dirs[8];
    int naudit, union_mode;
    int quality;            /* --quality */
    const char *window_arg; /* --window; NULL: SC_SHUFFLE_WINDOW */
    uint64_t window;        /* the window in samples, resolved */
    uint64_t sample_bytes;  /* --sample-bytes: an auto window's or shard size's */
    const char *labels;     /* --labels FILE:FIELD */
    const char *source;     /* --source: the job's dataset, whose shard sizes are taken */
    const char *partitions_arg; /* --partitions; NULL: SC_PARTITIONS */
    uint64_t partitions;    /* resolved: 0 (the units are the ranks) or P */
    int list_cuts;          /* --list-cuts */
} plan_opts;

/* The labels of `plan --labels` and the dataset's sample size.  cmd_quality.c. */
typedef struct cmd_labels {
    uint32_t *labels, nclasses;
    uint64_t sample_bytes;
} cmd_labels;

/* Shard sizes, sample bytes and labels from --labels FILE:FIELD; 0, or prints and 2. */
int cmd_quality_labels(const plan_opts *o, int rank, uint64_t **sizes, uint64_t *n,
                       cmd_labels *l);
/* Prints one epoch's quality line (sc_plan_quality) for a resolved o->window. */
int cmd_quality_print(const plan_opts *o, const sc_plan *plan, const uint64_t *sizes,
                      uint64_t n, const cmd_labels *l, sc_error *err);

/* 0, -1 after printing usage for --help, or 2 after saying what is wrong. */
int cmd_plan_parse(int argc, char **argv, plan_opts *o, const char *usage);
/* The samples a shard of the flags holds (cli.c): SC_SHARD_AUTO for auto without --samples. */
uint64_t cli_shard_size(const plan_opts *o);
int cmd_plan_load_sizes(const plan_opts *o, uint64_t **sizes, uint64_t *n);
/* The plan parameters the flags describe, for those shard sizes. */
sc_plan_params cmd_plan_params(const plan_opts *o, const uint64_t *sizes, uint64_t n);

/*
 * One rank's audit trail (audit-r<rank>.bin, <shardcache/formats.h>) from
 * its bytes: a header saying it is rank `rank`'s (of *world ranks; rank 0's
 * sets *world), then its (epoch, id | flags) pairs, appended to
 * (*recs)[*n...] (capacity *cap, grown).  Defined in cmd_verify.c.
 * 0; 1 when the bytes are not that trail, 2 out of memory, saying why in `why`.
 */
typedef struct cli_audit_rec {
    uint64_t epoch, id;
    uint32_t rank;
} cli_audit_rec;

int cli_audit_parse(const void *buf, size_t len, uint64_t rank, uint64_t *world,
                    cli_audit_rec **recs, uint64_t *n, size_t *cap, char *why, size_t whylen);

int cmd_plan(int argc, char **argv);
int cmd_make_dataset(int argc, char **argv);
int cmd_stage(int argc, char **argv);
int cmd_scan(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_cache(int argc, char **argv);

#endif /* SC_CLI_H */
