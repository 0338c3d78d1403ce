/*
 * ledger.c - claims in an RMA window, per-batch checks, and the
 * end-of-epoch exactly-once sketch.
 *
 * Owner words: tag(epoch) << 20 | rank, 0 when never claimed.  The word of
 * shard s for epoch e is at displacement (e mod SLOTS) * per + s / R on rank
 * s mod R.  A claim reads the word (MPI_NO_OP fetch); if it holds an older
 * epoch it swaps in ours with MPI_Compare_and_swap, retrying if the word
 * changed underneath; if it holds our epoch and another rank, that rank
 * owns the shard and the claim fails naming it.  Whichever of two ranks
 * claims second sees the first: a double claim is always caught.
 *
 * Words are 32 bits because Open MPI 4's 64-bit MPI_Compare_and_swap over
 * its shared-memory transport crashes unless that transport's single-copy
 * mode is off (open-mpi/ompi#7967, #11349: Debian 12's 4.1.4 does), while
 * its 32-bit one works.  The epoch tag is 12 bits and wraps: every epoch
 * claims every shard, so a word is rewritten every SLOTS epochs and the
 * epoch it names is within a few epochs of the claimant's; the tags'
 * distance modulo TAG_SPAN gives that difference exactly.
 *
 * The sketch of an epoch on a rank is (count, sum h, sum h^2) over the ids
 * it delivered or dropped by policy, with h = sc__ledger_sample_hash(epoch, id);
 * beside it the same sketch of what its plan says it owns.  Both are summed
 * over ranks, modulo 2^64, by one MPI_Iallreduce of six words: equal sums
 * mean every sample was accounted for exactly once (a duplicate and a skip
 * could cancel in the count, not in the two hash sums).
 */
#include "ledger.h"
#include "ledger_words.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agree.h"
#include "attend.h"
#include "error.h"
#include "mpierr.h"
#include "hash.h"
#include "plan_state.h"

#define RANK_BITS 20
#define RANK_MASK ((UINT32_C(1) << RANK_BITS) - 1)
#define TAG_SPAN 4095u /* tags 1..4095; 0 is a word never claimed */

static uint32_t ledger_tag_of(uint64_t epoch)
{
    return (uint32_t)(epoch % TAG_SPAN) + 1;
}

/* The epoch a claimed word names, less `epoch` (within half the tag span). */
static int64_t ledger_epoch_delta(uint32_t word, uint64_t epoch)
{
    uint32_t d = ((word >> RANK_BITS) + TAG_SPAN - ledger_tag_of(epoch)) % TAG_SPAN;
    return d <= TAG_SPAN / 2 ? (int64_t)d : (int64_t)d - (int64_t)TAG_SPAN;
}

/*
 * The words summed: the sketches; drops, padding, failed ranks, caller
 * skips; bad samples skipped (did not decode, or listed) and their
 * replacements; ranks stopped on a bad sample, their ranks, samples and
 * the epochs they stopped in summed (exact when one stopped), and those
 * of them that stopped under SC_BAD_SAMPLE=skip (nothing could replace it).
 */
enum { GOT_N, GOT_H, GOT_H2, EXP_N, EXP_H, EXP_H2, DROPPED, PADDED, FAILED, CALLER,
       SKIP_BAD, SKIP_LISTED, REPLACED, STOP_N, STOP_RANK, STOP_ID, STOP_EPOCH, STOP_SKIP,
       WORDS };

/* What a recorded sample is: delivered, a padding repeat, dropped by policy,
 * skipped by the caller (its epoch ended early, never handed out), or
 * skipped as bad (it did not decode, or the skip list names it). */
enum { REC_GOT, REC_PADDED, REC_DROPPED, REC_CALLER, REC_BAD, REC_LISTED };

typedef struct slot {
    int used, posted, done;
    uint64_t epoch;
    const sc_plan *plan;
    uint64_t *share, nshare; /* a resumed epoch: this rank's ids, sorted (no plan) */
    uint64_t sums[WORDS], total[WORDS];
    uint32_t *counts, *counts_total; /* full mode, [nsamples] */
    MPI_Request req[2];
} slot;

struct sc__ledger {
    MPI_Comm comm;
    MPI_Win win;
    MPI_Op sum_op;
    uint32_t *base; /* the window's memory: owner words */
    int rank, size, full;
    int attended; /* a claim may wait for its target inside MPI: progress probes run */
    uint64_t nshards, nsamples, per; /* per: words per slot on each rank */
    const uint64_t *first;
    slot slots[SC__LEDGER_SLOTS];
    sc_exactly_once done[SC__LEDGER_SLOTS]; /* verdicts awaiting their reader */
    int ndone;
    uint32_t *old, *res; /* claim scratch, [shards of this rank] */
    uint64_t scratch_n;
    FILE *audit;
};

/* The epoch's key, mixed once; a sample's hash then costs one mix. */
static inline uint64_t ledger_epoch_key(uint64_t epoch)
{
    return sc__mix64(epoch ^ UINT64_C(0x6f776e6572736869)); /* "ownershi" */
}

