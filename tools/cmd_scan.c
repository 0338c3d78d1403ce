/*
 * cmd_scan.c - `shardcache scan --decode`: one pass over the whole source
 * that decodes every encoded image and names every one that does not, so
 * that a week-long job does not meet its bad samples one at a time.  Each
 * rank decodes a contiguous share of the shards (a scan, not an epoch: no
 * plan); rank 0 gathers the bad samples, prints them in id order and
 * writes the skip list a job takes with SC_SKIP_LIST.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "clock.h"
#include "field.h"
#include "formats.h"
#include "cli.h"
#include "image.h"
#include "source.h"
#include "vec.h"
#include "vlen.h"

#define SCAN_REASON_MAX 240 /* a reason's bytes in a line: libjpeg's are one sentence */

static const char usage[] =
    "usage: shardcache scan --decode [--source] PATH [options]   (under mpirun/srun)\n"
    "\n"
    "Decodes every encoded image of the source once, every rank a share of\n"
    "the shards, and names each sample that does not decode: its global id,\n"
    "file, field and reason, in id order, then a summary line.  Exits 0 when\n"
    "every sample decodes, 1 when some do not (the skip list written), 2 on\n"
    "an error (a file that cannot be read, bad flags).\n"
    "The skip list carries the fingerprint of the source's samples (its files,\n"
    "their stamps and sample counts: SC_SAMPLE_AXIS moves ids, SC_SHARD_SIZE,\n"
    "SC_FIELDS and SC_DECODE do not), and a job refuses a list of another.\n"
    "SC_* environment variables apply; flags override them.\n"
    "\n"
    "  --decode           decode every image (the check this scan makes)\n"
    "  --source PATH      HDF5 file, directory or list of files (SC_SOURCE;\n"
    "                     or PATH alone)\n"
    "  --field NAME       the field to decode (repeat, or a comma list); default:\n"
    "                     every variable-length uint8 field\n"
    "  --skip-list PATH   write the bad samples' ids there, for SC_SKIP_LIST\n"
    "  --fields LIST      the fields, by path, comma-separated (SC_FIELDS)\n"
    "  --shard-size K     samples per shard; layout B groups runs of smaller\n"
    "                     files up to it, cuts larger ones (SC_SHARD_SIZE)\n"
    "  --sample-axis A    first, or none: layout B files of one sample (SC_SAMPLE_AXIS)\n"
    "  -h, --help         this text\n";

typedef struct scan_opts {
    int decode;
    const char *skip_list;
    char field[1024]; /* --field NAMEs, comma-separated; empty: every vlen uint8 field */
} scan_opts;

/* --field NAME: appended to the comma list. */
static int cmd_scan_add_field(scan_opts *o, const char *name)
{
    size_t have = strlen(o->field), add = strlen(name);
    if (!add || have + add + 2 > sizeof o->field) {
        fprintf(stderr, "shardcache scan: --field '%s': %s\n", name,
                add ? "too many fields named" : "names no field");
        return 2;
    }
    snprintf(o->field + have, sizeof o->field - have, "%s%s", have ? "," : "", name);
    return 0;
}

static int cmd_scan_parse(int argc, char **argv, sc_config *cfg, scan_opts *o)
{
    enum { SOURCE = 256, FIELDS, SHARD_SIZE, SAMPLE_AXIS, DECODE, FIELD, SKIP_LIST };
    static const struct option longopts[] = {
        {"source", required_argument, 0, SOURCE},
        {"fields", required_argument, 0, FIELDS},
        {"shard-size", required_argument, 0, SHARD_SIZE},
        {"sample-axis", required_argument, 0, SAMPLE_AXIS},
        {"decode", no_argument, 0, DECODE},
        {"field", required_argument, 0, FIELD},
        {"skip-list", required_argument, 0, SKIP_LIST},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    /* Flags are settings by another name: one parser, the config's. */
    static const char *const env_of[] = {
        [SOURCE - SOURCE] = "SC_SOURCE", [FIELDS - SOURCE] = "SC_FIELDS",
        [SHARD_SIZE - SOURCE] = "SC_SHARD_SIZE", [SAMPLE_AXIS - SOURCE] = "SC_SAMPLE_AXIS"};
    int c, bad = 0;
    sc_error err = SC_ERROR_INIT;

    memset(o, 0, sizeof *o);
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case DECODE: o->decode = 1; break;
        case FIELD: bad = cmd_scan_add_field(o, optarg); break;
        case SKIP_LIST: o->skip_list = optarg; break;
        case 'h': fputs(usage, stdout); return -1;
        case '?': bad = 2; break;
        default:
            if (sc_config_set(cfg, env_of[c - SOURCE], optarg, &err) != SC_OK) {
                fprintf(stderr, "shardcache scan: %s (--%s)\n", err.msg,
                        longopts[c - SOURCE].name);
                bad = 2;
            }
        }
    }
    if (!bad && optind == argc - 1 &&
        sc_config_set(cfg, "SC_SOURCE", argv[optind++], &err) != SC_OK) {
        fprintf(stderr, "shardcache scan: %s\n", err.msg);
        bad = 2;
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "shardcache scan: unexpected argument '%s'\n", argv[optind]);
        bad = 2;
    }
    if (!bad && !o->decode) {
        fprintf(stderr, "shardcache scan: say what to check: --decode (decodes every image)\n");
        bad = 2;
    }
    if (bad)
        fprintf(stderr, "see `shardcache scan --help`\n");
    return bad;
}

