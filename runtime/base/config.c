/*
 * config.c - sc_config: one table of settings makes the defaults, the
 * SC_* environment parsing, sc_config_set() and the printout, so that a
 * setting exists in exactly one place.  Defaults are written as the text a
 * user would put in the environment and go through the same parser.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "shardcache/config.h"

typedef enum { T_STR, T_U64, T_BYTES, T_DBL, T_ENUM, T_LEVEL, T_INT, T_COUNT, T_REF } kind;

typedef struct setting {
    const char *env;
    kind type;
    size_t offset, size;
    const char *dflt;
    const char *choices[4]; /* T_ENUM: names, indexed by the enum's values */
    const char *help;
} setting;

/* The simulated device exists only where the test hooks do. */
#ifdef SC_TESTING
#define SC_DEVICE_CHOICES {"auto", "host", "cuda", "sim"}
#define SC_DEVICE_SIM_HELP ", sim (testing builds: a simulated GPU, no CUDA needed)"
#else
#define SC_DEVICE_CHOICES {"auto", "host", "cuda"}
#define SC_DEVICE_SIM_HELP ""
#endif

#define F(member) offsetof(sc_config, member), sizeof(((sc_config *)0)->member)

static const setting settings[] = {
    {"SC_SOURCE", T_STR, F(source), "", {0},
     "source dataset: HDF5 file (layout A), directory or list of files (B)"},
    {"SC_SHARD_SIZE", T_U64, F(shard_size), "auto", {"auto"},
     "samples per shard: layout A's cut; layout B groups runs of smaller files up to it "
     "and cuts larger ones into pieces of it; "
     "auto: from the dataset alone, 1024 samples within 1 MiB..64 MiB a shard, at most "
     "1/256 of the samples (one a shard below 512)"},
    {"SC_FIELDS", T_STR, F(fields), "", {0},
     "comma-separated fields to load, by path (/group/name); empty: every "
     "dataset in '/' of a type shardcache carries"},
    {"SC_SEED", T_U64, F(seed), "0", {0}, "plan and shuffle seed"},
    {"SC_BATCH_SIZE", T_U64, F(batch_size), "32", {0}, "samples per batch"},
    {"SC_SHUFFLE", T_ENUM, F(mode), "sticky", {"global", "sticky"},
     "global: fresh assignment each epoch; sticky: keep owners"},
    {"SC_EXCHANGE", T_DBL, F(exchange), "0.1", {0},
     "sticky: fraction of shards that change owner per epoch"},
    {"SC_REMAINDER", T_ENUM, F(remainder), "drop", {"drop", "pad"},
     "samples that do not fill equal batches: drop, or pad by repeating"},
    {"SC_PARTITIONS", T_U64, F(partitions), "0", {0},
     "0: plans over the ranks; P: over P partitions, so that the global batches (every "
     "rank's k-th, in rank order) are the same on any world size that divides P, at the "
     "same global batch R x SC_BATCH_SIZE"},
    {"SC_CACHE_DIR", T_STR, F(cache_dir), "", {0},
     "node-local cache directory; empty: $SLURM_TMPDIR, else $TMPDIR, else /tmp, "
     "then shardcache-<uid>"},
    {"SC_CACHE_BYTES", T_BYTES, F(cache_bytes), "auto", {"auto", "unbounded"},
     "cache capacity per rank (K, M, G suffixes); auto: what it holds plus its share of "
     "the free space above 10% of the cache filesystem, old caches evicted for room; "
     "0 or unbounded: no bound"},
    {"SC_CACHE_POLICY", T_ENUM, F(cache_policy), "belady", {"belady", "lru"},
     "eviction: the shard needed furthest ahead, or least recently used"},
    {"SC_CACHE_SHARE", T_ENUM, F(cache_share), "private", {"private", "group"},
     "private: a cache directory another user owns or can write is refused; "
     "group: one the group shares (group-writable) is accepted"},
    {"SC_CACHE_CHECK", T_ENUM, F(cache_check), "first", {"first", "always"},
     "verify cache checksums on an entry's first read, or on every read"},
    {"SC_CACHE_WRITES", T_ENUM, F(cache_writes), "behind", {"behind", "all"},
     "behind: entries are written by a thread of their own while the reads go on, and one "
     "the writer is too far behind for is not kept this epoch; all: every entry the cache "
     "admits is written, the reads waiting for the writer if need be"},
    {"SC_LOG", T_LEVEL, F(log_level), "1", {0},
     "0: errors only, 1: warnings (repairs, fallbacks), 2: info"},
    {"SC_PRODUCERS", T_INT, F(producers), "0", {0},
     "producer threads per rank; 0: the rank's share of the cores it is bound to, 2 to 8"},
    {"SC_PREFETCH_BATCHES", T_U64, F(prefetch_batches), "auto", {"auto"},
     "batches built ahead of the training loop (the ring depth); auto: 8, fewer where 8 "
     "batches would take more than 1 GiB, 3 at least"},
    {"SC_EPOCHS", T_COUNT, F(epochs), "0", {0},
     "the job's epochs; 0: not said.  Epoch E's window is read while epoch E-1 ends, but not "
     "for E = SC_EPOCHS: a job that stops there reads nothing it will not deliver (an epoch "
     "begun past it starts cold); the same on every rank"},
    {"SC_SHUFFLE_WINDOW", T_U64, F(shuffle_window), "auto", {"auto"},
     "samples shuffled together within a rank's epoch, across shards; 0: none; "
     "auto: as many as half of SC_STREAM_BYTES holds in whole shards (at least a batch); "
     "a larger number is lowered to that"},
    {"SC_SAMPLE_AXIS", T_ENUM, F(sample_axis), "first", {"first", "none"},
     "first: a dataset's first dimension counts samples; none: layout B files hold one "
     "sample each, their datasets without a sample axis"},
    {"SC_DECODE", T_STR, F(decode), "", {0},
     "variable-length uint8 fields of JPEG or PNG bytes delivered as C x N x N images: jpeg decodes "
     "every epoch (random resized crop and flip), jpeg-once into the cache (centre square, "
     "flipped at random each delivery); FIELD=jpeg,... per field; empty: delivered as bytes"},
    {"SC_DECODE_SIZE", T_U64, F(decode_size), "224", {0},
     "SC_DECODE's output side N, in pixels"},
    {"SC_DECODE_CHANNELS", T_INT, F(decode_channels), "3", {0},
     "SC_DECODE's planes: 3 (PIL's convert(\"RGB\"), grayscale as three equal planes) or 1 "
     "(convert(\"L\")): C x N x N images"},
    {"SC_DECODE_EXIF", T_ENUM, F(decode_exif), "0", {"0", "1"},
     "1: SC_DECODE turns each image upright by its EXIF orientation first (PIL's "
     "ImageOps.exif_transpose); 0: as stored (PIL's and torchvision's default)"},
    {"SC_AUGMENT", T_STR, F(augment), "", {0},
     "built-in augmentations of a fixed-shape uint8 image field in the producers, "
     "torchvision's: [FIELD=]random_crop(32,padding=4);random_horizontal_flip;"
     "normalize(mean=M,...,std=S,...[,dtype=float16]);to_nchw; empty: none (docs/api.md)"},
    {"SC_AUGMENT_LAYOUT", T_ENUM, F(augment_layout), "chw", {"chw", "hwc"},
     "SC_AUGMENT's input: images stored channels first (C x H x W) or last (H x W x C)"},
    {"SC_PEERS", T_ENUM, F(peers), "on", {"on", "off"},
     "on: a shard moving to another node comes from its old owner's cache over MPI; "
     "off: from the source (every rank must say the same)"},
    {"SC_PEER_BYTES", T_BYTES, F(peer_bytes), "256M", {0},
     "bytes of moved shards being received at once (at least one shard)"},
    {"SC_STREAM_BYTES", T_BYTES, F(stream_bytes), "256M", {0},
     "shard bytes a rank holds in memory while it builds batches"},
    {"SC_DEVICE", T_ENUM, F(device), "host", SC_DEVICE_CHOICES,
     "where batches land: host (what a CPU loop reads), cuda (the GPU, or an error), "
     "auto (the GPU when every rank sees one: the loop must look at batch.device)"
     SC_DEVICE_SIM_HELP},
    {"SC_BAD_SAMPLE", T_ENUM, F(bad_sample), "error", {"error", "skip"},
     "a sample that does not decode: error stops the loader naming it; skip leaves it out "
     "and delivers another sample of its shard in its place (batch.replaced), counted in "
     "the verdict as skipped with the reason"},
    {"SC_SKIP_LIST", T_REF, F(skip_list), "", {0},
     "a skip list (shardcache scan --decode writes one): its samples are skipped and "
     "replaced, never decoded; empty: none"},
    {"SC_VERIFY", T_ENUM, F(verify), "sketch", {"sketch", "full"},
     "exactly-once check: an O(1) sketch per epoch, or per-sample counts"},
    {"SC_AUDIT_DIR", T_STR, F(audit_dir), "", {0},
     "directory for per-rank audit trails of consumed ids; empty: none"},
    {"SC_TRACE", T_STR, F(trace), "", {0},
     "trace path prefix: each rank writes PREFIX.rankR.json; empty: off"},
    {"SC_TRACE_EVENTS", T_U64, F(trace_events), "65536", {0},
     "trace ring size per thread, in events; a full ring drops (and counts)"},
    {"SC_LAUNCHER_CHECK", T_ENUM, F(launcher_check), "on", {"on", "off"},
     "on: a loader is refused where torchrun, srun without PMIx or another MPI's launcher "
     "started more processes than MPI_COMM_WORLD holds (each would read the whole dataset); "
     "off: no check"},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

/*
 * Digits first: strtoull skips leading blanks and negates after a '-', so
 * ' -1' read as 2^64-1 (a seed), and ' 3' passed where '3 ' did not.
 */
static int config_parse_u64(const char *v, uint64_t *out, int bytes)
{
    char *end = NULL;
    if (*v < '0' || *v > '9')
        return -1;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v)
        return -1;
    uint64_t mul = 1;
    if (bytes && *end) {
        switch (*end++) {
        case 'k': case 'K': mul = UINT64_C(1) << 10; break;
        case 'm': case 'M': mul = UINT64_C(1) << 20; break;
        case 'g': case 'G': mul = UINT64_C(1) << 30; break;
        case 't': case 'T': mul = UINT64_C(1) << 40; break;
        default: return -1;
        }
        if (*end == 'i' || *end == 'B')
            end += (*end == 'i') + (end[*end == 'i'] == 'B');
    }
    if (*end || __builtin_mul_overflow((uint64_t)x, mul, out))
        return -1;
    return 0;
}

