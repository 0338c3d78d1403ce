/*
 * cmd_verify.c - `shardcache verify`: checks exactly-once from a job's audit
 * trail alone, against the plans re-derived from the job's flags (parsed as
 * `shardcache plan` parses them), or several trails of one job together.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "vec.h"

static const char verify_usage[] =
    "usage: shardcache verify --audit-dir DIR --plan-seed S [plan options]\n"
    "\n"
    "Checks exactly-once from a job's audit trail alone (SC_AUDIT_DIR: one\n"
    "audit-r<rank>.bin per rank): re-derives every epoch's plan from the flags,\n"
    "which must be the job's (--source or --shards/--shard-size or --shard-sizes,\n"
    "--ranks, --batch, --mode, --exchange, --remainder, --partitions; these\n"
    "flags' defaults are `shardcache plan`'s, and a job's differ: SC_SHUFFLE's\n"
    "default is sticky, so a job that left it unset takes --mode sticky), and\n"
    "checks that each sample was delivered once per epoch, on the rank that\n"
    "served it (its shard's home, or the rank a cut hands its range to), apart\n"
    "from the samples the remainder policy drops or pads.  A bad sample\n"
    "skipped with a reason (SC_BAD_SAMPLE=skip, SC_SKIP_LIST) counts as\n"
    "accounted for, and is named; its replacement is not a duplicate.  Prints\n"
    "'exactly-once: ok (E epochs, N samples, 0 duplicated, 0 skipped)' or the\n"
    "offending sample ids, and exits 1 then.\n"
    "\n"
    "  --union   several trails of one job, given as several --audit-dir (a run\n"
    "            and its resumption from a checkpoint, possibly on another\n"
    "            number of ranks): checks that, epoch by epoch, every sample\n"
    "            was delivered or dropped by the remainder policy exactly once\n"
    "            across them all; ownership is not checked (a resumed epoch\n"
    "            has no plan).  Needs the dataset's shard flags for its size.\n";

typedef cli_audit_rec rec;

/*
 * Several trails of one job (a run, and its resumption from a checkpoint):
 * every sample of every epoch they cover delivered or dropped exactly once
 * across them all.
 */
static int cmd_verify_union(const rec *rs, uint64_t nrec, uint64_t nsamples,
                            uint64_t *epochs, uint64_t *dup, uint64_t *skip, uint64_t *delivered)
{
    uint64_t lo = UINT64_MAX, hi = 0, shown = 0;
    for (uint64_t i = 0; i < nrec; i++) {
        lo = rs[i].epoch < lo ? rs[i].epoch : lo;
        hi = rs[i].epoch + 1 > hi ? rs[i].epoch + 1 : hi;
    }
    uint32_t *count = calloc(nsamples + 1, sizeof *count);
    if (!count)
        return 2;
    *epochs = 0;
    for (uint64_t e = lo; e < hi; e++) {
        memset(count, 0, sizeof *count * nsamples);
        int seen = 0;
        for (uint64_t i = 0; i < nrec; i++) {
            uint64_t id = rs[i].id & ~SC_AUDIT_FLAGS;
            if (rs[i].epoch != e || (rs[i].id & (SC_AUDIT_PADDED | SC_AUDIT_REPLACEMENT)))
                continue; /* a replacement stands in for a skip, counted apart */
            seen = 1;
            if (id >= nsamples) {
                if (shown++ < 10)
                    printf("epoch %" PRIu64 ": sample %" PRIu64 " is outside the dataset\n", e, id);
                (*dup)++;
                continue;
            }
            count[id]++;
            *delivered += !(rs[i].id & (SC_AUDIT_DROPPED | SC_AUDIT_SKIPPED));
        }
        if (!seen)
            continue;
        (*epochs)++;
        for (uint64_t id = 0; id < nsamples; id++) {
            if (count[id] == 1)
                continue;
            if (count[id])
                *dup += count[id] - 1;
            else
                (*skip)++;
            if (shown++ < 10)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " %s\n", e, id,
                       count[id] ? "delivered more than once" : "not delivered");
        }
    }
    free(count);
    return *dup || *skip;
}

