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
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "vec.h"

int cli_u64(const char *flag, const char *arg, uint64_t min, uint64_t max,
            uint64_t *out)
{
    char *end = NULL;
    if (!arg || *arg < '0' || *arg > '9') { /* strtoull takes blanks and a '-' */
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

/*
 * The samples a shard of the flags holds: --shard-size, or when not given
 * 1024 for --shards and SC_SHARD_SIZE=auto's rule for --samples (or
 * --labels); SC_SHARD_AUTO for auto without --samples.
 */
uint64_t cli_shard_size(const plan_opts *o)
{
    if (o->shard_size && o->shard_size != SC_SHARD_AUTO)
        return o->shard_size;
    if (o->samples)
        return sc_shard_size_auto(o->samples, o->sample_bytes);
    return o->shard_size || o->labels ? SC_SHARD_AUTO : 1024;
}

void *cli_slurp(FILE *f, size_t *len)
{
    size_t cap = 0, n = 0, got = 1;
    unsigned char *buf = NULL, *g;
    while (got && (g = sc__vec_grow(buf, &cap, n + 65536, 1))) {
        buf = g;
        n += got = fread(buf + n, 1, cap - n, f);
    }
    if (got || ferror(f)) { /* stopped by no memory, or by a read error (errno says) */
        if (got)
            errno = ENOMEM;
        free(buf);
        buf = NULL;
    }
    *len = n;
    return buf;
}

int cli_read_counts(const char *path, uint64_t **out, uint64_t *n)
{
    FILE *f = fopen(path, "r");
    uint64_t len = 0;
    size_t cap = 0;
    uint64_t *v = NULL, *w;
    int oom = 0;
    char word[64];

    if (!f) {
        fprintf(stderr, "shardcache: cannot open '%s': %s\n", path,
                strerror(errno));
        return 2;
    }
    while (fscanf(f, "%63s", word) == 1) {
        uint64_t x;
        if (cli_u64(path, word, 0, UINT64_MAX, &x)) {
            fprintf(stderr, "shardcache: '%s': entry %" PRIu64 " is bad\n",
                    path, len + 1);
            free(v);
            fclose(f);
            return 2;
        }
        if ((oom = !(w = sc__vec_grow(v, &cap, len + 1, sizeof *v))))
            break;
        v = w;
        v[len++] = x;
    }
    fclose(f);
    if (oom) {
        free(v);
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

void cli_progress_init(cli_progress *p, const char *what)
{
    p->what = what;
    p->tty = isatty(STDERR_FILENO);
    p->last_pct = -1;
    p->t0 = sc__clock_s();
}

void cli_progress_cb(void *arg, uint64_t done, uint64_t total)
{
    cli_progress *p = arg;
    int pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
    if (pct == p->last_pct || (!p->tty && pct / 10 == p->last_pct / 10 && pct != 100))
        return;
    p->last_pct = pct;
    double secs = sc__clock_s() - p->t0;
    if (p->tty) {
        char bar[41];
        int fill = pct * 40 / 100;
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, ' ', (size_t)(40 - fill));
        bar[40] = '\0';
        fprintf(stderr, "\r%s [%s] %3d%% %.1fs", p->what, bar, pct, secs);
        if (pct == 100)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s: %d%% (%.1fs)\n", p->what, pct, secs);
    }
    fflush(stderr);
}

FILE *cli_output(const char *cmd, const char *path, const char *mode)
{
    sc_error err = SC_ERROR_INIT;
    int fd = -1;
    FILE *f = NULL;
    if (sc_output_open(path, &fd, &err) == SC_OK && !(f = fdopen(fd, mode))) {
        snprintf(err.msg, sizeof err.msg, "'%s': %s", path, strerror(errno));
        close(fd);
    }
    if (!f)
        fprintf(stderr, "shardcache %s: %s\n", cmd, err.msg);
    return f;
}

int cli_config(sc_config *cfg)
{
    sc_error err = SC_ERROR_INIT;
    if (sc_config_init(cfg, &err) == SC_OK)
        return 0;
    fprintf(stderr, "shardcache: %s\n", err.msg);
    return 2;
}
