/*
 * cli.c - argument parsing and error reporting for the subcommands.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_u64(const char *flag, const char *arg, uint64_t min, uint64_t max,
            uint64_t *out)
{
    char *end = NULL;
    if (!arg || !*arg || *arg == '-') {
        fprintf(stderr, "shardcache: %s needs a non-negative integer\n", flag);
        return 2;
    }
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || *end || v < min || v > max) {
        fprintf(stderr,
                "shardcache: %s '%s' is not an integer in [%" PRIu64
                ", %" PRIu64 "]\n",
                flag, arg, min, max);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_double(const char *flag, const char *arg, double min, double max,
               double *out)
{
    char *end = NULL;
    if (!arg || !*arg) {
        fprintf(stderr, "shardcache: %s needs a number\n", flag);
        return 2;
    }
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "shardcache: %s '%s' is not a number in [%g, %g]\n",
                flag, arg, min, max);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_choice(const char *flag, const char *arg, const char *const *names,
               int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(arg, names[i])) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "shardcache: %s must be", flag);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s %s", i == 0 ? "" : i + 1 == n ? " or" : ",", names[i]);
    fprintf(stderr, ", not '%s'\n", arg);
    return 2;
}

int cli_read_counts(const char *path, uint64_t **out, uint64_t *n)
{
    FILE *f = fopen(path, "r");
    uint64_t cap = 1024, len = 0;
    uint64_t *v = NULL;
    char word[64];

    if (!f) {
        fprintf(stderr, "shardcache: cannot open '%s': %s\n", path,
                strerror(errno));
        return 2;
    }
    v = malloc(sizeof *v * cap);
    while (v && fscanf(f, "%63s", word) == 1) {
        uint64_t x;
        if (cli_u64(path, word, 0, UINT64_MAX, &x)) {
            fprintf(stderr, "shardcache: '%s': entry %" PRIu64 " is bad\n",
                    path, len + 1);
            free(v);
            fclose(f);
            return 2;
        }
        if (len == cap) {
            uint64_t *w = realloc(v, sizeof *v * (cap *= 2));
            if (!w) {
                free(v);
                v = NULL;
                break;
            }
            v = w;
        }
        v[len++] = x;
    }
    fclose(f);
    if (!v) {
        fprintf(stderr, "shardcache: out of memory reading '%s'\n", path);
        return 2;
    }
    if (len == 0) {
        fprintf(stderr, "shardcache: '%s' lists no shard sizes\n", path);
        free(v);
        return 2;
    }
    *out = v;
    *n = len;
    return 0;
}

void cli_report(const char *cmd, int rank, int nranks, const sc_error *err)
{
    if (nranks > 1)
        fprintf(stderr, "shardcache %s: rank %d: %s: %s\n", cmd, rank,
                sc_status_name(err->code), err->msg);
    else
        fprintf(stderr, "shardcache %s: %s: %s\n", cmd,
                sc_status_name(err->code), err->msg);
}