int cli_audit_parse(const void *buf, size_t len, uint64_t rank, uint64_t *world,
                    cli_audit_rec **recs, uint64_t *n, size_t *cap, char *why, size_t whylen)
{
    const unsigned char *b = buf;
    uint64_t head[3];
    if (len < sizeof head) {
        snprintf(why, whylen, "%zu bytes, shorter than an audit header", len);
        return 1;
    }
    memcpy(head, b, sizeof head);
    if (head[0] != SC_AUDIT_MAGIC || head[1] != rank) {
        snprintf(why, whylen, "%s", head[0] != SC_AUDIT_MAGIC ? "not an audit trail"
                                                              : "another rank's audit trail");
        return 1;
    }
    if (rank >= head[2] || head[2] > UINT32_MAX || (rank > 0 && head[2] != *world)) {
        snprintf(why, whylen, "it says rank %" PRIu64 " of %" PRIu64 " ranks%s", rank, head[2],
                 rank > 0 && head[2] != *world ? ", rank 0's another number" : "");
        return 1;
    }
    *world = head[2];
    /* A torn last pair (a job stopped mid-write) is left out, as ever. */
    size_t npairs = (len - sizeof head) / (2 * sizeof(uint64_t));
    rec *g = sc__vec_grow(*recs, cap, *n + npairs, sizeof *g);
    if (!g) {
        snprintf(why, whylen, "no memory for %zu records", npairs);
        return 2;
    }
    *recs = g;
    for (size_t i = 0; i < npairs; i++) {
        uint64_t pair[2];
        memcpy(pair, b + sizeof head + sizeof pair * i, sizeof pair);
        (*recs)[(*n)++] = (rec){pair[0], pair[1], (uint32_t)rank};
    }
    return 0;
}


/*
 * The audit file at path, opened never through a link and only if this
 * user owns it and only they may write it; NULL otherwise (errno set).
 */
static FILE *cmd_verify_open_own(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 &&
        (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) || !S_ISREG(st.st_mode))) {
        fprintf(stderr, "shardcache verify: '%s' belongs to uid %u (mode %03o): another user "
                        "could have written it; not read\n", path, (unsigned)st.st_uid,
                (unsigned)(st.st_mode & 07777));
        close(fd);
        errno = EPERM;
        return NULL;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

/* Reads every rank's audit file; *world from their headers. */
static int cmd_verify_read_audit(const char *dir, rec **out, uint64_t *nrec, uint64_t *world)
{
    uint64_t n = 0;
    size_t cap = 0;
    rec *all = NULL;
    *world = 0;
    /* A trail another user could have written proves nothing: checked as the job made it. */
    struct stat ds;
    sc_error err = SC_ERROR_INIT;
    if (stat(dir, &ds) == 0 && sc_output_dir(dir, &err) != SC_OK) {
        fprintf(stderr, "shardcache verify: audit trail: %s\n", err.msg);
        return 2;
    }
    for (uint64_t r = 0;; r++) {
        char path[4200], why[160];
        snprintf(path, sizeof path, "%s/audit-r%" PRIu64 ".bin", dir, r);
        FILE *f = cmd_verify_open_own(path);
        if (!f && errno == EPERM) {
            free(all);
            return 2;
        }
        if (!f) {
            if (r == 0) {
                fprintf(stderr, "shardcache verify: no audit file '%s'\n", path);
                return 2;
            }
            if (r != *world) {
                fprintf(stderr, "shardcache verify: '%s' is missing (the job had %" PRIu64
                                " ranks)\n", path, *world);
                free(all);
                return 1;
            }
            break;
        }
        size_t len;
        unsigned char *bytes = cli_slurp(f, &len);
        fclose(f);
        int rc = bytes ? cli_audit_parse(bytes, len, r, world, &all, &n, &cap, why, sizeof why)
                       : 2;
        if (!bytes)
            snprintf(why, sizeof why, "cannot be read: %s", strerror(errno));
        free(bytes);
        if (rc) {
            if (rc == 1)
                fprintf(stderr, "shardcache verify: '%s' is not rank %" PRIu64
                                "'s audit file (%s)\n", path, r, why);
            else
                fprintf(stderr, "shardcache verify: '%s': %s\n", path, why);
            free(all);
            return rc;
        }
    }
    *out = all;
    *nrec = n;
    return 0;
}

/* The rank serving sample id this epoch (a cut's, else its shard's home); UINT32_MAX outside. */
static uint32_t cmd_verify_owner(const sc_plan *plan, const uint64_t *first, uint64_t id)
{
    uint32_t owner = UINT32_MAX;
    sc_plan_sample_owner(plan, first, id, &owner);
    return owner;
}

/*
 * Counts the epoch's deliveries into count[], each on the rank that serves
 * its sample; prints and counts those consumed elsewhere.
 */
static uint64_t cmd_verify_consumed(const sc_plan *plan, const uint64_t *first, const rec *rs,
                                    uint64_t nrec, uint32_t *count, uint64_t *delivered,
                                    uint64_t *shown)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < nrec; i++) {
        if (rs[i].epoch != in.epoch || (rs[i].id & (SC_AUDIT_DROPPED | SC_AUDIT_REPLACEMENT)))
            continue; /* a policy drop: the plan says which are allowed (missing, below); a
                         replacement may be of another rank's part of its shard */
        uint64_t id = rs[i].id & ~SC_AUDIT_FLAGS;
        uint32_t owner = cmd_verify_owner(plan, first, id);
        if (owner != rs[i].rank) {
            if ((*shown)++ < 10)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " consumed on rank %u, owned by "
                       "rank %d\n", in.epoch, id, rs[i].rank,
                       owner == UINT32_MAX ? -1 : (int)owner);
            bad++;
        } else if (!(rs[i].id & SC_AUDIT_PADDED)) {
            count[id]++; /* delivered, or skipped with a reason: accounted for once */
            *delivered += !(rs[i].id & SC_AUDIT_SKIPPED);
        }
    }
    return bad;
}

