/*
 * cmd_trace.c - `shardcache trace`: merge the ranks' trace files into one
 * timeline, check that a trace is valid JSON, summarize where the
 * consumer's time went, and draw it.
 *
 *   shardcache trace merge DIR|FILES... -o job.json
 *   shardcache trace check FILE
 *   shardcache trace summary job.json
 *   shardcache trace plot job.json -o job.svg
 *
 * The rank files (SC_TRACE=PREFIX: PREFIX.rankR.json) hold one event per
 * line; merge reads them line by line, so that a rank that died mid-job
 * still contributes every epoch it flushed.  summary and plot parse the
 * whole document.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"

/* The stages the runtime records, by their names in the file. */
static const char *const stages[] = {
#define ST_NAME(id, name) name,
    SC_TRACE_STAGE_LIST(ST_NAME)
#undef ST_NAME
};
enum {
#define ST_ENUM(id, name) ST_##id,
    SC_TRACE_STAGE_LIST(ST_ENUM)
#undef ST_ENUM
    NSTAGES
};

/* Why a stage starves the consumer, for the verdict line. */
static const char *const why[] = {
    "waiting for rank 0's plan", "rank 0 computing the plan",
    "cache misses: shards read from the source", "node-local cache reads",
    "writing new cache entries", "checksums of entries read for the first time",
    "batch assembly: more SC_PRODUCERS may help", "producers waiting for free batch buffers",
    "host-to-device copies", "", "", "end-of-epoch verification",
    "shards from other nodes (peer transfers)"};
_Static_assert(sizeof why / sizeof why[0] == NSTAGES, "one reason per stage");

static int cmd_trace_stage_of(const char *name)
{
    for (int i = 0; i < NSTAGES; i++)
        if (!strcmp(name, stages[i]))
            return i;
    return -1;
}

/* ---- the model ---------------------------------------------------------------- */

typedef struct span {
    int rank, tid, stage;
    double t0, t1; /* microseconds, job clock */
    uint64_t bytes, epoch;
} span;

/* What an instant ("i") or counter ("C") event records. */
typedef enum mark_kind {
    MARK_EPOCH_END, /* any instant */
    MARK_RING,      /* the "ring occupancy" counter, in batches */
    MARK_HIT_RATE,  /* the cache hit rate, in percent */
    MARK_SHARDS,    /* distinct shards per batch, an epoch's mean */
    MARK_OTHER,     /* a counter this version does not read */
} mark_kind;

typedef struct mark {
    int rank;
    uint64_t epoch;
    double t;
    double value; /* counters */
    mark_kind kind;
} mark;

typedef struct thread {
    int rank, tid;
    char name[64];
} thread;

typedef struct rankinfo {
    int seen, finished;
    double clock_error_us;
    uint64_t dropped;
} rankinfo;

typedef struct model {
    span *spans;
    size_t nspans, capspans;
    mark *marks;
    size_t nmarks, capmarks;
    thread *threads;
    size_t nthreads, capthreads;
    rankinfo *ranks;
    int nranks; /* one past the highest rank seen */
    uint64_t events;
} model;

#define GROW(arr, n, cap)                                                     \
    ((n) < (cap) ? 0                                                          \
                 : ((cap) = (cap) ? 2 * (cap) : 1024,                         \
                    ((arr) = realloc((arr), sizeof *(arr) * (cap))) ? 0 : -1))

static int cmd_trace_rank_slot(model *m, int rank)
{
    if (rank < 0 || rank > 1 << 20)
        return -1;
    if (rank >= m->nranks) {
        rankinfo *r = realloc(m->ranks, sizeof *r * (size_t)(rank + 1));
        if (!r)
            return -1;
        memset(r + m->nranks, 0, sizeof *r * (size_t)(rank + 1 - m->nranks));
        m->ranks = r;
        m->nranks = rank + 1;
    }
    m->ranks[rank].seen = 1;
    return 0;
}

