/* eval.c - see eval.h.  Only the public headers: what a user writes. */
#include "eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardcache.h>
#include <shardcache/dataset.h>

/* The index of field `name` ("/images" or "images") in ds, or -1. */
static int eval_field(const sc_dataset *ds, int nfields, const char *name, sc_field_info *fi)
{
    const char *want = name[0] == '/' ? name + 1 : name;
    for (int i = 0; i < nfields; i++)
        if (sc_dataset_field(ds, i, fi) == SC_OK &&
            !strcmp(fi->name[0] == '/' ? fi->name + 1 : fi->name, want))
            return i;
    return -1;
}

/* A label outside 0..k-1 would be skipped by the model, and flatter the mean. */
static int eval_check_labels(const ex_eval *ev, uint64_t k, sc_error *e)
{
    for (uint64_t i = 0; i < ev->n; i++)
        if (ev->y[i] < 0 || (uint64_t)ev->y[i] >= k) {
            snprintf(e->msg, sizeof e->msg, "sample %llu has label %lld, outside 0..%llu "
                     "(--classes)", (unsigned long long)i, (long long)ev->y[i],
                     (unsigned long long)(k - 1));
            return -1;
        }
    return 0;
}

static int eval_read(sc_dataset *ds, const char *images, const char *labels, uint64_t d,
                     ex_eval *ev, sc_error *e)
{
    sc_dataset_info di;
    sc_field_info fx, fy;
    const uint64_t *first = NULL;
    sc_dataset_get_info(ds, &di);
    sc_dataset_shard_offsets(ds, &first);
    int ix = eval_field(ds, di.nfields, images, &fx), iy = eval_field(ds, di.nfields, labels, &fy);
    if (ix < 0 || iy < 0 || strcmp(fx.dtype, "uint8") || fx.sample_bytes != d ||
        strcmp(fy.dtype, "int64") || fy.sample_bytes != 8) {
        snprintf(e->msg, sizeof e->msg, "needs a uint8 field '%s' of %llu bytes a sample and "
                 "an int64 field '%s', as the training set has", images, (unsigned long long)d,
                 labels);
        return -1;
    }
    ev->n = di.nsamples, ev->d = d;
    ev->x = malloc(d * ev->n + 1);
    ev->y = malloc(sizeof *ev->y * (ev->n + 1));
    if (!ev->x || !ev->y) {
        snprintf(e->msg, sizeof e->msg, "no memory for %llu samples",
                 (unsigned long long)ev->n);
        return -1;
    }
    for (uint64_t k = 0; k < di.nshards; k++) {
        void *bufs[2];
        bufs[ix] = ev->x + first[k] * d;
        bufs[iy] = ev->y + first[k];
        if (sc_dataset_read_shard(ds, k, bufs, e) != SC_OK)
            return -1;
    }
    return 0;
}

int ex_eval_open(const char *path, const char *images, const char *labels, uint64_t d,
                 uint64_t k, ex_eval *ev, char *err, size_t errlen)
{
    sc_config cfg;
    sc_error e = SC_ERROR_INIT;
    sc_dataset *ds = NULL;
    char fields[512];
    memset(ev, 0, sizeof *ev);
    snprintf(fields, sizeof fields, "%s,%s", images, labels);
    int rc = sc_config_init(&cfg, &e) != SC_OK || sc_config_set(&cfg, "SC_SOURCE", path, &e) ||
             sc_config_set(&cfg, "SC_FIELDS", fields, &e) ||
             sc_dataset_open(MPI_COMM_SELF, &cfg, &ds, &e) != SC_OK;
    if (!rc)
        rc = eval_read(ds, images, labels, d, ev, &e) != 0 || eval_check_labels(ev, k, &e) != 0;
    if (ds)
        sc_dataset_close(ds);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, e.msg);
        ex_eval_free(ev);
        return -1;
    }
    return 0;
}

void ex_eval_run(const ex_eval *ev, ex_model *m, double *loss, double *accuracy)
{
    uint64_t correct = 0;
    double sum = ex_model_eval(m, ev->x, ev->y, ev->n, &correct);
    *loss = ev->n ? sum / (double)ev->n : 0.0;
    *accuracy = ev->n ? (double)correct / (double)ev->n : 0.0;
}

void ex_eval_free(ex_eval *ev)
{
    free(ev->x);
    free(ev->y);
    memset(ev, 0, sizeof *ev);
}
