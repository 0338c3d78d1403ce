#include "bench_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "synth.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bench_step(double s, int spin)
{
    if (s <= 0)
        return;
    if (!spin) {
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        nanosleep(&ts, NULL);
        return;
    }
    double until = bench_now() + s;
    while (bench_now() < until)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_int_list(const char *arg, int *out, int max)
{
    int n = 0;
    for (const char *s = arg; *s && n < max; s = strchr(s, ',') ? strchr(s, ',') + 1 : "") {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || v < 1 || v > 1024)
            return 0;
        out[n++] = (int)v;
    }
    return n;
}

uint64_t bench_images(const char *path, uint64_t mib, uint64_t seed, sc_error *err)
{
    sc__synth_params sp = SC__SYNTH_PARAMS_INIT;
    sp.out = path;
    sp.samples = (mib << 20) / BENCH_SAMPLE_BYTES;
    sp.seed = seed;
    return sc__dataset_make(&sp, NULL, NULL, err) == SC_OK ? sp.samples : 0;
}

int bench_scratch(const char *base, const char *tag, char *dir, size_t n)
{
    if (!base)
        base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(dir, n, "%s/bench_%s.XXXXXX", base, tag) >= (int)n)
        return -1;
    return mkdtemp(dir) ? 0 : -1;
}

void bench_rmtree(const char *prog, const char *dir)
{
    char cmd[8300];
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= (int)sizeof cmd || system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", prog, dir);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (!f)
        return calloc(1, 1);
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            *len = fread(buf, 1, (size_t)n, f);
            buf[*len] = '\0';
        }
    }
    fclose(f);
    return buf;
}

int bench_doc_write(const char *path, const char *name, const char *text)
{
    char open_tag[128], close_tag[128];
    size_t len = 0;
    char *doc = slurp(path, &len);
    if (!doc)
        return -1;
    snprintf(open_tag, sizeof open_tag, "<!-- bench:%s -->", name);
    snprintf(close_tag, sizeof close_tag, "<!-- /bench:%s -->", name);
    char *a = strstr(doc, open_tag);
    char *b = a ? strstr(a, close_tag) : NULL;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(doc);
        return -1;
    }
    if (a && b) {
        fwrite(doc, 1, (size_t)(a - doc), f);
        fprintf(f, "%s\n%s%s", open_tag, text, b);
    } else {
        fputs(doc, f);
        fprintf(f, "\n%s\n%s%s\n", open_tag, text, close_tag);
    }
    free(doc);
    return fclose(f) == 0 ? 0 : -1;
}