static inline uint64_t ledger_keyed_hash(uint64_t key, uint64_t id)
{
    return sc__mix64(key + id * UINT64_C(0x9E3779B97F4A7C15));
}

uint64_t sc__ledger_sample_hash(uint64_t epoch, uint64_t id)
{
    return ledger_keyed_hash(ledger_epoch_key(epoch), id);
}

/* One sample into a sketch, sums[GOT_N] or sums[EXP_N] on: count, sum, sum of squares. */
static inline void ledger_sketch_add(uint64_t *sketch, uint64_t h)
{
    sketch[0]++;
    sketch[1] += h;
    sketch[2] += h * h;
}

/* Sums modulo 2^64, spelled out: MPI_SUM's overflow is not ours to assume. */
static void ledger_sum_u64(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint64_t *a = in;
    uint64_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] += a[i];
}

/*
 * The ledger's window could not be made.  The one known cause: across
 * nodes that have only TCP, Open MPI 4.1 selects its osc/rdma component,
 * which then fails (open-mpi/ompi #9871, #11466); one host hides it (its
 * windows are shared memory).  Say so, and what to set.
 */
static int ledger_no_window(const sc__ledger *l, int m, long long bytes, sc_error *err)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (MPI_Error_string(m, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", m);
    return sc__seterr(err, SC_EMPI,
                      "rank %d: the ownership ledger's one-sided window (MPI_Win_allocate of "
                      "%lld bytes) could not be created: %s.  Across nodes with only TCP, "
                      "Open MPI 4.1 picks its osc/rdma component, which fails there: set "
                      "OMPI_MCA_osc=^rdma (or ucx; pt2pt works too but refuses "
                      "MPI_THREAD_MULTIPLE)",
                      l->rank, bytes, text);
}

/*
 * Creates this rank's audit trail, DIR/audit-r<rank>.bin: DIR made 0700
 * or accepted only if this user's and no one else's to write, the file
 * made anew (never through a planted link): `verify` trusts what it reads
 * there (docs/reliability.md, "Shared nodes").
 */
static int ledger_audit_open(sc__ledger *l, const char *dir, sc_error *err)
{
    char path[SC_PATH_MAX + 32];
    int fd = -1;
    snprintf(path, sizeof path, "%s/audit-r%d.bin", dir, l->rank);
    int rc = sc_output_dir(dir, err);
    if (rc == SC_OK)
        rc = sc_output_open(path, &fd, err);
    if (rc == SC_OK && !(l->audit = fdopen(fd, "wb"))) {
        rc = sc__seterr(err, SC_EIO, "'%s': %s", path, strerror(errno));
        close(fd);
    }
    return rc == SC_OK ? SC_OK : sc__errctx(err, rc, "rank %d: audit trail", l->rank);
}

int sc__ledger_open(MPI_Comm comm, uint64_t nshards, uint64_t ncuts,
                    const uint64_t *shard_first, const sc__ledger_opts *opts, sc__ledger **out,
                    sc_error *err)
{
    sc__ledger *l = calloc(1, sizeof *l);
    int rc = SC_OK;
    if (!l)
        return sc__seterr(err, SC_ENOMEM, "no memory for the ownership ledger");
    l->comm = MPI_COMM_NULL;
    l->win = MPI_WIN_NULL;
    l->sum_op = MPI_OP_NULL;
    l->nshards = nshards;
    l->first = shard_first;
    l->nsamples = shard_first[nshards];
    l->full = opts && opts->full;
    int m = sc__comm_own(comm, &l->comm, &l->rank, &l->size);
    if (m == MPI_SUCCESS && (uint64_t)l->size > RANK_MASK)
        rc = sc__seterr(err, SC_EOVERFLOW, "the ledger holds %llu ranks at most",
                        (unsigned long long)RANK_MASK);
    /* A word per shard (claimed by its home), then one per cut a plan can make. */
    l->per = l->size ? (nshards + ncuts + (uint64_t)l->size - 1) / (uint64_t)l->size : 0;
    /* ...and two words more, for sc__win_attended's try. */
    MPI_Aint bytes = (MPI_Aint)(sizeof(uint32_t) * (l->per * SC__LEDGER_SLOTS + 2));
    if (m == MPI_SUCCESS && rc == SC_OK) {
        m = MPI_Win_allocate(bytes, sizeof(uint32_t), MPI_INFO_NULL, l->comm, &l->base,
                             &l->win);
        if (m != MPI_SUCCESS) {
            l->win = MPI_WIN_NULL; /* undefined after a failure: nothing to free */
            rc = ledger_no_window(l, m, (long long)bytes, err);
            sc__ledger_close(l);
            return rc;
        }
    }
    if (m == MPI_SUCCESS && rc == SC_OK)
        m = MPI_Win_set_errhandler(l->win, MPI_ERRORS_RETURN);
    if (m == MPI_SUCCESS && rc == SC_OK) {
        memset(l->base, 0, (size_t)bytes);
        /* Nothing else touches the window: lock it once for the run. */
        m = MPI_Win_lock_all(MPI_MODE_NOCHECK, l->win);
    }
    if (m == MPI_SUCCESS && rc == SC_OK)
        m = MPI_Op_create(ledger_sum_u64, 1, &l->sum_op);
    if (m != MPI_SUCCESS)
        rc = sc__mpi_err(err, m, "ledger setup", __FILE__, __LINE__);
    /* One rank's failure is everyone's: the try and the close are collective. */
    if (l->win != MPI_WIN_NULL)
        rc = sc__agree(l->comm, rc, "could not set up its ownership ledger", err);
    if (rc == SC_OK)
        rc = sc__win_attended(l->comm, l->win, l->base, (MPI_Aint)(l->per * SC__LEDGER_SLOTS),
                              &l->attended, err);
    if (rc == SC_OK && opts && opts->audit_dir && opts->audit_dir[0]) {
        rc = ledger_audit_open(l, opts->audit_dir, err);
        if (rc == SC_OK) {
            /* Header: magic, rank, world size. */
            uint64_t head[3] = {SC_AUDIT_MAGIC,
                                (uint64_t)l->rank, (uint64_t)l->size};
            fwrite(head, sizeof head, 1, l->audit);
        }
    }
    if (l->win != MPI_WIN_NULL) /* every rank, whether or not it was given SC_AUDIT_DIR */
        rc = sc__agree(l->comm, rc, "could not open its ownership ledger", err);
    if (rc != SC_OK) {
        sc__ledger_close(l);
        return rc;
    }
    *out = l;
    return SC_OK;
}

static void ledger_slot_free(slot *s)
{
    if (s->posted && !s->done)
        MPI_Waitall(2, s->req, MPI_STATUSES_IGNORE);
    free(s->counts);
    free(s->counts_total);
    free(s->share);
    memset(s, 0, sizeof *s);
}

void sc__ledger_close(sc__ledger *l)
{
    if (!l)
        return;
    for (int i = 0; i < SC__LEDGER_SLOTS; i++)
        ledger_slot_free(&l->slots[i]);
    if (l->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(l->win);
        MPI_Win_free(&l->win);
    }
    if (l->sum_op != MPI_OP_NULL)
        MPI_Op_free(&l->sum_op);
    if (l->comm != MPI_COMM_NULL)
        MPI_Comm_free(&l->comm);
    if (l->audit)
        fclose(l->audit);
    free(l->old);
    free(l->res);
    free(l);
}

static void ledger_verdict(const sc__ledger *l, const slot *s, sc_exactly_once *v);
/* A free slot for `epoch`, waiting out the oldest one if need be. */
static int ledger_take_slot(sc__ledger *l, uint64_t epoch, slot **out, sc_error *err);
static int ledger_open_slot(sc__ledger *l, uint64_t epoch, slot **out, sc_error *err);

static slot *ledger_find(sc__ledger *l, uint64_t epoch)
{
    for (int i = 0; i < SC__LEDGER_SLOTS; i++)
        if (l->slots[i].used && l->slots[i].epoch == epoch)
            return &l->slots[i];
    return NULL;
}

/* Word w's name in a message: a shard's (its home's claim) or a cut's. */
static void ledger_word_name(const sc__ledger *l, uint64_t w, char *buf, size_t n)
{
    if (w < l->nshards)
        snprintf(buf, n, "shard %llu", (unsigned long long)w);
    else
        snprintf(buf, n, "cut %llu", (unsigned long long)(w - l->nshards));
}

/* Claims words mine[n]: shards this rank is home to, and nshards + i for its cuts i. */
static int ledger_claim(sc__ledger *l, uint64_t epoch, const uint64_t *mine, uint64_t n,
                           sc_error *err)
{
    uint32_t want = ledger_tag_of(epoch) << RANK_BITS | (uint32_t)l->rank;
    uint64_t sl = epoch % SC__LEDGER_SLOTS;
    if (n > l->scratch_n) {
        free(l->old);
        free(l->res);
        l->old = malloc(sizeof *l->old * n);
        l->res = malloc(sizeof *l->res * n);
        l->scratch_n = (!l->old || !l->res) ? 0 : n;
        if (!l->scratch_n)
            return sc__seterr(err, SC_ENOMEM, "rank %d: no memory to claim %llu shards",
                              l->rank, (unsigned long long)n);
    }
#define WHERE(s) ((int)((s) % (uint64_t)l->size)), (MPI_Aint)(sl * l->per + (s) / (uint64_t)l->size)
    uint32_t unused = 0; /* NO_OP ignores its origin, but some MPIs read it */
    for (uint64_t i = 0; i < n; i++)
        SC_MPI_CHECK(err, MPI_Fetch_and_op(&unused, &l->old[i], MPI_UINT32_T, WHERE(mine[i]),
                                           MPI_NO_OP, l->win));
    SC_MPI_CHECK(err, MPI_Win_flush_all(l->win));
    for (int round = 0; round < 64; round++) {
        uint64_t pending = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t w = l->old[i];
            if (w == want)
                continue; /* ours already */
            int64_t delta = w ? ledger_epoch_delta(w, epoch) : -1; /* 0: never claimed */
            char what[48];
            ledger_word_name(l, mine[i], what, sizeof what);
            if (delta == 0)
                return sc__seterr(err, SC_EOWNERSHIP,
                                  "epoch %llu: %s claimed by rank %d is already "
                                  "owned by rank %u in this epoch",
                                  (unsigned long long)epoch, what, l->rank,
                                  (unsigned)(w & RANK_MASK));
            if (delta > 0)
                return sc__seterr(err, SC_EOWNERSHIP,
                                  "epoch %llu: rank %d claims %s, but rank %u "
                                  "already claimed it for epoch %llu: this rank is "
                                  "more than %d epochs behind",
                                  (unsigned long long)epoch, l->rank, what,
                                  (unsigned)(w & RANK_MASK),
                                  (unsigned long long)(epoch + (uint64_t)delta),
                                  SC__LEDGER_SLOTS - 1);
            SC_MPI_CHECK(err, MPI_Compare_and_swap(&want, &l->old[i], &l->res[i],
                                                   MPI_UINT32_T, WHERE(mine[i]), l->win));
            pending++;
        }
        if (!pending)
            return SC_OK;
        SC_MPI_CHECK(err, MPI_Win_flush_all(l->win));
        /* A swap that met another value retries with what it met. */
        for (uint64_t i = 0; i < n; i++)
            if (l->old[i] != want)
                l->old[i] = l->res[i] == l->old[i] ? want : l->res[i];
    }
#undef WHERE
    return sc__seterr(err, SC_EOWNERSHIP, "epoch %llu: rank %d could not settle its claims",
                      (unsigned long long)epoch, l->rank);
}