static mark_kind cmd_trace_mark_kind_of(const char *ph, const char *name)
{
    if (!strcmp(ph, "i"))
        return MARK_EPOCH_END;
    return !strcmp(name, "ring occupancy")     ? MARK_RING
           : !strcmp(name, "cache hit rate")   ? MARK_HIT_RATE
           : !strcmp(name, "shards per batch") ? MARK_SHARDS
                                               : MARK_OTHER;
}

/* Takes one event object into the model; -1 with a message if it is not one of ours. */
static int cmd_trace_take_event(model *m, const json *e, char *err, size_t errlen)
{
    const char *ph = json_str(json_get(e, "ph"), NULL);
    const char *name = json_str(json_get(e, "name"), "");
    double pid = json_num(json_get(e, "pid"), -1);
    const json *args = json_get(e, "args");
    if (json_kind(e) != JSON_OBJ || !ph || pid < 0 || pid != floor(pid)) {
        snprintf(err, errlen, "not a trace event (needs \"ph\" and an integer \"pid\")");
        return -1;
    }
    int rank = (int)pid, tid = (int)json_num(json_get(e, "tid"), 0);
    if (cmd_trace_rank_slot(m, rank)) {
        snprintf(err, errlen, "rank %d out of range, or out of memory", rank);
        return -1;
    }
    m->events++;
    if (!strcmp(ph, "X")) {
        if (GROW(m->spans, m->nspans, m->capspans)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        double ts = json_num(json_get(e, "ts"), NAN), dur = json_num(json_get(e, "dur"), NAN);
        if (isnan(ts) || isnan(dur) || dur < 0) {
            snprintf(err, errlen, "span '%s' without a valid ts and dur", name);
            return -1;
        }
        m->spans[m->nspans++] = (span){rank, tid, cmd_trace_stage_of(name), ts, ts + dur,
                                       (uint64_t)json_num(json_get(args, "bytes"), 0),
                                       (uint64_t)json_num(json_get(args, "epoch"), 0)};
    } else if (!strcmp(ph, "i") || !strcmp(ph, "C")) {
        if (GROW(m->marks, m->nmarks, m->capmarks)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        mark_kind kind = cmd_trace_mark_kind_of(ph, name);
        double v = kind == MARK_RING       ? json_num(json_get(args, "batches"), 0)
                   : kind == MARK_HIT_RATE ? json_num(json_get(args, "percent"), 0)
                   : kind == MARK_SHARDS   ? json_num(json_get(args, "shards"), 0)
                                           : 0;
        m->marks[m->nmarks++] = (mark){rank, (uint64_t)json_num(json_get(args, "epoch"), 0),
                                       json_num(json_get(e, "ts"), 0), v, kind};
    } else if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
        if (GROW(m->threads, m->nthreads, m->capthreads)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        thread *t = &m->threads[m->nthreads++];
        t->rank = rank, t->tid = tid;
        snprintf(t->name, sizeof t->name, "%s", json_str(json_get(args, "name"), "?"));
    } else if (!strcmp(ph, "M") && !strcmp(name, "shardcache")) {
        rankinfo *ri = &m->ranks[rank];
        ri->finished = 1;
        ri->clock_error_us = json_num(json_get(args, "clock_error_us"), 0);
        ri->dropped = (uint64_t)json_num(json_get(args, "dropped"), 0);
    }
    return 0;
}

static void cmd_trace_model_free(model *m)
{
    free(m->spans);
    free(m->marks);
    free(m->threads);
    free(m->ranks);
    memset(m, 0, sizeof *m);
}

static char *cmd_trace_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "shardcache trace: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g) {
                free(buf);
                buf = NULL;
            }
            buf = g;
        }
    }
    fclose(f);
    if (!buf)
        fprintf(stderr, "shardcache trace: out of memory reading '%s'\n", path);
    *len = n;
    return buf;
}