/* One rank's scan: the source, its share of the shards, and what it found. */
typedef struct scan_run {
    const sc_config *cfg;
    const scan_opts *o;
    int rank, world;
    sc_error err;
    sc_dataset *ds;
    sc_dataset_info di;
    const uint64_t *first;   /* each shard's first global id */
    uint64_t fingerprint;    /* the source's samples' (sc_dataset_info) */
    unsigned char pick[SC_MAX_FIELDS]; /* the fields decoded */
    uint64_t lo, hi;         /* this rank's shards */
    void **bufs;
    sc__image *im;
    char *bad;               /* lines "id\tfield\tfile\treason\n" */
    size_t nbad_bytes, bad_room;
    uint64_t samples, bytes; /* scanned here */
} scan_run;

/* Field f's name matches `name` ("/x" and "x" alike). */
static int cmd_scan_takes(const sc_field_info *f)
{
    return f->vlen && !strcmp(f->dtype, "uint8");
}

/* --field's names, each a variable-length uint8 field of the source. */
static int cmd_scan_pick_named(scan_run *s)
{
    for (const char *p = s->o->field; *p;) {
        size_t len = strcspn(p, ",");
        int i = 0;
        sc_field_info f = {0};
        for (; i < s->di.nfields; i++)
            if (sc_dataset_field(s->ds, i, &f) == SC_OK && sc__field_named(f.name, p, len))
                break;
        if (i == s->di.nfields)
            return sc__seterr(&s->err, SC_EINVAL, "source '%s' has no field '%.*s' (SC_FIELDS "
                              "chooses the fields opened)", s->cfg->source, (int)len, p);
        if (!cmd_scan_takes(&f))
            return sc__seterr(&s->err, SC_EINVAL, "source '%s': field '%s' holds %s %s samples, "
                              "not encoded images (variable-length uint8)", s->cfg->source,
                              f.name, f.vlen ? "variable-length" : "fixed-shape", f.dtype);
        s->pick[i] = 1;
        p += len + (p[len] == ',');
    }
    return SC_OK;
}

/* The fields to decode: --field's, or every variable-length uint8 one. */
static int cmd_scan_pick(scan_run *s)
{
    if (s->o->field[0])
        return cmd_scan_pick_named(s);
    int any = 0;
    for (int i = 0; i < s->di.nfields; i++) {
        sc_field_info f;
        sc_dataset_field(s->ds, i, &f);
        any |= s->pick[i] = (unsigned char)cmd_scan_takes(&f);
    }
    return any ? SC_OK : sc__seterr(&s->err, SC_EINVAL, "source '%s' has no variable-length "
                                    "uint8 field (encoded images) to decode", s->cfg->source);
}

/* Buffers for the largest of this rank's shards, field by field. */
static int cmd_scan_buffers(scan_run *s)
{
    if (!(s->bufs = calloc((size_t)s->di.nfields, sizeof *s->bufs)))
        return sc__seterr(&s->err, SC_ENOMEM, "no memory for shard buffers");
    for (int i = 0; i < s->di.nfields; i++) {
        uint64_t most = 0, bytes = 0;
        for (uint64_t k = s->lo; k < s->hi; k++)
            if (sc_dataset_shard_bytes(s->ds, k, i, &bytes) == SC_OK && bytes > most)
                most = bytes;
        if (!(s->bufs[i] = malloc(most + 1)))
            return sc__seterr(&s->err, SC_ENOMEM, "no memory for a %" PRIu64 "-byte buffer of "
                              "field %d", most + 1, i);
    }
    return SC_OK;
}

