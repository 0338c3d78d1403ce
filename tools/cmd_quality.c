/*
 * cmd_quality.c - `shardcache plan --quality`: how well each epoch's order
 * mixes the dataset (sc_plan_quality), beside a uniform random permutation
 * of it, with the labels of --labels FILE:FIELD when given.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Integer labels of any width as class numbers; 0, or 1 naming what is wrong. */
static int cmd_quality_convert(const char *dtype, const unsigned char *in, uint64_t n,
                               uint32_t *out, uint32_t *nclasses, const char *what)
{
    static const struct { const char *name; int bytes, sign; } types[] = {
        {"uint8", 1, 0}, {"uint16", 2, 0}, {"uint32", 4, 0}, {"uint64", 8, 0},
        {"int8", 1, 1},  {"int16", 2, 1},  {"int32", 4, 1},  {"int64", 8, 1}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        if (strcmp(dtype, types[t].name))
            continue;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t u = 0;
            memcpy(&u, in + i * (uint64_t)types[t].bytes, (size_t)types[t].bytes);
            int neg = types[t].sign && (u >> (8 * types[t].bytes - 1)) & 1;
            if (neg || u >= (1u << 24)) {
                fprintf(stderr, "shardcache plan: %s: label %" PRIu64 " of sample %" PRIu64
                        " is not a class number (0 .. 2^24-1)\n", what, u, i);
                return 1;
            }
            out[i] = (uint32_t)u;
            *nclasses = out[i] + 1 > *nclasses ? out[i] + 1 : *nclasses;
        }
        return 0;
    }
    fprintf(stderr, "shardcache plan: %s holds %s, not integer labels\n", what, dtype);
    return 1;
}

/* Opens FILE with only FIELD (one integer a sample) and reads every label. */
static int cmd_quality_read(sc_config *cfg, const char *field, cmd_labels *l, sc_error *err)
{
    sc_dataset *ds = NULL;
    sc_dataset_info di;
    sc_field_info fi;
    int rc = sc_config_set(cfg, "SC_FIELDS", field, err);
    if (rc == SC_OK)
        rc = sc_dataset_open(MPI_COMM_SELF, cfg, &ds, err);
    if (rc != SC_OK)
        return rc;
    sc_dataset_get_info(ds, &di);
    sc_dataset_field(ds, 0, &fi);
    const uint64_t *first = NULL;
    sc_dataset_shard_offsets(ds, &first);
    unsigned char *buf = malloc(di.nsamples * fi.sample_bytes + 1);
    l->labels = malloc(sizeof *l->labels * (di.nsamples + 1));
    if (!buf || !l->labels)
        rc = SC_ENOMEM, snprintf(err->msg, sizeof err->msg, "no memory for the labels");
    else if (fi.sample_bytes != 1 && fi.sample_bytes != 2 && fi.sample_bytes != 4 &&
             fi.sample_bytes != 8)
        rc = SC_EINVAL, snprintf(err->msg, sizeof err->msg, "%s: %" PRIu64 " bytes a sample, "
                                 "not one integer label", fi.name, fi.sample_bytes);
    for (uint64_t k = 0; rc == SC_OK && k < di.nshards; k++) {
        void *to = buf + first[k] * fi.sample_bytes;
        rc = sc_dataset_read_shard(ds, k, (void *const *)&to, err);
    }
    if (rc == SC_OK && cmd_quality_convert(fi.dtype, buf, di.nsamples, l->labels,
                                           &l->nclasses, fi.name))
        rc = SC_EINVAL, snprintf(err->msg, sizeof err->msg, "see above");
    free(buf);
    sc_dataset_close(ds);
    return rc;
}

int cmd_quality_labels(const plan_opts *o, uint64_t **sizes, uint64_t *n, cmd_labels *l)
{
    char path[SC_PATH_MAX];
    const char *colon = strrchr(o->labels, ':');
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    char shard[32];
    if (!colon || colon == o->labels || !colon[1] ||
        (size_t)(colon - o->labels) >= sizeof path) {
        fprintf(stderr, "shardcache plan: --labels '%s': give FILE:FIELD, e.g. "
                        "data.h5:/labels\n", o->labels);
        return 2;
    }
    snprintf(path, sizeof path, "%.*s", (int)(colon - o->labels), o->labels);
    snprintf(shard, sizeof shard, "%" PRIu64, o->shard_size);
    if (cli_config(&cfg))
        return 2;
    sc_dataset *ds = NULL;
    const uint64_t *sz = NULL;
    sc_dataset_info di;
    int rc = sc_config_set(&cfg, "SC_SOURCE", path, &err);
    if (rc == SC_OK)
        rc = sc_config_set(&cfg, "SC_SHARD_SIZE", shard, &err);
    if (rc == SC_OK) /* every field the job would load: the sample's bytes */
        rc = sc_dataset_open(MPI_COMM_SELF, &cfg, &ds, &err);
    if (rc == SC_OK) {
        sc_dataset_get_info(ds, &di);
        sc_dataset_shard_sizes(ds, &sz);
        l->sample_bytes = di.sample_bytes;
        *n = di.nshards;
        if ((*sizes = malloc(sizeof **sizes * di.nshards)))
            memcpy(*sizes, sz, sizeof **sizes * di.nshards);
        else
            rc = SC_ENOMEM, snprintf(err.msg, sizeof err.msg, "no memory for the shard sizes");
        sc_dataset_close(ds);
    }
    if (rc == SC_OK)
        rc = cmd_quality_read(&cfg, colon + 1, l, &err);
    if (rc != SC_OK) {
        fprintf(stderr, "shardcache plan: --labels %s: %s\n", o->labels, err.msg);
        return 2;
    }
    return 0;
}

int cmd_quality_print(const plan_opts *o, const sc_plan *plan, const uint64_t *sizes,
                      uint64_t n, const cmd_labels *l, sc_error *err)
{
    sc_quality_params qp = {.shard_sizes = sizes, .nshards = n, .batch_size = o->batch,
                            .window = o->window, .seed = o->seed, .labels = l->labels,
                            .nclasses = l->nclasses};
    sc_quality q;
    int rc = sc_plan_quality(plan, &qp, &q, err);
    if (rc != SC_OK)
        return rc;
    printf("  quality: %.1f shards/batch (uniform %.1f), moved %.3f (uniform %.3f)",
           q.plan.shards, q.uniform.shards, q.plan.moved, q.uniform.moved);
    if (l->labels)
        printf(", labels %.3f bits/batch (uniform %.3f), %.1f classes/batch (uniform %.1f)",
               q.plan.bits, q.uniform.bits, q.plan.classes, q.uniform.classes);
    printf("\n");
    return SC_OK;
}