/* A whole trace document (Chrome's object form) into the model. */
static int cmd_trace_load(const char *path, model *m)
{
    size_t len;
    char *text = cmd_trace_slurp(path, &len), err[256];
    if (!text)
        return 2;
    json_doc *doc = json_parse(text, len, err, sizeof err);
    free(text);
    if (!doc) {
        fprintf(stderr, "shardcache trace: '%s' is not valid JSON: %s\n", path, err);
        return 1;
    }
    const json *evs = json_get(json_root(doc), "traceEvents");
    if (json_kind(evs) != JSON_ARR) {
        fprintf(stderr, "shardcache trace: '%s' has no \"traceEvents\" array\n", path);
        json_free(doc);
        return 1;
    }
    size_t i = 0;
    for (const json *e = json_first(evs); e; e = json_next(e), i++)
        if (cmd_trace_take_event(m, e, err, sizeof err)) {
            fprintf(stderr, "shardcache trace: '%s': event %zu: %s\n", path, i, err);
            json_free(doc);
            return 1;
        }
    json_free(doc);
    return 0;
}

/* cmd_trace_load(), and a trace without a single span is an error for `cmd`. */
static int cmd_trace_load_spans(const char *path, const char *cmd, model *m)
{
    int rc = cmd_trace_load(path, m);
    if (!rc && !m->nspans) {
        fprintf(stderr, "shardcache trace %s: '%s' holds no spans\n", cmd, path);
        rc = 1;
    }
    if (rc)
        cmd_trace_model_free(m);
    return rc;
}

/* ---- merge and check ---------------------------------------------------------- */

static int cmd_trace_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct names {
    char **v;
    int n;
} names;