/* A piece this rank serves into the expected sketch. */
typedef struct expect_ctx {
    const sc__ledger *l;
    uint64_t key, *sketch;
} expect_ctx;

static int ledger_expect_piece(void *ctx, uint32_t shard, uint64_t lo, uint64_t hi)
{
    expect_ctx *x = ctx;
    for (uint64_t id = x->l->first[shard] + lo; id < x->l->first[shard] + hi; id++)
        ledger_sketch_add(x->sketch, ledger_keyed_hash(x->key, id));
    return 0;
}

/*
 * The words this rank claims in `plan`: its home shards, then its cuts
 * (word nshards + i), into a fresh *words[*n].
 */
static int ledger_words(const sc__ledger *l, const sc_plan *plan, uint64_t **words,
                           uint64_t *n)
{
    const uint32_t *mine;
    uint64_t k = 0;
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    sc_plan_rank(plan, (uint32_t)l->rank, &mine, &k, NULL);
    if (!(*words = malloc(sizeof **words * (k + in.cuts + 1))))
        return -1;
    for (uint64_t i = 0; i < k; i++)
        (*words)[i] = mine[i];
    for (uint64_t c = 0; c < in.cuts; c++) {
        sc_plan_cut cut;
        sc_plan_get_cut(plan, c, &cut);
        if (cut.to == (uint32_t)l->rank)
            (*words)[k++] = l->nshards + c;
    }
    *n = k;
    return 0;
}