/*
 * Duplicates, and samples not delivered beyond what each rank's drop
 * leaves out (what it serves less its batches); zeros[] is per rank.
 */
static void cmd_verify_missing(const sc_plan *plan, const uint64_t *first, uint64_t nsamples,
                               const uint32_t *count, uint64_t *zeros, uint64_t *dup,
                               uint64_t *skip, uint64_t *shown)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    memset(zeros, 0, sizeof *zeros * in.world_size);
    for (uint64_t id = 0; id < nsamples; id++) {
        if (count[id] > 1) {
            *dup += count[id] - 1;
            if ((*shown)++ < 10)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " delivered %u times\n", in.epoch,
                       id, count[id]);
        }
        zeros[cmd_verify_owner(plan, first, id)] += count[id] == 0;
    }
    for (uint32_t r = 0; r < in.world_size; r++) {
        uint64_t samples = 0;
        sc_plan_rank(plan, r, NULL, NULL, &samples);
        uint64_t allowed = in.remainder == SC_REMAINDER_DROP
                               ? samples - in.batches_per_rank * in.batch_size : 0;
        if (zeros[r] <= allowed)
            continue;
        *skip += zeros[r] - allowed;
        for (uint64_t id = 0; id < nsamples && *shown < 10; id++)
            if (!count[id] && cmd_verify_owner(plan, first, id) == r)
                printf("epoch %" PRIu64 ": sample %" PRIu64 " (rank %u) not delivered\n",
                       in.epoch, id, r), (*shown)++;
    }
}

/* Checks one epoch's records against its plan; prints offenders; 0 if ok. */
static int cmd_verify_epoch(const sc_plan *plan, const uint64_t *first, uint64_t nshards,
                            const rec *rs, uint64_t nrec, uint32_t *count, uint64_t *zeros,
                            uint64_t *dup, uint64_t *skip, uint64_t *delivered)
{
    uint64_t nsamples = first[nshards], shown = 0;
    memset(count, 0, sizeof *count * nsamples);
    uint64_t bad = cmd_verify_consumed(plan, first, rs, nrec, count, delivered, &shown);
    cmd_verify_missing(plan, first, nsamples, count, zeros, dup, skip, &shown);
    return bad || *dup || *skip;
}