static int cmd_trace_add_name(names *l, const char *a, const char *b)
{
    char **g = realloc(l->v, sizeof *g * (size_t)(l->n + 1));
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

static int cmd_trace_merge(int argc, char **argv)
{
    const char *out = NULL;
    names files = {NULL, 0};
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

static int cmd_trace_check(const char *path)
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

/* ---- summary ------------------------------------------------------------------ */

static int cmd_trace_cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    if (x->stage != y->stage)
        return x->stage - y->stage;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Spans of one (rank, stage), sorted by start: [lo, hi) of m->spans. */
static void cmd_trace_range(const model *m, int rank, int stage, size_t *lo, size_t *hi)
{
    size_t a = 0, b = m->nspans;
    while (a < b) {
        size_t mid = (a + b) / 2;
        const span *s = &m->spans[mid];
        if (s->rank < rank || (s->rank == rank && s->stage < stage))
            a = mid + 1;
        else
            b = mid;
    }
    *lo = a;
    while (a < m->nspans && m->spans[a].rank == rank && m->spans[a].stage == stage)
        a++;
    *hi = a;
}

/*
 * Time within the consumer's waits [w0, w1) (sorted, disjoint) covered by
 * the union of spans [lo, hi) (sorted by start): how much of the
 * starvation this stage was running for.
 */
static double cmd_trace_overlap(const span *w, size_t nw, const span *s, size_t ns)
{
    double total = 0, cur0 = 0, cur1 = -INFINITY;
    size_t j = 0;
    for (size_t k = 0; k <= ns; k++) {
        /* Merge overlapping spans into [cur0, cur1), then intersect it with the waits. */
        if (k < ns && s[k].t0 <= cur1) {
            if (s[k].t1 > cur1)
                cur1 = s[k].t1;
            continue;
        }
        if (cur1 > cur0) {
            while (j < nw && w[j].t1 <= cur0)
                j++;
            for (size_t i = j; i < nw && w[i].t0 < cur1; i++) {
                double a = w[i].t0 > cur0 ? w[i].t0 : cur0, b = w[i].t1 < cur1 ? w[i].t1 : cur1;
                if (b > a)
                    total += b - a;
            }
        }
        if (k < ns)
            cur0 = s[k].t0, cur1 = s[k].t1;
    }
    return total;
}

static int cmd_trace_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What summary finds for one rank. */
typedef struct rank_sum {
    double t_lo, t_hi, wall;
    double busy[NSTAGES], bytes[NSTAGES];
    double ov[NSTAGES]; /* time each stage ran while the consumer waited */
    double ring, hit, shards; /* sums of the counters, for their means */
    int nring, nhit, nshards;
} rank_sum;

/* ... and for the job. */
typedef struct job_sum {
    rank_sum *r;
    int nranks, seen, epochs;
    double wall, wait, sum_wall, wait_pct, clock_err;
    double ov[NSTAGES];
    uint64_t dropped;
} job_sum;

/* Each rank's extent in time, and its busy time and bytes per stage. */
static void cmd_trace_sum_spans(const model *m, rank_sum *rs)
{
    for (int r = 0; r < m->nranks; r++)
        rs[r].t_lo = INFINITY, rs[r].t_hi = -INFINITY;
    for (size_t i = 0; i < m->nspans; i++) {
        const span *s = &m->spans[i];
        rank_sum *x = &rs[s->rank];
        x->t_lo = s->t0 < x->t_lo ? s->t0 : x->t_lo;
        x->t_hi = s->t1 > x->t_hi ? s->t1 : x->t_hi;
        if (s->stage >= 0) {
            x->busy[s->stage] += s->t1 - s->t0;
            x->bytes[s->stage] += (double)s->bytes;
        }
    }
}

/* Wall time and the waits' overlaps per rank, and the job's totals; m->spans sorted. */
static void cmd_trace_sum_ranks(const model *m, job_sum *js)
{
    for (int r = 0; r < js->nranks; r++) {
        rank_sum *x = &js->r[r];
        x->wall = x->t_hi > x->t_lo ? x->t_hi - x->t_lo : 0;
        size_t wlo, whi;
        cmd_trace_range(m, r, ST_CONSUMER_WAIT, &wlo, &whi);
        for (int st = 0; st < NSTAGES; st++) {
            if (st == ST_CONSUMER_WAIT || st == ST_COMPUTE || st == ST_RING_WAIT)
                continue;
            size_t lo, hi;
            cmd_trace_range(m, r, st, &lo, &hi);
            x->ov[st] = cmd_trace_overlap(m->spans + wlo, whi - wlo, m->spans + lo, hi - lo);
            js->ov[st] += x->ov[st];
        }
        if (m->ranks[r].seen) {
            js->seen++;
            js->wall = x->wall > js->wall ? x->wall : js->wall;
            js->sum_wall += x->wall;
        }
        js->wait += x->busy[ST_CONSUMER_WAIT];
        js->dropped += m->ranks[r].dropped;
        if (m->ranks[r].clock_error_us > js->clock_err)
            js->clock_err = m->ranks[r].clock_error_us;
    }
    js->wait_pct = js->sum_wall > 0 ? 100.0 * js->wait / js->sum_wall : 0.0;
}

/* The counters' sums per rank, and the number of epochs that ended. */
static void cmd_trace_sum_marks(const model *m, job_sum *js)
{
    for (size_t i = 0; i < m->nmarks; i++) {
        const mark *k = &m->marks[i];
        rank_sum *x = &js->r[k->rank];
        if (k->kind == MARK_EPOCH_END && (int)k->epoch + 1 > js->epochs)
            js->epochs = (int)k->epoch + 1;
        if (k->kind == MARK_RING)
            x->ring += k->value, x->nring++;
        if (k->kind == MARK_HIT_RATE)
            x->hit += k->value, x->nhit++;
        if (k->kind == MARK_SHARDS)
            x->shards += k->value, x->nshards++;
    }
}

static void cmd_trace_print_totals(const char *path, const model *m, const job_sum *js)
{
    printf("trace %s: %d ranks, %d epochs, %" PRIu64 " events, %" PRIu64
           " dropped, clock error <= %.1f us\n\n",
           path, js->seen, js->epochs, m->events, js->dropped, js->clock_err);
}

/* The stage that overlaps the waits most, or -1 if none does. */
static int cmd_trace_top_stage(const double ov[NSTAGES])
{
    int top = -1;
    for (int st = 0; st < NSTAGES; st++)
        if (ov[st] > 0 && (top < 0 || ov[st] > ov[top]))
            top = st;
    return top;
}

static void cmd_trace_print_rank(const model *m, int r, const rank_sum *x)
{
    int top = cmd_trace_top_stage(x->ov);
    double w = x->busy[ST_CONSUMER_WAIT];
    char topbuf[96] = "-", ringbuf[16] = "-", hitbuf[16] = "-", shardbuf[16] = "-";
    if (top >= 0)
        snprintf(topbuf, sizeof topbuf, "%s (%.0f%% of waits)", stages[top],
                 w > 0 ? 100.0 * x->ov[top] / w : 0.0);
    if (x->nring)
        snprintf(ringbuf, sizeof ringbuf, "%.1f", x->ring / x->nring);
    if (x->nhit)
        snprintf(hitbuf, sizeof hitbuf, "%.1f%%", x->hit / x->nhit);
    if (x->nshards)
        snprintf(shardbuf, sizeof shardbuf, "%.1f", x->shards / x->nshards);
    printf("%-5d %9.3f %13.1f%% %9.1f%% %10s %9s %12s  %s%s\n", r, x->wall / 1e6,
           x->wall > 0 ? 100.0 * w / x->wall : 0.0,
           x->wall > 0 ? 100.0 * x->busy[ST_PLAN_WAIT] / x->wall : 0.0, ringbuf, hitbuf,
           shardbuf, topbuf, m->ranks[r].finished ? "" : "  (trace not finished)");
}

static void cmd_trace_print_ranks(const model *m, const job_sum *js)
{
    printf("%-5s %9s %14s %10s %10s %9s %12s  %s\n", "rank", "wall s", "consumer wait",
           "plan wait", "ring avg", "hit rate", "shards/batch", "most overlapped by the waits");
    for (int r = 0; r < js->nranks; r++)
        if (m->ranks[r].seen)
            cmd_trace_print_rank(m, r, &js->r[r]);
    printf("%-5s %9.3f %13.1f%%\n\n", "job", js->wall / 1e6, js->wait_pct);
}

static void cmd_trace_print_stages(const job_sum *js)
{
    printf("%-22s %8s %10s   (busy: thread-time as a share of the ranks' wall time)\n",
           "stage", "busy", "MB/s");
    for (int st = 0; st < NSTAGES; st++) {
        double b = 0, by = 0;
        for (int r = 0; r < js->nranks; r++)
            b += js->r[r].busy[st], by += js->r[r].bytes[st];
        if (b <= 0)
            continue;
        char rate[24] = "-";
        if (by > 0)
            snprintf(rate, sizeof rate, "%.1f", by / b); /* bytes per us = MB/s */
        printf("%-22s %7.1f%% %10s\n", stages[st],
               js->sum_wall > 0 ? 100.0 * b / js->sum_wall : 0, rate);
    }
}

/* Epoch e's end marks: how many, the first and last, and whose was last. */
static int cmd_trace_epoch_ends(const model *m, int e, double *lo, double *hi, int *who)
{
    int n = 0;
    *lo = INFINITY, *hi = -INFINITY, *who = -1;
    for (size_t i = 0; i < m->nmarks; i++) {
        const mark *k = &m->marks[i];
        if (k->kind != MARK_EPOCH_END || (int)k->epoch != e)
            continue;
        n++;
        *lo = k->t < *lo ? k->t : *lo;
        if (k->t > *hi)
            *hi = k->t, *who = k->rank;
    }
    return n;
}

/* A straggler is last in most epochs, by more than noise against an epoch's length. */
static void cmd_trace_print_straggler(const job_sum *js, const int *last, double *spreads,
                                      int nspread)
{
    qsort(spreads, (size_t)nspread, sizeof *spreads, cmd_trace_cmp_double);
    double med = spreads[nspread / 2], epoch_len = js->wall / js->epochs;
    int worst = 0;
    for (int r = 1; r < js->nranks; r++)
        worst = last[r] > last[worst] ? r : worst;
    if (med > 0.05 * epoch_len && 2 * last[worst] > nspread)
        printf("stragglers: rank %d (last in %d of %d epochs, median spread %.1f ms)\n",
               worst, last[worst], nspread, med / 1e3);
    else
        printf("stragglers: none (median spread %.1f ms, %.1f%% of an epoch)\n",
               med / 1e3, epoch_len > 0 ? 100.0 * med / epoch_len : 0.0);
}

/* Stragglers: who ends each epoch last, and by how much. */
static void cmd_trace_print_stragglers(const model *m, const job_sum *js)
{
    int *last = calloc((size_t)js->nranks, sizeof *last);
    double *spreads = calloc((size_t)js->epochs, sizeof *spreads);
    int nspread = 0;
    printf("\nepoch end spread:");
    for (int e = 0; e < js->epochs && last && spreads; e++) {
        double lo, hi;
        int who;
        if (cmd_trace_epoch_ends(m, e, &lo, &hi, &who) < 2)
            continue;
        spreads[nspread++] = hi - lo;
        last[who]++;
        printf(" %d: %.1f ms (rank %d last)%s", e, (hi - lo) / 1e3, who,
               e + 1 < js->epochs ? "," : "");
    }
    printf("\n");
    if (nspread && last && spreads)
        cmd_trace_print_straggler(js, last, spreads, nspread);
    free(last);
    free(spreads);
}

static void cmd_trace_print_verdict(const job_sum *js)
{
    int top = cmd_trace_top_stage(js->ov), where = -1;
    for (int r = 0; top >= 0 && r < js->nranks; r++)
        if (where < 0 || js->r[r].ov[top] > js->r[where].ov[top])
            where = r;
    printf("\n");
    if (js->wait_pct < 1.0 || top < 0)
        printf("verdict: no starvation: the consumer waited %.1f%% of the time (the training "
               "step is the bottleneck)\n",
               js->wait_pct);
    else
        printf("bottleneck: %s on rank %d (%s); the consumer waited %.1f%% of the time\n",
               stages[top], where, why[top], js->wait_pct);
    if (js->dropped)
        printf("note: %" PRIu64 " events were dropped (full rings): raise SC_TRACE_EVENTS\n",
               js->dropped);
}

static int cmd_trace_summary(const char *path)
{
    model m = {0};
    int rc = cmd_trace_load_spans(path, "summary", &m);
    if (rc)
        return rc;
    /* cmd_trace_range() bisects for each (rank, stage). */
    qsort(m.spans, m.nspans, sizeof *m.spans, cmd_trace_cmp_span);
    job_sum js = {.nranks = m.nranks};
    if (!(js.r = calloc((size_t)m.nranks, sizeof *js.r))) {
        fprintf(stderr, "shardcache trace summary: out of memory\n");
        cmd_trace_model_free(&m);
        return 2;
    }
    cmd_trace_sum_spans(&m, js.r);
    cmd_trace_sum_ranks(&m, &js);
    cmd_trace_sum_marks(&m, &js);
    cmd_trace_print_totals(path, &m, &js);
    cmd_trace_print_ranks(&m, &js);
    cmd_trace_print_stages(&js);
    if (js.epochs > 0 && js.seen > 1)
        cmd_trace_print_stragglers(&m, &js);
    cmd_trace_print_verdict(&js);
    free(js.r);
    cmd_trace_model_free(&m);
    return 0;
}

/* ---- plot --------------------------------------------------------------------- */

static const char *const colors[] = {
    "#9e9e9e", "#616161", "#e65100", "#1e88e5", "#8e24aa", "#fdd835",
    "#43a047", "#bdbdbd", "#00acc1", "#e53935", "#7cb342", "#6d4c41", "#3949ab"};
_Static_assert(sizeof colors / sizeof colors[0] == NSTAGES, "one color per stage");

static int cmd_trace_cmp_thread(const void *a, const void *b)
{
    const thread *x = a, *y = b;
    return x->rank != y->rank ? x->rank - y->rank : x->tid - y->tid;
}

/* The picture's geometry, in SVG units. */
static const double plot_left = 170, plot_width = 1000, plot_lane = 16, plot_gap = 10,
                    plot_top = 40;

/* Time to x: where the trace starts, how long it is, and units per microsecond. */
typedef struct plot_scale {
    double t0, span_us, scale;
} plot_scale;

/* Every (rank, thread) that has spans gets a lane, named if it was. */
static int cmd_trace_add_lanes(model *m)
{
    for (size_t i = 0; i < m->nspans; i++) {
        const span *s = &m->spans[i];
        int have = 0;
        for (size_t k = 0; k < m->nthreads && !have; k++)
            have = m->threads[k].rank == s->rank && m->threads[k].tid == s->tid;
        if (have)
            continue;
        if (GROW(m->threads, m->nthreads, m->capthreads))
            return -1;
        thread *t = &m->threads[m->nthreads++];
        t->rank = s->rank, t->tid = s->tid;
        snprintf(t->name, sizeof t->name, "thread %d", t->tid);
    }
    qsort(m->threads, m->nthreads, sizeof *m->threads, cmd_trace_cmp_thread);
    return 0;
}

static plot_scale cmd_trace_plot_scale(const model *m)
{
    double t0 = INFINITY, t1 = -INFINITY;
    for (size_t i = 0; i < m->nspans; i++) {
        t0 = m->spans[i].t0 < t0 ? m->spans[i].t0 : t0;
        t1 = m->spans[i].t1 > t1 ? m->spans[i].t1 : t1;
    }
    double span_us = t1 > t0 ? t1 - t0 : 1;
    return (plot_scale){t0, span_us, plot_width / span_us};
}

/* The lanes, a gap between ranks, and room for the legend. */
static double cmd_trace_plot_height(const model *m)
{
    int ranks = 0, prev = -1;
    for (size_t k = 0; k < m->nthreads; k++)
        if (m->threads[k].rank != prev)
            ranks++, prev = m->threads[k].rank;
    return plot_top + (double)m->nthreads * plot_lane + ranks * plot_gap + 60;
}

static void cmd_trace_plot_title(FILE *f, const char *path, const plot_scale *sc, double height)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
            "<text x=\"10\" y=\"18\" font-size=\"14\">%s: %.3f s; red bands: the consumer "
            "waits for data</text>\n",
            plot_left + plot_width + 20, height, path, sc->span_us / 1e6);
}