int sc__ledger_begin(sc__ledger *l, const sc_plan *plan, sc_error *err)
{
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    if (in.world_size != (uint32_t)l->size || in.nshards != l->nshards ||
        l->nshards + in.cuts > l->per * (uint64_t)l->size)
        return sc__seterr(err, SC_EPLAN,
                          "rank %d: epoch %llu: the plan is for %u ranks, %llu shards and "
                          "%llu cuts, the ledger for %d and %llu and %llu",
                          l->rank, (unsigned long long)in.epoch, in.world_size,
                          (unsigned long long)in.nshards, (unsigned long long)in.cuts, l->size,
                          (unsigned long long)l->nshards,
                          (unsigned long long)(l->per * (uint64_t)l->size - l->nshards));
    if (ledger_find(l, in.epoch))
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu begun twice", l->rank,
                          (unsigned long long)in.epoch);
    slot *s = NULL;
    uint64_t *words = NULL, n = 0;
    int rc = ledger_open_slot(l, in.epoch, &s, err);
    if (rc != SC_OK)
        return rc;
    if (ledger_words(l, plan, &words, &n)) {
        ledger_slot_free(s);
        return sc__seterr(err, SC_ENOMEM, "rank %d: no memory to claim epoch %llu's shards",
                          l->rank, (unsigned long long)in.epoch);
    }
    s->plan = plan;
    /* The expected sketch: every sample of every piece this rank serves. */
    expect_ctx x = {l, ledger_epoch_key(in.epoch), &s->sums[EXP_N]};
    uint32_t u0, u1;
    sc__plan_rank_units(plan, (uint32_t)l->rank, &u0, &u1);
    for (uint32_t u = u0; u < u1; u++)
        sc__plan_visit(plan, u, l->first, ledger_expect_piece, &x);
    s->used = 1;
    if ((rc = ledger_claim(l, in.epoch, words, n, err)) != SC_OK)
        s->plan = NULL; /* the epoch stays open, to be abandoned */
    free(words);
    return rc;
}