/*
 * A T_REF setting's text: interned for the process's life, so that a
 * config stays a plain struct its callers copy (it has no room for a path
 * of its own).  Each distinct text is kept once.
 */
static const char *config_intern(const char *v)
{
    /* Pushed without a lock (base has no threads): a race may keep a text twice. */
    typedef struct interned {
        struct interned *next;
        char text[];
    } interned;
    static _Atomic(interned *) all;
    for (interned *i = atomic_load(&all); i; i = i->next)
        if (!strcmp(i->text, v))
            return i->text;
    interned *n = malloc(sizeof *n + strlen(v) + 1);
    if (!n)
        return NULL;
    memcpy(n->text, v, strlen(v) + 1);
    n->next = atomic_load(&all);
    while (!atomic_compare_exchange_weak(&all, &n->next, n))
        ;
    return n->text;
}

static int config_apply(sc_config *cfg, const setting *s, const char *v, sc_error *err)
{
    char *field = (char *)cfg + s->offset;
    uint64_t u;
    switch (s->type) {
    case T_STR:
        if (strlen(v) >= s->size)
            return sc__seterr(err, SC_EINVAL, "%s is %zu characters, at most %zu",
                              s->env, strlen(v), s->size - 1);
        memcpy(field, v, strlen(v) + 1);
        return SC_OK;
    case T_REF: {
        const char *ref = *v ? config_intern(v) : NULL;
        if (*v && !ref)
            return sc__seterr(err, SC_ENOMEM, "%s: no memory for its value", s->env);
        memcpy(field, &ref, sizeof ref);
        return SC_OK;
    }
    case T_U64:
    case T_BYTES:
        /* Words: the first for UINT64_MAX, the second for 0. */
        if (s->choices[0] && (!strcmp(v, s->choices[0]) ||
                              (s->choices[1] && !strcmp(v, s->choices[1])))) {
            u = strcmp(v, s->choices[0]) ? 0 : UINT64_MAX;
            memcpy(field, &u, sizeof u);
            return SC_OK;
        }
        if (config_parse_u64(v, &u, s->type == T_BYTES) || (s->choices[0] && u == UINT64_MAX))
            return sc__seterr(err, SC_EINVAL, "%s='%s' is not a%s non-negative integer%s%s",
                              s->env, v, s->type == T_BYTES ? " byte count or" : "",
                              s->choices[0] ? " below 2^64-1 or " : "",
                              s->choices[0] ? s->choices[0] : "");
        memcpy(field, &u, sizeof u);
        return SC_OK;
    case T_LEVEL:
    case T_INT:
    case T_COUNT: { /* an int field: a level, a small count, or any count an int holds */
        uint64_t max = s->type == T_LEVEL ? 9 : s->type == T_COUNT ? INT_MAX : 1024;
        if (config_parse_u64(v, &u, 0) || u > max)
            return sc__seterr(err, SC_EINVAL, "%s='%s' is not an integer 0..%llu", s->env,
                              v, (unsigned long long)max);
        *(int *)(void *)field = (int)u;
        return SC_OK;
    }
    case T_DBL: {
        char *end = NULL;
        errno = 0;
        double d = strtod(v, &end);
        int first = (*v >= '0' && *v <= '9') || *v == '.'; /* no blanks, as above */
        if (!first || errno || end == v || *end || !(d >= 0.0 && d <= 1.0))
            return sc__seterr(err, SC_EINVAL, "%s='%s' is not a number in [0,1]",
                              s->env, v);
        memcpy(field, &d, sizeof d);
        return SC_OK;
    }
    case T_ENUM: {
        char list[64] = "";
        for (int i = 0; i < 4 && s->choices[i]; i++) {
            if (!strcmp(v, s->choices[i])) {
                *(int *)(void *)field = i; /* enums are int-sized */
                return SC_OK;
            }
            size_t at = strlen(list);
            snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", s->choices[i]);
        }
        return sc__seterr(err, SC_EINVAL, "%s='%s': choose one of %s", s->env, v, list);
    }
    }
    return sc__seterr(err, SC_EINVAL, "%s: unknown setting type", s->env);
}