/* Lanes: y of each thread into lane_y, with its label; returns the y below the last. */
static double cmd_trace_plot_lanes(FILE *f, const model *m, double *lane_y)
{
    double y = plot_top;
    int prev = -1;
    for (size_t k = 0; lane_y && k < m->nthreads; k++) {
        if (m->threads[k].rank != prev) {
            if (prev >= 0)
                y += plot_gap;
            prev = m->threads[k].rank;
        }
        lane_y[k] = y;
        fprintf(f, "<text x=\"4\" y=\"%.1f\">rank %d %s</text>\n", y + plot_lane - 4,
                m->threads[k].rank, m->threads[k].name);
        y += plot_lane;
    }
    return y;
}

/* Consumer waits first, as full-height bands over their rank. */
static void cmd_trace_plot_waits(FILE *f, const model *m, const plot_scale *sc,
                                 const double *lane_y)
{
    for (size_t i = 0; i < m->nspans; i++) {
        const span *s = &m->spans[i];
        if (s->stage != ST_CONSUMER_WAIT)
            continue;
        double ylo = INFINITY, yhi = -INFINITY;
        for (size_t k = 0; k < m->nthreads; k++)
            if (m->threads[k].rank == s->rank) {
                ylo = lane_y[k] < ylo ? lane_y[k] : ylo;
                yhi = lane_y[k] + plot_lane > yhi ? lane_y[k] + plot_lane : yhi;
            }
        double w = (s->t1 - s->t0) * sc->scale;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                   "fill=\"#ffcdd2\"/>\n",
                plot_left + (s->t0 - sc->t0) * sc->scale, ylo, w < 0.5 ? 0.5 : w, yhi - ylo);
    }
}