/* A fresh slot for `epoch` (full mode: with its count vectors), not yet used. */
static int ledger_open_slot(sc__ledger *l, uint64_t epoch, slot **out, sc_error *err)
{
    slot *s = NULL;
    int rc = ledger_take_slot(l, epoch, &s, err);
    if (rc != SC_OK)
        return rc;
    memset(s, 0, sizeof *s);
    s->epoch = epoch;
    s->req[0] = s->req[1] = MPI_REQUEST_NULL;
    if (l->full && (!(s->counts = calloc(l->nsamples, sizeof *s->counts)) ||
                    !(s->counts_total = calloc(l->nsamples, sizeof *s->counts_total)))) {
        ledger_slot_free(s);
        return sc__seterr(err, SC_ENOMEM, "rank %d: no memory for SC_VERIFY=full counts",
                          l->rank);
    }
    *out = s;
    return SC_OK;
}

static int ledger_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Adds ids to the expected sketch. */
static void ledger_expect(slot *s, uint64_t epoch, const uint64_t *ids, uint64_t n)
{
    uint64_t key = ledger_epoch_key(epoch);
    for (uint64_t i = 0; i < n; i++)
        ledger_sketch_add(&s->sums[EXP_N], ledger_keyed_hash(key, ids[i]));
}

int sc__ledger_begin_share(sc__ledger *l, uint64_t epoch, const uint64_t *slots,
                           uint64_t nslots, uint64_t nreal, const uint64_t *dropped,
                           uint64_t ndropped, sc_error *err)
{
    if (ledger_find(l, epoch))
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu begun twice", l->rank,
                          (unsigned long long)epoch);
    slot *s = NULL;
    int rc = ledger_open_slot(l, epoch, &s, err);
    if (rc != SC_OK)
        return rc;
    uint64_t n = nslots + ndropped;
    if (!(s->share = malloc(sizeof *s->share * (n + 1)))) {
        ledger_slot_free(s);
        return sc__seterr(err, SC_ENOMEM, "rank %d: no memory for epoch %llu's share",
                          l->rank, (unsigned long long)epoch);
    }
    memcpy(s->share, slots, sizeof *slots * nslots);
    memcpy(s->share + nslots, dropped, sizeof *dropped * ndropped);
    qsort(s->share, n, sizeof *s->share, ledger_cmp_u64);
    s->nshare = n;
    ledger_expect(s, epoch, slots, nreal); /* padding repeats are not expected */
    ledger_expect(s, epoch, dropped, ndropped);
    s->used = 1;
    return SC_OK;
}

static int ledger_take_slot(sc__ledger *l, uint64_t epoch, slot **out, sc_error *err)
{
    slot *s = NULL;
    for (int i = 0; i < SC__LEDGER_SLOTS && !s; i++)
        if (!l->slots[i].used)
            s = &l->slots[i];
    if (!s) {
        /*
         * The lookahead bound: a rank SLOTS epochs ahead of the slowest
         * waits here for the oldest epoch's reduction, and keeps its
         * verdict for sc__ledger_result.
         */
        slot *oldest = NULL;
        for (int i = 0; i < SC__LEDGER_SLOTS; i++)
            if (l->slots[i].posted && (!oldest || l->slots[i].epoch < oldest->epoch))
                oldest = &l->slots[i];
        if (!oldest || l->ndone == SC__LEDGER_SLOTS)
            return sc__seterr(err, SC_EINVAL,
                              "rank %d: epoch %llu begun while %d earlier epochs are open "
                              "or unread",
                              l->rank, (unsigned long long)epoch, SC__LEDGER_SLOTS);
        SC_MPI_CHECK(err, MPI_Waitall(2, oldest->req, MPI_STATUSES_IGNORE));
        oldest->done = 1;
        ledger_verdict(l, oldest, &l->done[l->ndone++]);
        ledger_slot_free(oldest);
        s = oldest;
    }
    *out = s;
    return SC_OK;
}