/* Every --audit-dir's records, one after the other; *world from the last. */
static int cmd_verify_read_trails(const plan_opts *o, rec **out, uint64_t *nrec,
                                  uint64_t *world)
{
    rec *rs = NULL;
    size_t cap = 0;
    int rc;
    *nrec = 0;
    for (int d = 0; d < o->naudit; d++) {
        rec *part = NULL;
        uint64_t np = 0;
        if ((rc = cmd_verify_read_audit(o->audit_dirs[d], &part, &np, world))) {
            free(rs);
            return rc;
        }
        rec *all = sc__vec_grow(rs, &cap, *nrec + np + 1, sizeof *all);
        if (!all) {
            free(part);
            free(rs);
            return 2;
        }
        rs = all;
        if (np)
            memcpy(rs + *nrec, part, sizeof *part * np);
        *nrec += np;
        free(part);
    }
    *out = rs;
    return 0;
}

/*
 * Bad samples skipped with a reason (SC_BAD_SAMPLE=skip, SC_SKIP_LIST),
 * each named, and the replacements delivered in their place: the suffix
 * of the exactly-once line in words[n], empty when there were none.
 */
static void cmd_verify_skips(const rec *rs, uint64_t nrec, char *words, size_t n)
{
    uint64_t bad = 0, listed = 0, repl = 0;
    for (uint64_t i = 0; i < nrec; i++) {
        uint64_t f = rs[i].id;
        repl += !!(f & SC_AUDIT_REPLACEMENT);
        if (!(f & SC_AUDIT_SKIPPED))
            continue;
        *(f & SC_AUDIT_LISTED ? &listed : &bad) += 1;
        if (bad + listed <= 20)
            printf("epoch %" PRIu64 ": sample %" PRIu64 " skipped (%s), replaced on rank %u\n",
                   rs[i].epoch, f & ~SC_AUDIT_FLAGS,
                   f & SC_AUDIT_LISTED ? "in the skip list" : "does not decode", rs[i].rank);
    }
    words[0] = '\0';
    if (bad + listed)
        snprintf(words, n, "; %" PRIu64 " skipped with a reason (%" PRIu64 " do not decode, %"
                 PRIu64 " in the skip list), %" PRIu64 " replacements", bad + listed, bad,
                 listed, repl);
}

/* --union: the trails together; a resumed epoch has no plan, only the dataset's size. */
static int cmd_verify_union_report(const plan_opts *o, const rec *rs, uint64_t nrec,
                                   const uint64_t *sizes, uint64_t n)
{
    uint64_t total = 0, epochs = 0, dup = 0, skip = 0, delivered = 0;
    for (uint64_t k = 0; k < n; k++)
        total += sizes[k];
    int rc = cmd_verify_union(rs, nrec, total, &epochs, &dup, &skip, &delivered);
    char skips[160];
    cmd_verify_skips(rs, nrec, skips, sizeof skips);
    if (rc < 2)
        printf("exactly-once: %s (%" PRIu64 " epochs, %" PRIu64 " samples, %" PRIu64
               " duplicated, %" PRIu64 " skipped%s; %d trails)\n",
               rc ? "FAILED" : "ok", epochs, delivered, dup, skip, skips, o->naudit);
    return rc;
}

/* Each shard's first sample id, first[n] the total (sc_plan_sample_owner's); NULL: no memory. */
static uint64_t *cmd_verify_offsets(const uint64_t *sizes, uint64_t n)
{
    uint64_t *first = malloc(sizeof *first * (n + 1));
    for (uint64_t k = 0; first && k <= n; k++)
        first[k] = k ? first[k - 1] + sizes[k - 1] : 0;
    return first;
}

