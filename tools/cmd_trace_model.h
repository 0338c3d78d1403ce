/*
 * cmd_trace_model.h - the model a trace document is read into
 * (cmd_trace_model.c), which every part of `shardcache trace` shares, and
 * the subcommands that read it: merge and check (cmd_trace_merge.c),
 * summary (cmd_trace_summary.c) and plot (cmd_trace_svg.c), which
 * cmd_trace.c dispatches to.
 */
#ifndef SC_CMD_TRACE_MODEL_H
#define SC_CMD_TRACE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "vec.h"

/* The stages the runtime records, by their names in the file. */
extern const char *const cmd_trace_stages[];
enum {
#define ST_ENUM(id, name) ST_##id,
    SC_TRACE_STAGE_LIST(ST_ENUM)
#undef ST_ENUM
    NSTAGES
};

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
    size_t ranks_room;
    uint64_t events;
} model;

/*
 * Room for one more element in arr[n] (cap: its room): 0, or -1 out of
 * memory with arr and cap unchanged (base/vec.h's growth, overflow-checked).
 */
#define GROW(arr, n, cap) sc__trace_grow(&(arr), &(cap), (n) + 1, sizeof *(arr))
/* `slot` is a T **: the pointer is read and written as bytes (no aliasing through void **). */
static inline int sc__trace_grow(void *slot, size_t *cap, size_t need, size_t size)
{
    void *old, *p;
    memcpy(&old, slot, sizeof old);
    if (!(p = sc__vec_grow(old, cap, need, size)))
        return -1;
    memcpy(slot, &p, sizeof p);
    return 0;
}

/* Takes one event object into the model; -1 with a message if it is not one of ours. */
int cmd_trace_take_event(model *m, const json *e, char *err, size_t errlen);
void cmd_trace_model_free(model *m);
/* A whole file into memory (NULL with a message on stderr). */
char *cmd_trace_slurp(const char *path, size_t *len);
/* A whole trace document (Chrome's object form) into the model. */
int cmd_trace_load(const char *path, model *m);
/* cmd_trace_load(), and a trace without a single span is an error for `cmd`. */
int cmd_trace_load_spans(const char *path, const char *cmd, model *m);

/* The subcommands: 0, 1 (a bad trace) or 2 (bad use, I/O). */
int cmd_trace_merge(int argc, char **argv);
int cmd_trace_check(const char *path);
int cmd_trace_summary(const char *path);
int cmd_trace_plot(const char *path, const char *out);

#endif /* SC_CMD_TRACE_MODEL_H */