int sc__ledger_check(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                     sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    if (!s || (!s->plan && !s->share))
        return sc__seterr(err, SC_EOWNERSHIP,
                          "rank %d: a batch of epoch %llu, which this rank has not begun",
                          l->rank, (unsigned long long)epoch);
    for (uint64_t i = 0; s->share && i < n; i++)
        if (!bsearch(&ids[i], s->share, s->nshare, sizeof *s->share, ledger_cmp_u64))
            return sc__seterr(err, SC_EOWNERSHIP,
                              "epoch %llu: sample %llu delivered on rank %d is not in its "
                              "share of the resumed epoch",
                              (unsigned long long)epoch, (unsigned long long)ids[i], l->rank);
    if (s->share)
        return SC_OK;
    /* Batches hold runs of one shard: remember the last one checked. */
    uint64_t lo = 1, hi = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] >= lo && ids[i] < hi)
            continue;
        uint32_t owner = UINT32_MAX;
        if (ids[i] >= l->nsamples)
            return sc__seterr(err, SC_EOWNERSHIP,
                              "epoch %llu: sample %llu on rank %d is outside the dataset "
                              "(%llu samples)",
                              (unsigned long long)epoch, (unsigned long long)ids[i],
                              l->rank, (unsigned long long)l->nsamples);
        uint64_t shard = 0;
        sc__shard_of(l->first, l->nshards, ids[i], &shard); /* in range: checked above */
        sc_plan_sample_owner(s->plan, l->first, ids[i], &owner);
        if (owner != (uint32_t)l->rank)
            return sc__seterr(err, SC_EOWNERSHIP,
                              "epoch %llu: sample %llu (shard %llu) delivered on rank %d "
                              "is owned by rank %u",
                              (unsigned long long)epoch, (unsigned long long)ids[i],
                              (unsigned long long)shard, l->rank, owner);
        /* A shard no cut divides is this rank's whole: skip its other samples. */
        uint64_t size = l->first[shard + 1] - l->first[shard];
        if (sc__plan_kept(s->plan, (uint32_t)shard, size) == size) {
            lo = l->first[shard];
            hi = l->first[shard + 1];
        }
    }
    return SC_OK;
}

/* Accounts ids of one REC_ kind; `audit`: into the trail too (not caller skips). */
static int ledger_record(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                            int kind, int audit, sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    if (!s || s->posted)
        return sc__seterr(err, SC_EOWNERSHIP,
                          "rank %d: samples recorded for epoch %llu, which is %s",
                          l->rank, (unsigned long long)epoch,
                          s ? "already ended" : "not begun");
    if (kind == REC_PADDED) {
        s->sums[PADDED] += n;
    } else {
        uint64_t key = ledger_epoch_key(epoch);
        for (uint64_t i = 0; i < n; i++) {
            ledger_sketch_add(&s->sums[GOT_N], ledger_keyed_hash(key, ids[i]));
            if (s->counts && ids[i] < l->nsamples)
                s->counts[ids[i]]++;
        }
        s->sums[DROPPED] += kind == REC_DROPPED ? n : 0;
        s->sums[CALLER] += kind == REC_CALLER ? n : 0;
        s->sums[SKIP_BAD] += kind == REC_BAD ? n : 0;
        s->sums[SKIP_LISTED] += kind == REC_LISTED ? n : 0;
    }
    if (audit && l->audit && kind != REC_CALLER) {
        /* Records: epoch, then the id, flagged for padding repeats, policy drops, skips. */
        uint64_t flag = kind == REC_PADDED    ? SC_AUDIT_PADDED
                        : kind == REC_DROPPED ? SC_AUDIT_DROPPED
                        : kind == REC_BAD     ? SC_AUDIT_SKIPPED
                        : kind == REC_LISTED  ? SC_AUDIT_SKIPPED | SC_AUDIT_LISTED
                                              : 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t rec[2] = {epoch, ids[i] | flag};
            fwrite(rec, sizeof rec, 1, l->audit);
        }
    }
    return SC_OK;
}

int sc__ledger_account(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                       int dropped, int audit, sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    if (!s || s->posted)
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu is %s", l->rank,
                          (unsigned long long)epoch, s ? "already ended" : "not begun");
    ledger_expect(s, epoch, ids, n);
    return ledger_record(l, epoch, ids, n, dropped ? REC_DROPPED : REC_GOT, audit, err);
}

int sc__ledger_padded_before(sc__ledger *l, uint64_t epoch, uint64_t n, sc_error *err)
{
    /* Padding is only counted (no ids), and the earlier run's trail has it. */
    return ledger_record(l, epoch, NULL, n, REC_PADDED, 0, err);
}

int sc__ledger_consume(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                       int padded, sc_error *err)
{
    return ledger_record(l, epoch, ids, n, padded ? REC_PADDED : REC_GOT, 1, err);
}

int sc__ledger_drop(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                    sc_error *err)
{
    return ledger_record(l, epoch, ids, n, REC_DROPPED, 1, err);
}

int sc__ledger_skip(sc__ledger *l, uint64_t epoch, const uint64_t *ids, uint64_t n,
                    sc_error *err)
{
    return ledger_record(l, epoch, ids, n, REC_CALLER, 0, err);
}

