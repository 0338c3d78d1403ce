/*
 * cmd_trace_model.c - a trace document read into memory for `shardcache
 * trace`: its spans, marks (instants and counters), named threads and
 * what each rank said when it finished.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd_trace_model.h"

const char *const cmd_trace_stages[] = {
#define ST_NAME(id, name) name,
    SC_TRACE_STAGE_LIST(ST_NAME)
#undef ST_NAME
};
_Static_assert(sizeof cmd_trace_stages / sizeof cmd_trace_stages[0] == NSTAGES,
               "one name per stage");

static int cmd_trace_stage_of(const char *name)
{
    for (int i = 0; i < NSTAGES; i++)
        if (!strcmp(name, cmd_trace_stages[i]))
            return i;
    return -1;
}

static int cmd_trace_rank_slot(model *m, int rank)
{
    if (rank < 0 || rank > 1 << 20)
        return -1;
    if (rank >= m->nranks) {
        rankinfo *r = sc__vec_grow(m->ranks, &m->ranks_room, (size_t)rank + 1, sizeof *r);
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
int cmd_trace_take_event(model *m, const json *e, char *err, size_t errlen)
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

void cmd_trace_model_free(model *m)
{
    free(m->spans);
    free(m->marks);
    free(m->threads);
    free(m->ranks);
    memset(m, 0, sizeof *m);
}

char *cmd_trace_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "shardcache trace: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = cli_slurp(f, len);
    fclose(f);
    if (!buf)
        fprintf(stderr, "shardcache trace: cannot read '%s': %s\n", path, strerror(errno));
    return buf;
}

/* A whole trace document (Chrome's object form) into the model. */
int cmd_trace_load(const char *path, model *m)
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
int cmd_trace_load_spans(const char *path, const char *cmd, model *m)
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