int sc_config_set(sc_config *cfg, const char *name, const char *value,
                  sc_error *err)
{
    if (!cfg || !name || !value)
        return sc__seterr(err, SC_EINVAL, "sc_config_set: NULL argument");
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(settings[i].env, name))
            return config_apply(cfg, &settings[i], value, err);
    return sc__seterr(err, SC_EINVAL, "unknown setting %s", name);
}

/*
 * Whether a becomes b by one edit: a character left out, added or changed,
 * or two neighbours swapped.
 */
static int config_one_edit(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i = 0;
    if (la < lb) {
        const char *t = a;
        a = b, b = t, la = lb, lb = strlen(b);
    }
    if (la - lb > 1)
        return 0;
    while (i < lb && a[i] == b[i])
        i++;
    if (la != lb) /* a has one more: left out of b at i */
        return !strcmp(a + i + 1, b + i);
    return i < la && (!strcmp(a + i + 1, b + i + 1) ||
                      (a[i + 1] && a[i] == b[i + 1] && a[i + 1] == b[i] &&
                       !strcmp(a + i + 2, b + i + 2)));
}

/*
 * An SC_ variable in the environment that is no setting but one edit
 * from one (SC_BATCHSIZE, SC_SHUFFEL, SC_EPOCH: a key left out, added,
 * changed or two swapped) is refused: its job would run on the default
 * unawares, where the same name passed to sc_config_set is refused.
 * Other SC_ names (scripts' own, SC_TRAIN) pass: two edits reach too many.
 */