int sc__ledger_replaced(sc__ledger *l, uint64_t epoch, uint64_t id, uint64_t by, int why,
                        int delivered, sc_error *err)
{
    int rc = ledger_record(l, epoch, &id, 1, why == SC_REPLACED_LISTED ? REC_LISTED : REC_BAD,
                           1, err);
    if (rc != SC_OK || !delivered)
        return rc;
    ledger_find(l, epoch)->sums[REPLACED]++; /* recorded above: the epoch is open */
    if (l->audit) {
        uint64_t rec[2] = {epoch, by | SC_AUDIT_REPLACEMENT};
        fwrite(rec, sizeof rec, 1, l->audit);
    }
    return SC_OK;
}

int sc__ledger_unused(sc__ledger *l, uint64_t epoch, uint64_t n, sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    if (!s || s->posted)
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu is %s: its samples can no "
                          "longer be counted as unused", l->rank, (unsigned long long)epoch,
                          s ? "already ended" : "not begun");
    /* Recorded as delivered already (in the sums): only which kind they are moves. */
    s->sums[CALLER] += n;
    return SC_OK;
}

int sc__ledger_stop(sc__ledger *l, uint64_t epoch, const sc__ledger_stopped *why,
                    sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    int rc;
    if (s && s->posted)
        return SC_OK; /* ended already: the others have what they need */
    if (!s) {
        if ((rc = ledger_open_slot(l, epoch, &s, err)) != SC_OK)
            return rc;
        s->used = 1;
    }
    s->sums[FAILED] = 1;
    if (why && why->sample != UINT64_MAX) {
        s->sums[STOP_N] = 1;
        s->sums[STOP_RANK] = (uint64_t)l->rank;
        s->sums[STOP_ID] = why->sample;
        s->sums[STOP_EPOCH] = why->epoch;
        s->sums[STOP_SKIP] = why->skip != 0;
    }
    return sc__ledger_end(l, epoch, err);
}

int sc__ledger_abandon(sc__ledger *l, uint64_t epoch, uint64_t bad, sc_error *err)
{
    sc__ledger_stopped why = {.sample = bad, .epoch = epoch};
    return sc__ledger_stop(l, epoch, &why, err);
}

void sc__ledger_flush(sc__ledger *l)
{
    if (l && l->audit)
        fflush(l->audit);
}

/*
 * Probes that never match (nothing is sent on the ledger's communicator but
 * collectives, which MPI_ANY_TAG does not see) and so only run MPI's
 * progress engine: a rank a step behind still answers the others' claims
 * within a step, not when it next begins an epoch.  Each call serves only
 * a few queued operations, so one probe a batch left claims across nodes
 * waiting on a straggler several times longer than eight do
 * (docs/benchmarks.md, "Claims across nodes"; docs/ownership.md).
 * Where a claim completes without its target (shared memory on one host,
 * attend.h) there are none: where MPI yields when idle (more ranks
 * than cores) a probe that finds nothing gives the core away, for
 * milliseconds beside busy producers (docs/ownership.md, "Across nodes").
 */
int sc__ledger_progress(sc__ledger *l, sc_error *err)
{
    enum { PROBES = 8 };
    int flag = 0;
    if (!l->attended)
        return SC_OK; /* a claim completes without this rank (attend.h) */
    for (int i = 0; i < PROBES; i++)
        SC_MPI_CHECK(err, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, l->comm, &flag,
                                     MPI_STATUS_IGNORE));
    return SC_OK;
}

int sc__ledger_end(sc__ledger *l, uint64_t epoch, sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    if (!s || s->posted)
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu %s", l->rank,
                          (unsigned long long)epoch, s ? "ended twice" : "not begun");
    if (l->audit)
        fflush(l->audit);
    SC_MPI_CHECK(err, MPI_Iallreduce(s->sums, s->total, WORDS, MPI_UINT64_T, l->sum_op,
                                     l->comm, &s->req[0]));
    if (s->counts)
        SC_MPI_CHECK(err, MPI_Iallreduce(s->counts, s->counts_total, (int)l->nsamples,
                                         MPI_UINT32_T, MPI_SUM, l->comm, &s->req[1]));
    s->posted = 1;
    return SC_OK;
}

