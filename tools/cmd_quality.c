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

static const struct {
    const char *name;
    unsigned bytes, sign;
} cmd_quality_types[] = {{"uint8", 1, 0}, {"uint16", 2, 0}, {"uint32", 4, 0}, {"uint64", 8, 0},
                         {"int8", 1, 1},  {"int16", 2, 1},  {"int32", 4, 1},  {"int64", 8, 1}};

/*
 * Integer labels, one a sample, as class numbers; 0, or 1 with the reason
 * in err (a signed value sign-extended, so that -15 reads as -15).
 */
static int cmd_quality_convert(const sc_field_info *fi, const unsigned char *in, uint64_t n,
                               uint32_t *out, uint32_t *nclasses, char *err, size_t errlen)
{
    for (size_t t = 0; t < sizeof cmd_quality_types / sizeof cmd_quality_types[0]; t++) {
        unsigned b = cmd_quality_types[t].bytes;
        if (strcmp(fi->dtype, cmd_quality_types[t].name))
            continue;
        if (fi->sample_bytes != b)
            break;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t u = 0;
            memcpy(&u, in + i * b, b);
            char text[32];
            if (cmd_quality_types[t].sign && b < 8 && (u >> (8 * b - 1)) & 1)
                u |= ~UINT64_C(0) << (8 * b);
            if (u >= (1u << 24)) {
                if (cmd_quality_types[t].sign)
                    snprintf(text, sizeof text, "%" PRId64, (int64_t)u);
                else
                    snprintf(text, sizeof text, "%" PRIu64, u);
                snprintf(err, errlen, "%s: label %s of sample %" PRIu64 " is not a class "
                         "number (0 .. 2^24-1)", fi->name, text, i);
                return 1;
            }
            out[i] = (uint32_t)u;
            *nclasses = out[i] + 1 > *nclasses ? out[i] + 1 : *nclasses;
        }
        return 0;
    }
    snprintf(err, errlen, "%s holds %s, %" PRIu64 " bytes a sample: not one integer label a "
             "sample", fi->name, fi->dtype, fi->sample_bytes);
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
    if (fi.vlen) {
        snprintf(err->msg, sizeof err->msg, "labels field '%s' is variable-length: a label is "
                 "one integer a sample", fi.name);
        sc_dataset_close(ds);
        return err->code = SC_EINVAL;
    }
    unsigned char *buf = malloc(di.nsamples * fi.sample_bytes + 1);
    l->labels = malloc(sizeof *l->labels * (di.nsamples + 1));
    if (!buf || !l->labels)
        rc = SC_ENOMEM, snprintf(err->msg, sizeof err->msg, "no memory for the labels");
    for (uint64_t k = 0; rc == SC_OK && k < di.nshards; k++) {
        void *to = buf + first[k] * fi.sample_bytes;
        rc = sc_dataset_read_shard(ds, k, (void *const *)&to, err);
    }
    if (rc == SC_OK && cmd_quality_convert(&fi, buf, di.nsamples, l->labels, &l->nclasses,
                                           err->msg, sizeof err->msg))
        rc = SC_EINVAL;
    free(buf);
    sc_dataset_close(ds);
    return rc;
}

int cmd_quality_labels(const plan_opts *o, int rank, uint64_t **sizes, uint64_t *n,
                       cmd_labels *l)
{
    char path[SC_PATH_MAX];
    const char *colon = strrchr(o->labels, ':');
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    char shard[32];
    if (!colon || colon == o->labels || !colon[1] ||
        (size_t)(colon - o->labels) >= sizeof path) {
        if (rank == 0)
            fprintf(stderr, "shardcache plan: --labels '%s': give FILE:FIELD, e.g. "
                            "data.h5:/labels\n", o->labels);
        return 2;
    }
    snprintf(path, sizeof path, "%.*s", (int)(colon - o->labels), o->labels);
    uint64_t k = cli_shard_size(o);
    if (k == SC_SHARD_AUTO)
        snprintf(shard, sizeof shard, "auto");
    else
        snprintf(shard, sizeof shard, "%" PRIu64, k);
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
    if (rc != SC_OK) { /* every rank read the same file: every rank stops here */
        if (rank == 0)
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
    printf("  quality (window %" PRIu64 "): %.1f shards/batch (uniform %.1f), moved %.3f "
           "(uniform %.3f)", o->window, q.plan.shards, q.uniform.shards, q.plan.moved,
           q.uniform.moved);
    if (l->labels)
        printf(", labels %.3f bits/batch (uniform %.3f), %.1f classes/batch (uniform %.1f)",
               q.plan.bits, q.uniform.bits, q.plan.classes, q.uniform.classes);
    printf("\n");
    return SC_OK;
}