/* Opens the source (SC_DECODE aside: the scan decodes), picks the fields, splits the shards. */
static int cmd_scan_open(scan_run *s)
{
    sc_config raw = *s->cfg;
    raw.decode[0] = 0;
    raw.skip_list = NULL; /* the scan finds the bad samples: a list of them is not its input */
    int rc = sc_dataset_open(MPI_COMM_WORLD, &raw, &s->ds, &s->err);
    if (rc != SC_OK)
        return rc;
    sc_dataset_get_info(s->ds, &s->di);
    sc_dataset_shard_offsets(s->ds, &s->first);
    s->fingerprint = s->di.samples_fingerprint;
    s->lo = s->di.nshards * (uint64_t)s->rank / (uint64_t)s->world;
    s->hi = s->di.nshards * (uint64_t)(s->rank + 1) / (uint64_t)s->world;
    if ((rc = cmd_scan_pick(s)) == SC_OK && (rc = cmd_scan_buffers(s)) == SC_OK)
        rc = sc__image_new(&s->im, &s->err);
    return rc;
}

/* The file that holds sample j of shard k (layout B: one of the shard's run). */
static const char *cmd_scan_file(const scan_run *s, uint64_t k, uint64_t j)
{
    const sc_dataset *ds = s->ds;
    if (ds->layout != 'B')
        return ds->path;
    uint64_t f = ds->file_first[k];
    for (j += ds->file_row[k]; f + 1 < ds->nfiles && j >= ds->file_sizes[f];)
        j -= ds->file_sizes[f++];
    return ds->files[f];
}

/* Appends text, with tabs and line ends made spaces (a line's fields are tab-separated),
   then `end`; -1 when there is no room. */
static int cmd_scan_put(scan_run *s, const char *text, size_t n, char end)
{
    char *p = sc__vec_grow(s->bad, &s->bad_room, s->nbad_bytes + n + 1, 1);
    if (!p)
        return -1;
    s->bad = p;
    for (size_t i = 0; i < n; i++)
        p[s->nbad_bytes++] = text[i] == '\t' || text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
    p[s->nbad_bytes++] = end;
    return 0;
}

/* One bad sample: "id\tfield\tfile\treason\n". */
static int cmd_scan_note(scan_run *s, uint64_t k, uint64_t j, int field, const char *why)
{
    char head[64];
    int n = snprintf(head, sizeof head, "%" PRIu64 "\t%d", s->first[k] + j, field);
    const char *file = cmd_scan_file(s, k, j);
    if (cmd_scan_put(s, head, (size_t)n, '\t') || cmd_scan_put(s, file, strlen(file), '\t') ||
        cmd_scan_put(s, why, strnlen(why, SCAN_REASON_MAX), '\n'))
        return sc__seterr(&s->err, SC_ENOMEM, "no memory to list the bad samples");
    return SC_OK;
}

/* Decodes every sample of field i of shard k (read into bufs[i]). */
static int cmd_scan_field(scan_run *s, uint64_t k, int i)
{
    const unsigned char *blob = s->bufs[i];
    uint64_t n = s->first[k + 1] - s->first[k];
    const unsigned char *v = sc__vlen_values(blob, n);
    int rc = SC_OK;
    for (uint64_t j = 0; rc == SC_OK && j < n; j++) {
        uint64_t a = sc__vlen_off(blob, j), b = sc__vlen_off(blob, j + 1);
        sc_error e = SC_ERROR_INIT;
        rc = sc__image_check(s->im, v + a, (size_t)(b - a), &e);
        if (rc == SC_EFORMAT) /* the sample's own fault: named, and the scan goes on */
            rc = cmd_scan_note(s, k, j, i, e.msg);
        else if (rc != SC_OK)
            sc__seterr(&s->err, rc, "shard %" PRIu64 " sample %" PRIu64 " of '%s': %s", k,
                       s->first[k] + j, cmd_scan_file(s, k, j), e.msg);
    }
    return rc;
}

static int cmd_scan_shard(scan_run *s, uint64_t k)
{
    int rc = sc_dataset_read_shard(s->ds, k, s->bufs, &s->err);
    for (int i = 0; rc == SC_OK && i < s->di.nfields; i++) {
        uint64_t bytes = 0;
        sc_dataset_shard_bytes(s->ds, k, i, &bytes);
        s->bytes += bytes;
        if (s->pick[i])
            rc = cmd_scan_field(s, k, i);
    }
    if (rc == SC_OK)
        s->samples += s->first[k + 1] - s->first[k];
    return rc;
}

/* Every shard's bytes, for the progress line. */
static uint64_t cmd_scan_total(const scan_run *s)
{
    uint64_t total = 0, bytes = 0;
    for (uint64_t k = 0; k < s->di.nshards; k++)
        for (int i = 0; i < s->di.nfields; i++)
            if (sc_dataset_shard_bytes(s->ds, k, i, &bytes) == SC_OK)
                total += bytes;
    return total;
}