static void ledger_verdict_of(const sc__ledger *l, const slot *s, sc_exactly_once *v)
{
    const uint64_t *t = s->total;
    memset(v, 0, sizeof *v);
    v->epoch = s->epoch;
    v->verified = 1;
    v->full = s->counts != NULL;
    v->samples = l->nsamples;
    v->dropped = t[DROPPED];
    v->padded = t[PADDED];
    v->delivered = t[GOT_N] - t[DROPPED] - t[CALLER] - t[SKIP_BAD] - t[SKIP_LISTED];
    v->caller_skipped = t[CALLER];
    v->skipped_bad = t[SKIP_BAD];
    v->skipped_listed = t[SKIP_LISTED];
    v->replacements = t[REPLACED];
    v->stopped = t[STOP_N];
    if (t[STOP_N] == 1)
        v->stopped_rank = t[STOP_RANK], v->stopped_sample = t[STOP_ID];
    int same = t[GOT_N] == t[EXP_N] && t[GOT_H] == t[EXP_H] && t[GOT_H2] == t[EXP_H2];
    v->ok = same && t[EXP_N] == l->nsamples;
    if (t[STOP_N]) {
        v->ok = 0;
        sc__ledger_say_stopped(v, t[STOP_EPOCH], t[STOP_SKIP] != 0, t[FAILED]);
        return;
    }
    if (t[FAILED]) {
        v->ok = 0;
        snprintf(v->detail, sizeof v->detail,
                 "%llu rank(s) abandoned epoch %llu (closed before its end, or after an error: see "
                 "their messages)",
                 (unsigned long long)t[FAILED], (unsigned long long)s->epoch);
        return;
    }
    if (v->full) {
        int shown = 0, off = 0;
        v->ok = 1;
        for (uint64_t id = 0; id < l->nsamples; id++) {
            uint32_t c = s->counts_total[id];
            if (c == 1)
                continue;
            v->ok = 0;
            if (c == 0)
                v->skipped++;
            else
                v->duplicated += c - 1;
            if (shown < 8 && off < (int)sizeof v->detail - 40) {
                off += snprintf(v->detail + off, sizeof v->detail - (size_t)off,
                                "%ssample %llu x%u", shown ? ", " : "",
                                (unsigned long long)id, c);
                shown++;
            }
        }
        return;
    }
    if (same && t[EXP_N] != l->nsamples) {
        /* What was delivered matches what was expected, but not the whole dataset. */
        v->skipped = t[EXP_N] < l->nsamples ? l->nsamples - t[EXP_N] : 0;
        v->duplicated = t[EXP_N] > l->nsamples ? t[EXP_N] - l->nsamples : 0;
        snprintf(v->detail, sizeof v->detail,
                 "the ranks' shares of epoch %llu cover %llu samples of %llu",
                 (unsigned long long)s->epoch, (unsigned long long)t[EXP_N],
                 (unsigned long long)l->nsamples);
    } else if (!v->ok) {
        /* The count says the balance; the hashes say something is off. */
        if (t[GOT_N] > t[EXP_N])
            v->duplicated = t[GOT_N] - t[EXP_N];
        else if (t[GOT_N] < t[EXP_N])
            v->skipped = t[EXP_N] - t[GOT_N];
        else
            v->duplicated = v->skipped = 1;
        snprintf(v->detail, sizeof v->detail,
                 "%llu accounted for, %llu expected%s; SC_VERIFY=full names the samples",
                 (unsigned long long)t[GOT_N], (unsigned long long)t[EXP_N],
                 t[GOT_N] == t[EXP_N] ? " (as many duplicated as skipped)" : "");
    }
}

/*
 * The verdict; samples the caller skipped (an epoch ended early) make it
 * not exactly-once, named as such when nothing else is wrong.
 */
static void ledger_verdict(const sc__ledger *l, const slot *s, sc_exactly_once *v)
{
    ledger_verdict_of(l, s, v);
    if (v->ok && (v->skipped_bad || v->skipped_listed))
        snprintf(v->detail, sizeof v->detail,
                 "%llu samples of epoch %llu skipped with a reason (%llu do not decode, "
                 "%llu in the skip list), each replaced by another of its shard (%llu "
                 "replacements delivered); the rest delivered once",
                 (unsigned long long)(v->skipped_bad + v->skipped_listed),
                 (unsigned long long)v->epoch, (unsigned long long)v->skipped_bad,
                 (unsigned long long)v->skipped_listed, (unsigned long long)v->replacements);
    if (v->caller_skipped && v->ok) {
        v->ok = 0;
        snprintf(v->detail, sizeof v->detail,
                 "%llu samples of epoch %llu skipped by the caller (the epoch was ended "
                 "before its last batches were taken); the rest delivered once",
                 (unsigned long long)v->caller_skipped, (unsigned long long)v->epoch);
    }
}

int sc__ledger_result(sc__ledger *l, uint64_t epoch, int wait, sc_exactly_once *out,
                      sc_error *err)
{
    slot *s = ledger_find(l, epoch);
    memset(out, 0, sizeof *out);
    out->epoch = epoch;
    for (int i = 0; !s && i < l->ndone; i++)
        if (l->done[i].epoch == epoch) {
            *out = l->done[i];
            l->done[i] = l->done[--l->ndone];
            return SC_OK;
        }
    if (!s || !s->posted)
        return sc__seterr(err, SC_EINVAL, "rank %d: epoch %llu has not ended", l->rank,
                          (unsigned long long)epoch);
    if (!s->done) {
        int flag = 0;
        if (wait)
            SC_MPI_CHECK(err, MPI_Waitall(2, s->req, MPI_STATUSES_IGNORE));
        else
            SC_MPI_CHECK(err, MPI_Testall(2, s->req, &flag, MPI_STATUSES_IGNORE));
        s->done = wait || flag;
    }
    if (!s->done)
        return SC_OK;
    ledger_verdict(l, s, out);
    ledger_slot_free(s);
    return SC_OK;
}