static void cmd_trace_plot_spans(FILE *f, const model *m, const plot_scale *sc,
                                 const double *lane_y)
{
    for (size_t i = 0; i < m->nspans; i++) {
        const span *s = &m->spans[i];
        size_t k = 0;
        while (k < m->nthreads && !(m->threads[k].rank == s->rank && m->threads[k].tid == s->tid))
            k++;
        if (k == m->nthreads)
            continue;
        double w = (s->t1 - s->t0) * sc->scale;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                   "<title>%s, epoch %" PRIu64 ", %.1f us</title></rect>\n",
                plot_left + (s->t0 - sc->t0) * sc->scale, lane_y[k] + 2, w < 0.5 ? 0.5 : w,
                plot_lane - 4, s->stage >= 0 ? colors[s->stage] : "#000000",
                s->stage >= 0 ? stages[s->stage] : "other", s->epoch, s->t1 - s->t0);
    }
}

/* The legend, below the lanes at y, wrapped to the picture's width. */
static void cmd_trace_plot_legend(FILE *f, double y)
{
    double ly = y + 24, lx = 4;
    for (int st = 0; st < NSTAGES; st++) {
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                lx, ly, colors[st], lx + 13, ly + 9, stages[st]);
        lx += 13 + 7.0 * (double)strlen(stages[st]) + 14;
        if (lx > plot_left + plot_width - 120)
            lx = 4, ly += 16;
    }
}

