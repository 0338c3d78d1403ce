/*
 * cmd_trace_svg.c - `shardcache trace plot`: each rank's threads over
 * time as SVG, the consumer's waits as red bands.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd_trace_model.h"

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
                s->stage >= 0 ? cmd_trace_stages[s->stage] : "other", s->epoch, s->t1 - s->t0);
    }
}

/* The legend, below the lanes at y, wrapped to the picture's width. */
static void cmd_trace_plot_legend(FILE *f, double y)
{
    double ly = y + 24, lx = 4;
    for (int st = 0; st < NSTAGES; st++) {
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                lx, ly, colors[st], lx + 13, ly + 9, cmd_trace_stages[st]);
        lx += 13 + 7.0 * (double)strlen(cmd_trace_stages[st]) + 14;
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

int cmd_trace_plot(const char *path, const char *out)
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