/* One trail, epoch by epoch, against the plans the flags re-derive. */
static int cmd_verify_plans(const plan_opts *o, const rec *rs, uint64_t nrec,
                            const uint64_t *sizes, uint64_t n)
{
    uint64_t *first = cmd_verify_offsets(sizes, n), epochs = 0;
    uint64_t *zeros = calloc(o->ranks, sizeof *zeros); /* per rank, an epoch's */
    uint32_t *count = first ? malloc(sizeof *count * (first[n] + 1)) : NULL;
    for (uint64_t i = 0; i < nrec; i++)
        epochs = rs[i].epoch + 1 > epochs ? rs[i].epoch + 1 : epochs;
    sc_plan_params p = cmd_plan_params(o, sizes, n);
    sc_plan *prev = NULL;
    uint64_t dup = 0, skip = 0, delivered = 0;
    int bad = 0, rc = first && zeros && count ? 0 : 2;
    sc_error err = SC_ERROR_INIT;
    if (rc)
        fprintf(stderr, "shardcache verify: no memory for %" PRIu64 " shards\n", n);
    for (uint64_t e = 0; e < epochs && rc == 0; e++) {
        sc_plan *plan = NULL;
        p.epoch = e;
        if (sc_plan_create(&p, prev, &plan, &err) != SC_OK) {
            cli_report("verify", 0, 1, &err);
            rc = 1;
            break;
        }
        bad |= cmd_verify_epoch(plan, first, n, rs, nrec, count, zeros, &dup, &skip, &delivered);
        sc_plan_free(prev);
        prev = plan;
    }
    sc_plan_free(prev);
    char skips[160];
    cmd_verify_skips(rs, nrec, skips, sizeof skips);
    if (rc == 0)
        printf("exactly-once: %s (%" PRIu64 " epochs, %" PRIu64 " samples, %" PRIu64
               " duplicated, %" PRIu64 " skipped%s)\n",
               bad ? "FAILED" : "ok", epochs, delivered, dup, skip, skips);
    free(count);
    free(zeros);
    free(first);
    return rc ? rc : bad;
}

static int cmd_verify_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * A job's epochs follow each other: a trail whose epochs have a gap (one
 * damaged record says epoch 10^15) is refused, not walked epoch by epoch.
 */
static int cmd_verify_epochs_whole(const rec *rs, uint64_t nrec)
{
    uint64_t *e = malloc(sizeof *e * (nrec + 1)), distinct = 0;
    if (!e) {
        fprintf(stderr, "shardcache verify: no memory for %" PRIu64 " records\n", nrec);
        return 2;
    }
    for (uint64_t i = 0; i < nrec; i++)
        e[i] = rs[i].epoch;
    qsort(e, nrec, sizeof *e, cmd_verify_cmp_u64);
    for (uint64_t i = 0; i < nrec; i++)
        distinct += i == 0 || e[i] != e[i - 1];
    int gap = nrec && e[nrec - 1] - e[0] + 1 != distinct;
    if (gap)
        fprintf(stderr, "shardcache verify: the audit trail's epochs run from %" PRIu64
                        " to %" PRIu64 " with gaps (%" PRIu64 " of them present): damaged\n",
                e[0], e[nrec - 1], distinct);
    free(e);
    return gap;
}

int cmd_verify(int argc, char **argv)
{
    plan_opts o;
    int rc = cmd_plan_parse(argc, argv, &o, verify_usage);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.naudit || (o.naudit > 1 && !o.union_mode)) {
        fprintf(stderr, "shardcache verify: %s\n",
                o.naudit ? "several --audit-dir need --union" : "--audit-dir is required");
        return 2;
    }
    rec *rs = NULL;
    uint64_t nrec = 0, world = 0, *sizes = NULL, n = 0;
    if ((rc = cmd_verify_read_trails(&o, &rs, &nrec, &world)))
        return rc;
    if (!o.union_mode && o.ranks && o.ranks != world) {
        fprintf(stderr, "shardcache verify: --ranks %" PRIu64 " but the audit trail has %" PRIu64
                        " ranks\n", o.ranks, world);
        free(rs);
        return 1;
    }
    if (!o.union_mode)
        o.ranks = world;
    if ((rc = cmd_verify_epochs_whole(rs, nrec))) {
        free(rs);
        return rc;
    }
    if (o.source && MPI_Init(NULL, NULL) != MPI_SUCCESS) { /* --source opens the dataset */
        fprintf(stderr, "shardcache verify: --source: MPI_Init failed\n");
        free(rs);
        return 2;
    }
    rc = cmd_plan_load_sizes(&o, &sizes, &n);
    if (o.source)
        MPI_Finalize();
    if (rc) {
        free(rs);
        return rc;
    }
    rc = o.union_mode ? cmd_verify_union_report(&o, rs, nrec, sizes, n)
                      : cmd_verify_plans(&o, rs, nrec, sizes, n);
    free(sizes);
    free(rs);
    return rc;
}