static void cmd_trace_plot_axis(FILE *f, const plot_scale *sc)
{
    for (int k = 0; k <= 10; k++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">%.3f s</text>\n",
                plot_left + plot_width * k / 10.0 - 12, plot_top - 6,
                sc->span_us * k / 10.0 / 1e6);
}

static int cmd_trace_plot(const char *path, const char *out)
{
    model m = {0};
    int rc = cmd_trace_load_spans(path, "plot", &m);
    if (rc)
        return rc;
    if (cmd_trace_add_lanes(&m)) {
        cmd_trace_model_free(&m);
        return 2;
    }
    plot_scale sc = cmd_trace_plot_scale(&m);
    FILE *f = cli_output("trace plot", out, "w");
    if (!f) {
        cmd_trace_model_free(&m);
        return 2;
    }
    cmd_trace_plot_title(f, path, &sc, cmd_trace_plot_height(&m));
    double *lane_y = malloc(sizeof *lane_y * (m.nthreads + 1));
    double y = cmd_trace_plot_lanes(f, &m, lane_y);
    if (lane_y) {
        cmd_trace_plot_waits(f, &m, &sc, lane_y);
        cmd_trace_plot_spans(f, &m, &sc, lane_y);
    }
    cmd_trace_plot_legend(f, y);
    cmd_trace_plot_axis(f, &sc);
    fprintf(f, "</svg>\n");
    int drawn = lane_y != NULL;
    free(lane_y);
    if (fclose(f) != 0 || !drawn) {
        fprintf(stderr, "shardcache trace plot: writing '%s' failed\n", out);
        rc = 2;
    } else {
        printf("wrote %s: %zu lanes, %zu spans\n", out, m.nthreads, m.nspans);
    }
    cmd_trace_model_free(&m);
    return rc;
}