static int config_check_environ(sc_error *err)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        size_t len = strcspn(*e, "=");
        char name[48];
        if (strncmp(*e, "SC_", 3) != 0 || len >= sizeof name)
            continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        size_t near = NSETTINGS, i;
        for (i = 0; i < NSETTINGS && strcmp(settings[i].env, name) != 0; i++)
            if (near == NSETTINGS && config_one_edit(settings[i].env + 3, name + 3))
                near = i;
        if (i == NSETTINGS && near < NSETTINGS)
            return sc__seterr(err, SC_EINVAL, "unknown setting %s in the environment (did you "
                              "mean %s?)", name, settings[near].env);
    }
    return SC_OK;
}

int sc_config_init(sc_config *cfg, sc_error *err)
{
    int rc;
    if (!cfg)
        return sc__seterr(err, SC_EINVAL, "sc_config_init: NULL config");
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NSETTINGS; i++)
        if ((rc = config_apply(cfg, &settings[i], settings[i].dflt, err)) != SC_OK)
            return rc;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = getenv(settings[i].env);
        if (v && (rc = config_apply(cfg, &settings[i], v, err)) != SC_OK)
            return sc__errctx(err, rc, "in the environment");
    }
    if ((rc = config_check_environ(err)) != SC_OK)
        return rc;
    const char *dump = getenv("SC_DUMP_CONFIG");
    if (dump && strcmp(dump, "0") != 0)
        sc_config_print(cfg, stderr);
    return sc__errok(err);
}