/*
 * Scans this rank's shards in a fixed number of slices, so that every rank
 * makes the same reductions: the progress, and a failure on any rank,
 * which ends every rank's scan at the slice's end (never a hang).
 */
static int cmd_scan_all(scan_run *s)
{
    enum { SLICES = 50 };
    uint64_t total = s->rank == 0 ? cmd_scan_total(s) : 0, n = s->hi - s->lo;
    cli_progress prog;
    cli_progress_init(&prog, "scan");
    int rc = SC_OK, anybad = 0;
    for (uint64_t sl = 0, k = s->lo; !anybad && sl < SLICES; sl++) {
        for (; rc == SC_OK && k < s->lo + n * (sl + 1) / SLICES; k++)
            rc = cmd_scan_shard(s, k);
        uint64_t in[2] = {s->bytes, (uint64_t)(rc != SC_OK)}, out[2];
        MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        anybad = out[1] != 0;
        if (s->rank == 0 && !anybad)
            cli_progress_cb(&prog, out[0], total);
    }
    return rc;
}

/* Every rank's bad-sample lines on rank 0, in rank order, NUL-ended. */
static int cmd_scan_gather(scan_run *s, char **all, size_t *len)
{
    int mine = s->nbad_bytes > INT_MAX ? -1 : (int)s->nbad_bytes, *lens = NULL, *at = NULL;
    int rc = SC_OK;
    if (s->rank == 0 && (!(lens = calloc((size_t)s->world, sizeof *lens)) ||
                         !(at = calloc((size_t)s->world, sizeof *at))))
        rc = sc__seterr(&s->err, SC_ENOMEM, "no memory to gather the bad samples");
    MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; rc == SC_OK && s->rank == 0 && r < s->world; r++) {
        if (lens[r] < 0 || total + (size_t)lens[r] > INT_MAX)
            rc = sc__seterr(&s->err, SC_ENOMEM, "more than 2 GiB of bad-sample lines");
        at[r] = (int)total;
        total += rc == SC_OK ? (size_t)lens[r] : 0;
    }
    if (s->rank == 0 && rc == SC_OK && !(*all = malloc(total + 1)))
        rc = sc__seterr(&s->err, SC_ENOMEM, "no memory to gather the bad samples");
    /* Rank 0's failure is agreed before the Gatherv that would need its buffer. */
    if ((rc = sc__agree(MPI_COMM_WORLD, rc, "could not gather the bad samples", &s->err)) == SC_OK)
        MPI_Gatherv(s->bad, mine < 0 ? 0 : mine, MPI_CHAR, s->rank == 0 ? *all : NULL, lens, at,
                    MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rc == SC_OK && s->rank == 0)
        (*all)[*len = total] = 0;
    free(lens);
    free(at);
    return rc;
}

/* One bad (sample, field) as rank 0 sorts them. */
typedef struct scan_bad {
    uint64_t id;
    int field;
    char *file, *why;
} scan_bad;

static int cmd_scan_by_id(const void *a, const void *b)
{
    const scan_bad *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->field > y->field) - (x->field < y->field);
}

/* The gathered lines, split in place and sorted by id then field. */
static scan_bad *cmd_scan_parse_bad(char *all, size_t len, uint64_t *n)
{
    uint64_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += all[i] == '\n';
    scan_bad *b = calloc(lines + 1, sizeof *b);
    if (!b)
        return NULL;
    char *p = all;
    for (*n = 0; *n < lines; (*n)++) {
        scan_bad *r = &b[*n];
        r->id = strtoull(p, &p, 10);
        r->field = (int)strtol(p + 1, &p, 10);
        r->file = p + 1;
        *(p = strchr(r->file, '\t')) = 0;
        r->why = p + 1;
        *(p = strchr(r->why, '\n')) = 0;
        p++;
    }
    qsort(b, *n, sizeof *b, cmd_scan_by_id);
    return b;
}

/* Writes the skip list: the header, the source and fingerprint, one line per bad id. */
static int cmd_scan_write_list(const scan_run *s, const scan_bad *b, uint64_t n)
{
    FILE *f = cli_output("scan", s->o->skip_list, "w");
    if (!f)
        return 2;
    char real[PATH_MAX];
    fprintf(f, "%s\n# source %s\n# fingerprint %016" PRIx64 "\n", SC__SKIPLIST_MAGIC,
            realpath(s->cfg->source, real) ? real : s->cfg->source, s->fingerprint);
    for (uint64_t i = 0; i < n; i++) {
        sc_field_info fi;
        sc_dataset_field(s->ds, b[i].field, &fi);
        if (i && b[i].id == b[i - 1].id)
            fprintf(f, "; %s: %s", fi.name, b[i].why); /* a second field of the sample */
        else
            fprintf(f, "%s%" PRIu64 "\t%s: %s", i ? "\n" : "", b[i].id, fi.name, b[i].why);
    }
    if (n)
        fputc('\n', f);
    if (ferror(f) | fclose(f)) {
        fprintf(stderr, "shardcache scan: could not write the skip list '%s'\n", s->o->skip_list);
        return 2;
    }
    return 0;
}

