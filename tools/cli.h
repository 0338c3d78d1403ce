/*
 * cli.h - what every `shardcache` subcommand shares: strict number parsing
 * (a typo is an error, never a zero), and one way to report failures that
 * names the rank when running under MPI.
 */
#ifndef SC_CLI_H
#define SC_CLI_H

#include <stdint.h>

#include "shardcache.h"

/* Each returns 0 on success, or prints "shardcache FLAG: ..." and returns 2. */
int cli_u64(const char *flag, const char *arg, uint64_t min, uint64_t max,
            uint64_t *out);
int cli_double(const char *flag, const char *arg, double min, double max,
               double *out);

/* Index of `arg` in names[0..n), or prints "FLAG must be a, b or c" and returns 2. */
int cli_choice(const char *flag, const char *arg, const char *const *names,
               int n, int *out);

/* Reads whitespace-separated unsigned counts from a file into *out. */
int cli_read_counts(const char *path, uint64_t **out, uint64_t *n);

/* Prints "shardcache CMD: [rank R: ]STATUS: message" to stderr. */
void cli_report(const char *cmd, int rank, int nranks, const sc_error *err);

int cmd_plan(int argc, char **argv);

#endif /* SC_CLI_H */