/* A setting's value as its text, in val's n bytes (or the field's own string). */
static const char *config_text(const sc_config *cfg, const setting *s, char *val, size_t n)
{
    const char *field = (const char *)cfg + s->offset;
    uint64_t u;
    double d;
    int e;
    switch (s->type) {
    case T_STR:
        return field;
    case T_REF: {
        const char *ref;
        memcpy(&ref, field, sizeof ref);
        return ref ? ref : "";
    }
    case T_U64:
    case T_BYTES:
        memcpy(&u, field, sizeof u);
        if (u == UINT64_MAX && s->choices[0])
            return s->choices[0];
        if (u == 0 && s->choices[0] && s->choices[1])
            return s->choices[1];
        snprintf(val, n, "%llu", (unsigned long long)u);
        return val;
    case T_LEVEL:
    case T_INT:
    case T_COUNT:
        snprintf(val, n, "%d", *(const int *)(const void *)field);
        return val;
    case T_DBL:
        memcpy(&d, field, sizeof d);
        snprintf(val, n, "%g", d);
        return val;
    case T_ENUM:
        e = *(const int *)(const void *)field;
        return e >= 0 && e < 4 && s->choices[e] ? s->choices[e] : "?";
    }
    return "?";
}

int sc_config_print(const sc_config *cfg, FILE *f)
{
    if (!cfg || !f)
        return SC_EINVAL;
    for (size_t i = 0; i < NSETTINGS; i++) {
        char val[64];
        fprintf(f, "%s=%s  # %s\n", settings[i].env, config_text(cfg, &settings[i], val, sizeof val),
                settings[i].help);
    }
    return SC_OK;
}

int sc__config_text(const sc_config *cfg, const char *name, char *buf, size_t n)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        if (strcmp(settings[i].env, name) != 0)
            continue;
        char val[64];
        const char *text = config_text(cfg, &settings[i], val, sizeof val);
        return snprintf(buf, n, "%s", text) < (int)n ? SC_OK : SC_EINVAL;
    }
    return SC_EINVAL;
}

/* The shards a run of w consecutive samples may touch: its first's and one per shard start. */
static uint64_t config_span(uint64_t w, uint64_t shard_samples)
{
    return w > 1 ? (w - 1 + shard_samples - 1) / shard_samples + 1 : 1;
}