static const char trace_usage[] =
    "usage: shardcache trace merge DIR|FILE... -o job.json\n"
    "       shardcache trace check FILE\n"
    "       shardcache trace summary job.json\n"
    "       shardcache trace plot job.json -o job.svg\n"
    "\n"
    "A job run with SC_TRACE=PREFIX writes PREFIX.rankR.json on every rank\n"
    "(Chrome Trace Event JSON: open it in Perfetto or chrome://tracing).\n"
    "merge    joins the ranks' files (all *.rankN.json in DIR) into one timeline\n"
    "check    parses a trace and counts its events\n"
    "summary  per rank and for the job: consumer wait as a share of wall time,\n"
    "         the stage the waits overlap most, per-stage busy time and MB/s,\n"
    "         ring occupancy, cache hit rate, shards per batch, stragglers, and a verdict\n"
    "plot     draws each rank's threads over time as SVG, the consumer's\n"
    "         waits as red bands\n";

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(trace_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "merge"))
        return cmd_trace_merge(argc - 2, argv + 2);
    if (!strcmp(sub, "check") && argc == 3)
        return cmd_trace_check(argv[2]);
    if (!strcmp(sub, "summary") && argc == 3)
        return cmd_trace_summary(argv[2]);
    if (!strcmp(sub, "plot") && argc == 5 && !strcmp(argv[3], "-o"))
        return cmd_trace_plot(argv[2], argv[4]);
    fputs(trace_usage, stderr);
    return 2;
}