/* Rank 0: each bad sample, the summary and the skip list; the exit status. */
static int cmd_scan_report(const scan_run *s, char *all, size_t len, uint64_t samples,
                           uint64_t bytes, double secs)
{
    uint64_t n = 0, ids = 0;
    scan_bad *b = cmd_scan_parse_bad(all, len, &n);
    if (!b) {
        fprintf(stderr, "shardcache scan: no memory to sort the bad samples\n");
        return 2;
    }
    for (uint64_t i = 0; i < n; i++) {
        sc_field_info fi;
        sc_dataset_field(s->ds, b[i].field, &fi);
        ids += !i || b[i].id != b[i - 1].id;
        printf("bad sample %" PRIu64 ": file %s, field %s: %s\n", b[i].id, b[i].file, fi.name,
               b[i].why);
    }
    printf("scanned: %" PRIu64 " samples on %d rank%s, %" PRIu64 " bad, %.2f s, %.1f MB/s\n",
           samples, s->world, s->world == 1 ? "" : "s", ids, secs,
           secs > 0 ? (double)bytes / 1e6 / secs : 0.0);
    int rc = s->o->skip_list ? cmd_scan_write_list(s, b, n) : 0;
    if (rc == 0 && s->o->skip_list)
        printf("skip list: %s (%" PRIu64 " sample%s; SC_SKIP_LIST=%s)\n", s->o->skip_list, ids,
               ids == 1 ? "" : "s", s->o->skip_list);
    free(b);
    return rc ? rc : ids ? 1 : 0;
}

/*
 * A failure's message, once: the lowest rank that failed says its own (the
 * others were told only that another rank failed).
 */
static void cmd_scan_say_failure(const scan_run *s, int own_rc)
{
    int mine = own_rc != SC_OK ? s->rank : s->world, first = mine;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == s->rank)
        cli_report("scan", s->rank, s->world, &s->err);
}

static void cmd_scan_close(scan_run *s)
{
    for (int i = 0; s->bufs && i < s->di.nfields; i++)
        free(s->bufs[i]);
    free(s->bufs);
    free(s->bad);
    sc__image_free(s->im);
    sc_dataset_close(s->ds);
}

/* Opens, scans and gathers; 0, or 2 after saying what failed where. */
static int cmd_scan_run(scan_run *s, char **all, size_t *len, uint64_t sum[2], double *secs)
{
    int own = cmd_scan_open(s);
    int rc = sc__agree(MPI_COMM_WORLD, own, "could not open the source", &s->err);
    double t0 = sc__clock_s();
    if (rc == SC_OK) {
        own = cmd_scan_all(s);
        rc = sc__agree(MPI_COMM_WORLD, own, "could not scan its shards", &s->err);
    }
    if (rc == SC_OK) {
        uint64_t mine[2] = {s->samples, s->bytes};
        MPI_Reduce(mine, sum, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        own = rc = cmd_scan_gather(s, all, len);
    }
    *secs = sc__clock_s() - t0;
    if (rc != SC_OK)
        cmd_scan_say_failure(s, own);
    return rc == SC_OK ? 0 : 2;
}

int cmd_scan(int argc, char **argv)
{
    sc_config cfg;
    scan_opts o;
    int rc;
    if ((rc = cli_config(&cfg)))
        return rc;
    if ((rc = cmd_scan_parse(argc, argv, &cfg, &o)))
        return rc < 0 ? 0 : rc;

    scan_run s = {.cfg = &cfg, .o = &o, .world = 1, .err = SC_ERROR_INIT};
    char *all = NULL;
    size_t len = 0;
    uint64_t sum[2] = {0, 0};
    double secs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.world);
    rc = cmd_scan_run(&s, &all, &len, sum, &secs);
    if (rc == 0 && s.rank == 0)
        rc = cmd_scan_report(&s, all, len, sum[0], sum[1], secs);
    /* Every rank exits as rank 0 does (mpirun reports the first non-zero). */
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    cmd_scan_close(&s);
    MPI_Finalize();
    return rc;
}