uint64_t sc__config_window_bytes(uint64_t window, uint64_t partitions, uint64_t sample_bytes,
                                 uint64_t shard_samples)
{
    uint64_t units = partitions ? partitions : 1, S = shard_samples ? shard_samples : 1;
    uint64_t per = window / units; /* sc__unit_window's */
    return units * config_span(per, S) * S * sample_bytes;
}

uint64_t sc__config_window(const sc_config *cfg, uint64_t sample_bytes, uint64_t shard_samples,
                           uint64_t least)
{
    if (!cfg)
        return 0;
    uint64_t units = cfg->partitions ? cfg->partitions : 1, S = shard_samples ? shard_samples : 1;
    uint64_t shard = S * (sample_bytes ? sample_bytes : 1);
    /* Each unit's window spans at most n shards: (n - 1) S + 1 samples. */
    uint64_t n = cfg->stream_bytes / 2 / units / shard;
    uint64_t fit = n ? ((n - 1) * S + 1) * units : 0;
    fit = fit > least ? fit : least; /* one batch, which the stream must hold anyway */
    if (cfg->shuffle_window == SC_WINDOW_AUTO)
        return fit;
    return cfg->shuffle_window < fit ? cfg->shuffle_window : fit;
}

uint64_t sc__config_depth(uint64_t asked, uint64_t slot_bytes, uint64_t least)
{
    if (asked != SC_PREFETCH_AUTO)
        return asked;
    uint64_t fit = SC_PREFETCH_AUTO_BYTES / (slot_bytes ? slot_bytes : 1);
    fit = fit < SC_PREFETCH_AUTO_MIN ? SC_PREFETCH_AUTO_MIN
          : fit > SC_PREFETCH_AUTO_MAX ? SC_PREFETCH_AUTO_MAX : fit;
    return fit > least ? fit : least;
}

uint64_t sc_shard_size_auto(uint64_t nsamples, uint64_t sample_bytes)
{
    uint64_t b = sample_bytes ? sample_bytes : 1, size = SC_SHARD_AUTO_SAMPLES;
    uint64_t least = (SC_SHARD_AUTO_MIN_BYTES + b - 1) / b, most = SC_SHARD_AUTO_MAX_BYTES / b;
    size = size < least ? least : size;
    size = size > most ? most : size;
    /* At least SC_SHARD_AUTO_SHARDS shards: the count, not the bytes, has the last word. */
    uint64_t share = nsamples / SC_SHARD_AUTO_SHARDS;
    size = size > share ? share : size;
    return size ? size : 1;
}

static uint64_t config_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

uint64_t sc__shard_chunk_unit(uint64_t sample_bytes, const uint64_t *rows,
                              const uint64_t *cost, int n)
{
    uint64_t unit = 0, b = sample_bytes ? sample_bytes : 1, tried = 0, lcm, bytes;
    for (int k = 0; k < n && k < 64; k++) {
        int best = -1;
        for (int i = 0; i < n && i < 64; i++)
            if (!(tried >> i & 1) && rows[i] && (best < 0 || cost[i] > cost[best]))
                best = i;
        if (best < 0)
            break;
        tried |= UINT64_C(1) << best;
        /* A field whose chunks no shard of at most 64 MiB aligns with stays cut. */
        if (!__builtin_mul_overflow(unit ? unit / config_gcd(unit, rows[best]) : 1, rows[best],
                                    &lcm) &&
            !__builtin_mul_overflow(lcm, b, &bytes) && bytes <= SC_SHARD_AUTO_MAX_BYTES)
            unit = lcm;
    }
    return unit;
}

int sc__cache_root(const sc_config *cfg, char *buf, size_t n)
{
    if (!buf)
        return SC_EINVAL;
    if (cfg && cfg->cache_dir[0]) {
        int len = snprintf(buf, n, "%s", cfg->cache_dir);
        return len < 0 || (size_t)len >= n ? SC_EINVAL : SC_OK;
    }
    const char *base = getenv("SLURM_TMPDIR");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    int len = snprintf(buf, n, "%s/shardcache-%lu", base, (unsigned long)getuid());
    return len < 0 || (size_t)len >= n ? SC_EINVAL : SC_OK;
}
