/*
 * cmd_trace_merge.c - `shardcache trace merge` and `check`.  The rank
 * files (SC_TRACE=PREFIX: PREFIX.rankR.json) hold one event per line;
 * merge reads them line by line, so that a rank that died mid-job still
 * contributes every epoch it flushed.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd_trace_model.h"

static int cmd_trace_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct names {
    char **v;
    int n;
    size_t cap;
} names;

static int cmd_trace_add_name(names *l, const char *a, const char *b)
{
    char **g = sc__vec_grow(l->v, &l->cap, (size_t)l->n + 1, sizeof *g);
    size_t len = strlen(a) + (b ? strlen(b) + 1 : 0) + 1;
    char *p = malloc(len);
    if (!g || !p) {
        free(p);
        if (g)
            l->v = g;
        return -1;
    }
    l->v = g;
    snprintf(p, len, "%s%s%s", a, b ? "/" : "", b ? b : "");
    l->v[l->n++] = p;
    return 0;
}

static void cmd_trace_free_names(names *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* The rank files in DIR: *.rank<N>.json, sorted. */
static int cmd_trace_list_dir(const char *dir, names *out)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "shardcache trace merge: cannot open '%s': %s\n", dir, strerror(errno));
        return 2;
    }
    struct dirent *de;
    int first = out->n, rc = 0;
    while (!rc && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (strstr(de->d_name, ".rank") && len > 5 && !strcmp(de->d_name + len - 5, ".json"))
            rc = cmd_trace_add_name(out, dir, de->d_name) ? 2 : 0;
    }
    closedir(d);
    qsort(out->v + first, (size_t)(out->n - first), sizeof *out->v, cmd_trace_cmp_str);
    return rc;
}

/*
 * Copies one rank file's events to `out`, line by line; a last line cut
 * short (a rank that died) ends the file with a warning, anything else
 * that does not parse is an error.
 */
static int cmd_trace_merge_one(const char *path, FILE *out, uint64_t *written, model *m)
{
    size_t len;
    char *text = cmd_trace_slurp(path, &len), err[256];
    if (!text)
        return 2;
    uint64_t lines = 0, here = 0;
    int rc = 0, closed = 0;
    for (char *p = text, *end = text + len; p < end && !rc;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end, *q = stop;
        lines++;
        while (q > p && (q[-1] == ',' || q[-1] == ' ' || q[-1] == '\r'))
            q--;
        if (q > p && *p == '{' && strncmp(p, "{\"traceEvents\"", 14) != 0) {
            json_doc *doc = json_parse(p, (size_t)(q - p), err, sizeof err);
            if (!doc && !nl) {
                fprintf(stderr,
                        "shardcache trace merge: '%s' ends mid-event at line %" PRIu64
                        " (did the rank die?); its %" PRIu64 " events before it are kept\n",
                        path, lines, here);
                break;
            }
            if (!doc || cmd_trace_take_event(m, json_root(doc), err, sizeof err)) {
                fprintf(stderr, "shardcache trace merge: '%s' line %" PRIu64 ": %s\n", path,
                        lines, err);
                rc = 1;
            } else {
                fprintf(out, "%s%.*s", *written ? ",\n" : "", (int)(q - p), p);
                (*written)++;
                here++;
            }
            json_free(doc);
        } else if (q > p && *p == ']') {
            closed = 1;
        }
        p = nl ? nl + 1 : end;
    }
    if (!rc && !closed)
        fprintf(stderr, "shardcache trace merge: '%s' was never finished (the rank did not "
                        "close its loader)\n", path);
    free(text);
    return rc;
}

int cmd_trace_merge(int argc, char **argv)
{
    const char *out = NULL;
    names files = {NULL, 0, 0};
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        struct stat st;
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            rc = cmd_trace_list_dir(argv[i], &files);
        else
            rc = cmd_trace_add_name(&files, argv[i], NULL) ? 2 : 0;
    }
    if (!rc && (!out || !files.n)) {
        fprintf(stderr, "usage: shardcache trace merge DIR|FILE... -o job.json%s\n",
                out ? "\n(no *.rankN.json files found)" : "");
        rc = 2;
    }
    FILE *f = rc ? NULL : cli_output("trace merge", out, "w");
    if (!rc && !f)
        rc = 2;
    model m = {0};
    uint64_t written = 0;
    if (f) {
        fprintf(f, "{\"traceEvents\":[\n");
        for (int i = 0; i < files.n && !rc; i++)
            rc = cmd_trace_merge_one(files.v[i], f, &written, &m);
        fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
        if (fclose(f) != 0 && !rc) {
            fprintf(stderr, "shardcache trace merge: writing '%s' failed\n", out);
            rc = 2;
        }
    }
    if (f && !rc) {
        int ranks = 0;
        for (int r = 0; r < m.nranks; r++)
            ranks += m.ranks[r].seen;
        printf("merged %" PRIu64 " events from %d files (%d ranks) into %s\n", written,
               files.n, ranks, out);
    }
    cmd_trace_free_names(&files);
    cmd_trace_model_free(&m);
    return rc;
}

int cmd_trace_check(const char *path)
{
    model m = {0};
    int rc = cmd_trace_load(path, &m);
    if (!rc) {
        uint64_t dropped = 0;
        int ranks = 0;
        for (int r = 0; r < m.nranks; r++)
            ranks += m.ranks[r].seen, dropped += m.ranks[r].dropped;
        printf("%s: valid JSON, %" PRIu64 " events, %d ranks, %" PRIu64 " dropped\n", path,
               m.events, ranks, dropped);
    }
    cmd_trace_model_free(&m);
    return rc;
}
