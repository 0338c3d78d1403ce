/*
 * cmd_trace_summary.c - `shardcache trace summary`: per rank and for the
 * job, where the consumer's time went, the stages' busy time, the
 * counters, stragglers, and a verdict.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd_trace_model.h"

/* Why a stage starves the consumer, for the verdict line. */
static const char *const why[] = {
    "waiting for rank 0's plan", "rank 0 computing the plan",
    "cache misses: shards read from the source", "node-local cache reads",
    "writing new cache entries", "checksums of entries read for the first time",
    "batch assembly: more SC_PRODUCERS may help", "producers waiting for free batch buffers",
    "host-to-device copies", "", "", "end-of-epoch verification",
    "shards from other nodes (peer transfers)"};
_Static_assert(sizeof why / sizeof why[0] == NSTAGES, "one reason per stage");

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
        snprintf(topbuf, sizeof topbuf, "%s (%.0f%% of waits)", cmd_trace_stages[top],
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
        printf("%-22s %7.1f%% %10s\n", cmd_trace_stages[st],
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
               cmd_trace_stages[top], where, why[top], js->wait_pct);
    if (js->dropped)
        printf("note: %" PRIu64 " events were dropped (full rings): raise SC_TRACE_EVENTS\n",
               js->dropped);
}

int cmd_trace_summary(const char *path)
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
