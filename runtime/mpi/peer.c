/*
 * peer.c - shards that move between nodes, over MPI.
 *
 * When epoch e+1's plan arrives (during epoch e), each rank looks at the
 * shards its schedule reads in e+1, in the order it reads them (a shard
 * the remainder drops is not among them).  One that no rank of its node
 * holds, that it
 * does not read itself in e, and whose owner in e sits on another node, it
 * reserves in its cache (epoch e+1 goes to its producers once the transfers
 * are in or given up; a reader meeting the reservation reads the source)
 * and asks of that owner: an ask is three words {shard, e, seq} on
 * TAG_ASK, and the asker has already posted the receive of the reply, on
 * tag 1 + seq mod span, so a reply never waits for a receive.  The owner
 * answers from its own cache entry, mapped and sent in place as one
 * message (a header {status, shard, checksum, bytes}, then the fields); if
 * it holds no entry, it waits until it has ended epoch e (it reads the
 * shard in e) and its cache writer has written the entry if it owes it,
 * then answers "none" (evicted, never kept, a failed write).
 * The asker checks the bytes against the owner's checksum before
 * publishing them; "none", a mismatch, a failed write or a reply later
 * than the timeout withdraws the reservation, and the producers read the
 * source as before.
 *
 * Every MPI call here runs on the loader's calling thread (FUNNELED), in
 * sc__peer_pump: on every batch, and while the caller waits for one
 * (where the ranks span nodes: on one host no rank asks).  The
 * owner's answer therefore comes within one of its steps, as its claims
 * in the ledger do (docs/ownership.md, "Across nodes").
 */
#include "peer.h"

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "clock.h"
#include "fault.h"
#include "log.h"
#include "mem.h"
#include "mpierr.h"
#include "node.h"
#include "plan_state.h"
#include "source.h"
#include "tring.h"
#include "vec.h"

enum { TAG_ASK = 0, ASK_WORDS = 3, HDR_WORDS = 4 };
enum { REPLY_NONE = 0, REPLY_DATA = 1 };
enum { PEER_EPOCHS = 4 }; /* the epochs whose received bytes are kept for their summaries */

/* A shard this rank asked for. */
typedef struct ask {
    uint64_t shard, epoch, seq, bytes; /* epoch: when `from` owned it; epoch + 1 needs it */
    int from, posted;
    uint64_t words[ASK_WORDS];
    unsigned char *buf; /* header, then the fields: the reply's bytes */
    MPI_Request recv, send;
    uint64_t traced; /* when posted, on the trace clock */
} ask;

/* A shard another rank asked of this one. */
typedef struct give {
    uint64_t shard, epoch, seq;
    int to, posted;
    uint64_t hdr[HDR_WORDS];
    sc__mapping m;
    MPI_Datatype type;
    MPI_Request req;
} give;

struct sc__peer {
    MPI_Comm comm;
    int rank, size, span; /* span: reply tags 1..span */
    int ready;            /* opened on every rank: close ends the exchange collectively */
    int *node_of;         /* [size]: each rank's node (its lowest rank) */
    int apart;            /* the ranks span nodes: else nothing is ever asked or answered */
    sc_dataset *ds;
    sc_cache *cache;
    sc__peer_opts o;
    uint64_t ended_to, seq, inflight;
    struct received {
        uint64_t epoch, bytes;
    } received[PEER_EPOCHS]; /* by the epoch served, modulo PEER_EPOCHS */
    uint64_t *sent_to, *got_from; /* [size]: asks sent to, and received from, each rank */
    struct lost {
        int from, tag;
    } *lost; /* replies to withdrawn asks, still to come: drained at close */
    size_t nlost, caplost;
    /*
     * Pointers: an ask's words and an answer's header are the buffers of
     * sends in flight, so each lives where it was made until it is done.
     */
    ask **asks;
    size_t nasks, capasks;
    give **gives;
    size_t ngives, capgives;
};

int sc__peer_open(MPI_Comm comm, sc_dataset *ds, sc_cache *cache, const sc__peer_opts *o,
                  sc__peer **out, sc_error *err)
{
    *out = NULL;
    sc__peer *p = calloc(1, sizeof *p);
    if (!p) { /* the others' collectives are met, and told */
        MPI_Comm c;
        int worst = SC_OK;
        if (sc__comm_own(comm, &c, NULL, NULL) == MPI_SUCCESS)
            MPI_Comm_free(&c);
        sc__agree_min(comm, SC_ENOMEM, &worst);
        return sc__seterr(err, SC_ENOMEM, "no memory for peer transfers");
    }
    p->ds = ds, p->cache = cache, p->o = *o;
    int m = sc__comm_own(comm, &p->comm, &p->rank, &p->size), rc = SC_OK;
    int *ub = NULL, flag = 0;
    if (m == MPI_SUCCESS)
        m = MPI_Comm_get_attr(p->comm, MPI_TAG_UB, &ub, &flag);
    if (m != MPI_SUCCESS)
        rc = sc__mpi_err(err, m, "opening peer transfers", __FILE__, __LINE__);
    p->span = flag && *ub > 1 ? (*ub < (1 << 24) ? *ub : 1 << 24) - 1 : 32766;
    if (rc == SC_OK && (!(p->node_of = malloc(sizeof *p->node_of * (size_t)p->size)) ||
                        !(p->sent_to = calloc((size_t)p->size, sizeof *p->sent_to)) ||
                        !(p->got_from = calloc((size_t)p->size, sizeof *p->got_from))))
        rc = sc__seterr(err, SC_ENOMEM, "no memory for peer transfers");
    /* Every rank takes part in the gather, or none: a failure above is everyone's. */
    rc = sc__agree(comm, rc, "could not open peer transfers", err);
    if (rc == SC_OK)
        rc = sc__node_ids(p->comm, p->node_of, err);
    if (rc != SC_OK) {
        sc__peer_close(p);
        return rc;
    }
    for (int r = 0; r < p->size; r++)
        p->apart |= p->node_of[r] != p->node_of[0];
    p->ready = 1;
    *out = p;
    return SC_OK;
}

/* ---- asking ------------------------------------------------------------------ */

int sc__peer_want(sc__peer *p, const sc_plan *prev, const uint32_t *mine, uint64_t n,
                  sc_error *err)
{
    sc_plan_info pi;
    if (!p)
        return SC_OK; /* SC_PEERS=off */
    sc_plan_get_info(prev, &pi);
    /*
     * A capped cache takes only what fits without evicting an entry its
     * future reads (this epoch's unread shards, the next's): a transfer
     * that pushed one out would cost the source read it saves.
     */
    uint64_t room = sc__cache_spare(p->cache);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t from = 0;
        uint64_t bytes = sc__shard_bytes(p->ds, mine[i]);
        if (sc_plan_owner(prev, mine[i], &from) != SC_OK || (int)from == p->rank ||
            p->node_of[from] == p->node_of[p->rank] || bytes > INT32_MAX - 64 || bytes > room)
            continue; /* this node's, too large for one message, or no room: the source's */
        /*
         * A shard this rank reads a piece of in `prev` too (a cut made to
         * it) is this rank's to load then: reserved for a transfer, its
         * load in `prev` would wait on an owner that answers only after
         * `prev`, and may by then wait for this rank's next plan.
         */
        if (sc__plan_reads_shard(prev, (uint32_t)p->rank, mine[i]))
            continue;
        ask *a = NULL, **grown = sc__vec_grow(p->asks, &p->capasks, p->nasks + 1, sizeof *grown);
        if (grown)
            p->asks = grown;
        if (!grown || !(a = calloc(1, sizeof *a)))
            return sc__seterr(err, SC_ENOMEM, "rank %d: no memory to ask for shards",
                              p->rank);
        if (!sc__cache_reserve(p->cache, mine[i])) {
            free(a);
            continue; /* held on this node already, or not to be kept */
        }
        room -= room == UINT64_MAX ? 0 : bytes;
        p->asks[p->nasks++] = a;
        a->shard = mine[i], a->epoch = pi.epoch, a->from = (int)from, a->bytes = bytes;
        a->recv = a->send = MPI_REQUEST_NULL;
    }
    return SC_OK;
}

/* Posts the reply's receive, then the ask: 1, or 0 if not now (the memory bound), < 0 an error. */
static int peer_post_ask(sc__peer *p, ask *a, sc_error *err)
{
    uint64_t total = HDR_WORDS * sizeof(uint64_t) + a->bytes;
    if (p->inflight && p->inflight + total > p->o.max_bytes)
        return 0; /* within the bound, but always one at a time */
    if (!(a->buf = sc__big_alloc(total)))
        return 0;
    a->seq = p->seq++;
    a->words[0] = a->shard, a->words[1] = a->epoch, a->words[2] = a->seq;
    int tag = 1 + (int)(a->seq % (uint64_t)p->span);
    SC_MPI_CHECK(err, MPI_Irecv(a->buf, (int)total, MPI_BYTE, a->from, tag, p->comm, &a->recv));
    a->posted = 1; /* its buffer is MPI's from here on, whatever follows */
    SC_MPI_CHECK(err, MPI_Isend(a->words, ASK_WORDS, MPI_UINT64_T, a->from, TAG_ASK, p->comm,
                                &a->send));
    p->sent_to[a->from]++;
    a->traced = sc__tring_now(p->o.ring);
    p->inflight += total;
    return 1;
}

/* What arrived for `a` (n bytes): published, or the reservation withdrawn. */
static void peer_take(sc__peer *p, ask *a, int n)
{
    const uint64_t *h = (const uint64_t *)a->buf;
    sc_error e = SC_ERROR_INIT;
    int whole = n == (int)(HDR_WORDS * sizeof(uint64_t) + a->bytes) && h[0] == REPLY_DATA &&
                h[1] == a->shard && h[3] == a->bytes;
    sc__tctx tc = {p->o.ring, a->epoch + 1};
    sc__tring_span(p->o.ring, SC__ST_PEER_RECV, a->traced, sc__tring_now(p->o.ring),
                   a->epoch + 1, (int64_t)a->shard, -1, whole ? a->bytes : 0);
    if (whole) {
        void *bufs[SC_MAX_FIELDS];
        unsigned char *at = a->buf + HDR_WORDS * sizeof(uint64_t);
        for (int f = 0; f < p->ds->nfields; f++) {
            bufs[f] = at;
            at += sc__field_bytes(p->ds, f, a->shard);
        }
        if (sc__cache_fill(p->cache, a->shard, bufs, h[2], &tc, &e) != SC_OK) {
            sc__log(p->o.log_level, SC__LOG_WARN, p->rank,
                    "shard %llu from rank %d (another node): %s; reading it from the source",
                    (unsigned long long)a->shard, a->from, e.msg);
            return;
        }
        struct received *r = &p->received[(a->epoch + 1) % PEER_EPOCHS];
        if (r->epoch != a->epoch + 1)
            r->epoch = a->epoch + 1, r->bytes = 0;
        r->bytes += a->bytes;
        return;
    }
    sc__cache_unreserve(p->cache, a->shard);
    if (!(n == (int)(HDR_WORDS * sizeof(uint64_t)) && h[0] == REPLY_NONE))
        sc__log(p->o.log_level, SC__LOG_WARN, p->rank,
                "shard %llu from rank %d (another node): a reply of %d bytes, not the %llu "
                "asked; reading it from the source",
                (unsigned long long)a->shard, a->from, n, (unsigned long long)a->bytes);
}

/*
 * Gives `a` up: its receive cancelled (or taken, if the reply came first),
 * the reservation withdrawn.  1 if it was cancelled, < 0 an error.
 */
static int peer_withdraw(sc__peer *p, ask *a, sc_error *err)
{
    int gone = 1, n = 0;
    MPI_Status st;
    if (a->posted) {
        SC_MPI_CHECK(err, MPI_Cancel(&a->recv));
        SC_MPI_CHECK(err, MPI_Wait(&a->recv, &st));
        SC_MPI_CHECK(err, MPI_Test_cancelled(&st, &gone));
    }
    if (gone) {
        sc__cache_unreserve(p->cache, a->shard);
        /* Its reply still comes (every ask is answered): it is drained at close. */
        struct lost *grown = a->posted ? sc__vec_grow(p->lost, &p->caplost, p->nlost + 1,
                                                      sizeof *grown)
                                       : NULL;
        if (grown) {
            p->lost = grown;
            p->lost[p->nlost++] = (struct lost){a->from, 1 + (int)(a->seq % (uint64_t)p->span)};
        }
        return 1;
    }
    SC_MPI_CHECK(err, MPI_Get_count(&st, MPI_BYTE, &n));
    peer_take(p, a, n);
    return 0;
}

/* 1 when `a` is done with (taken, or given up), 0 if not yet, < 0 an error. */
static int peer_check_ask(sc__peer *p, ask *a, sc_error *err)
{
    int done = 0, n = 0;
    MPI_Status st;
    /*
     * No clock here: the owner may rightly hold its answer until it reads
     * the shard, late in a long epoch.  The asker gives up at its next
     * epoch's begin (sc__peer_give_up) or at close.
     */
    SC_MPI_CHECK(err, MPI_Test(&a->recv, &done, &st));
    if (done) {
        SC_MPI_CHECK(err, MPI_Get_count(&st, MPI_BYTE, &n));
        peer_take(p, a, n);
    }
    return done;
}

/* ---- answering --------------------------------------------------------------- */

/* Sends the entry (or "none") to the rank that asked: the header and fields in place. */
static int peer_answer(sc__peer *p, give *g, int have, sc_error *err)
{
    int tag = 1 + (int)(g->seq % (uint64_t)p->span), nb = 1;
    int len[1 + SC_MAX_FIELDS];
    MPI_Aint at[1 + SC_MAX_FIELDS];
    uint64_t bytes = sc__shard_bytes(p->ds, g->shard);
    g->hdr[0] = have ? REPLY_DATA : REPLY_NONE, g->hdr[1] = g->shard, g->hdr[3] = bytes;
    g->hdr[2] = have ? sc__cache_checksum(p->cache, g->shard, (void *const *)g->m.field) : 0;
    if (have && sc__fault("peer-corrupt"))
        g->hdr[2] ^= 1; /* test hook: as if a bit flipped on the way */
    len[0] = (int)sizeof g->hdr;
    SC_MPI_CHECK(err, MPI_Get_address(g->hdr, &at[0]));
    for (int f = 0; have && f < p->ds->nfields; f++, nb++) {
        len[nb] = (int)sc__field_bytes(p->ds, f, g->shard);
        SC_MPI_CHECK(err, MPI_Get_address(g->m.field[f], &at[nb]));
    }
    SC_MPI_CHECK(err, MPI_Type_create_hindexed(nb, len, at, MPI_BYTE, &g->type));
    SC_MPI_CHECK(err, MPI_Type_commit(&g->type));
    SC_MPI_CHECK(err, MPI_Isend(MPI_BOTTOM, 1, g->type, g->to, tag, p->comm, &g->req));
    g->posted = 1;
    return SC_OK;
}

/* Takes in the asks that have come (a shard out of range is answered "none"). */
static int peer_listen(sc__peer *p, sc_error *err)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        uint64_t w[ASK_WORDS];
        SC_MPI_CHECK(err, MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, p->comm, &flag, &st));
        if (!flag)
            return SC_OK;
        /* Room first: an ask taken in is always answered (close counts on it). */
        give *g = NULL, **grown = sc__vec_grow(p->gives, &p->capgives, p->ngives + 1,
                                               sizeof *grown);
        if (grown)
            p->gives = grown;
        if (!grown || !(g = calloc(1, sizeof *g)))
            return sc__seterr(err, SC_ENOMEM, "rank %d: no memory to answer rank %d",
                              p->rank, st.MPI_SOURCE);
        int m = MPI_Recv(w, ASK_WORDS, MPI_UINT64_T, st.MPI_SOURCE, TAG_ASK, p->comm,
                         MPI_STATUS_IGNORE);
        if (m != MPI_SUCCESS) {
            free(g);
            return sc__mpi_err(err, m, "MPI_Recv of an ask", __FILE__, __LINE__);
        }
        p->gives[p->ngives++] = g;
        p->got_from[st.MPI_SOURCE]++;
        g->shard = w[0], g->epoch = w[1], g->seq = w[2], g->to = st.MPI_SOURCE;
        g->type = MPI_DATATYPE_NULL, g->req = MPI_REQUEST_NULL;
    }
}

/* 1 when `g` is done with (sent, its mapping and type freed), 0 if not yet, < 0 an error. */
static int peer_check_give(sc__peer *p, give *g, sc_error *err)
{
    int done = 0, valid = g->shard < p->ds->nshards;
    if (!g->posted) {
        int have = valid ? sc__cache_map_node(p->cache, g->shard, &g->m) : 0;
        if (have < 0 || (!have && valid && p->ended_to <= g->epoch))
            return 0; /* its entry is being written, or it may yet read it in that epoch */
        return peer_answer(p, g, have, err);
    }
    SC_MPI_CHECK(err, MPI_Test(&g->req, &done, MPI_STATUS_IGNORE));
    if (done) {
        MPI_Type_free(&g->type);
        sc__cache_unmap(&g->m);
    }
    return done;
}

/* ---- both ---------------------------------------------------------------------- */

/* Forgets ask i, done with, keeping the others in the order asked. */
static void peer_drop_ask(sc__peer *p, size_t i)
{
    ask *a = p->asks[i];
    if (a->posted) {
        MPI_Wait(&a->send, MPI_STATUS_IGNORE); /* three words, long since sent */
        p->inflight -= HDR_WORDS * sizeof(uint64_t) + a->bytes;
    }
    free(a->buf);
    free(a);
    memmove(&p->asks[i], &p->asks[i + 1], sizeof *p->asks * (p->nasks - i - 1));
    p->nasks--;
}

/* The answers: each sent when it can be, dropped once sent. */
static int peer_pump_gives(sc__peer *p, sc_error *err)
{
    for (size_t i = 0; i < p->ngives;) {
        int done = peer_check_give(p, p->gives[i], err);
        if (done < 0)
            return done;
        if (done) {
            free(p->gives[i]);
            p->gives[i] = p->gives[--p->ngives];
        } else {
            i++;
        }
    }
    return SC_OK;
}

/*
 * The asks, in the order asked (the order the producers will want them):
 * those posted (a prefix) checked, then more posted within the bound.
 */
static int peer_pump_asks(sc__peer *p, sc_error *err)
{
    for (size_t i = 0; i < p->nasks;) {
        ask *a = p->asks[i];
        int was = a->posted, r = was ? peer_check_ask(p, a, err) : peer_post_ask(p, a, err);
        if (r < 0)
            return r;
        if (!was && !r)
            break; /* the bound: the rest wait for room */
        if (!was || !r) { /* posted now, or not answered yet */
            i++;
            continue;
        }
        peer_drop_ask(p, i);
    }
    return SC_OK;
}

/* Receives the replies to withdrawn asks that have come, and drops them. */
static int peer_drain_lost(sc__peer *p, sc_error *err)
{
    for (size_t i = 0; i < p->nlost;) {
        int flag = 0, n = 0;
        MPI_Status st;
        SC_MPI_CHECK(err, MPI_Iprobe(p->lost[i].from, p->lost[i].tag, p->comm, &flag, &st));
        if (!flag) {
            i++;
            continue;
        }
        SC_MPI_CHECK(err, MPI_Get_count(&st, MPI_BYTE, &n));
        void *junk = malloc((size_t)n + 1);
        if (!junk)
            return sc__seterr(err, SC_ENOMEM, "rank %d: no memory to drain a reply", p->rank);
        int m = MPI_Recv(junk, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, p->comm, MPI_STATUS_IGNORE);
        free(junk);
        if (m != MPI_SUCCESS)
            return sc__mpi_err(err, m, "MPI_Recv of a withdrawn ask's reply", __FILE__, __LINE__);
        p->lost[i] = p->lost[--p->nlost];
    }
    return SC_OK;
}

int sc__peer_pump(sc__peer *p, sc_error *err)
{
    /*
     * On one node no rank asks (sc__peer_want asks only across nodes), and
     * every probe for an ask costs the training thread: where MPI yields
     * when idle (more ranks than cores), each gave the core away for
     * milliseconds (docs/ownership.md, "Across nodes").
     */
    if (!p || !p->apart)
        return SC_OK;
    int rc = peer_listen(p, err);
    if (rc == SC_OK)
        rc = peer_pump_gives(p, err);
    if (rc == SC_OK)
        rc = peer_pump_asks(p, err);
    if (rc == SC_OK)
        rc = peer_drain_lost(p, err);
    return rc;
}

void sc__peer_ended(sc__peer *p, uint64_t epoch)
{
    if (p && p->ended_to <= epoch)
        p->ended_to = epoch + 1;
}

uint64_t sc__peer_received(const sc__peer *p, uint64_t epoch)
{
    const struct received *r = p ? &p->received[epoch % PEER_EPOCHS] : NULL;
    return r && r->epoch == epoch ? r->bytes : 0;
}

int sc__peer_pending(const sc__peer *p, uint64_t epoch)
{
    int n = 0;
    for (size_t i = 0; p && i < p->nasks; i++)
        n += p->asks[i]->epoch + 1 == epoch;
    return n;
}

int sc__peer_give_up(sc__peer *p, uint64_t epoch, sc_error *err)
{
    int n = 0;
    for (size_t i = 0; p && i < p->nasks;) {
        if (epoch != UINT64_MAX && p->asks[i]->epoch + 1 != epoch) {
            i++;
            continue;
        }
        int gone = peer_withdraw(p, p->asks[i], err);
        if (gone < 0)
            return gone;
        n += gone;
        peer_drop_ask(p, i);
    }
    if (n && epoch != UINT64_MAX)
        sc__log(p->o.log_level, SC__LOG_WARN, p->rank,
                "epoch %llu: %d shards from other nodes did not come in time; reading them "
                "from the source", (unsigned long long)epoch, n);
    return SC_OK;
}

/* Every ask any rank sent to this one has come (owed[j] from rank j). */
static int peer_all_asked(const sc__peer *p, const uint64_t *owed)
{
    for (int j = 0; j < p->size; j++)
        if (p->got_from[j] != owed[j])
            return 0;
    return 1;
}

/*
 * The last exchange, collective: every ask any rank sent is received and
 * answered ("none" at worst), every reply received (a withdrawn ask's
 * drained), so that no message outlives the communicator: a freed
 * communicator's context is reused by the next one made, where a stale
 * reply would match a new receive.  Asks never sent are dropped.
 */
static int peer_finish(sc__peer *p, sc_error *err)
{
    p->ended_to = UINT64_MAX;
    int rc = sc__peer_give_up(p, UINT64_MAX, err); /* nothing is filled at close */
    uint64_t *owed = malloc(sizeof *owed * (size_t)p->size);
    if (rc == SC_OK && !owed)
        rc = sc__seterr(err, SC_ENOMEM, "rank %d: no memory to close", p->rank);
    int m = MPI_Alltoall(p->sent_to, 1, MPI_UINT64_T, owed ? owed : p->got_from, 1,
                         MPI_UINT64_T, p->comm);
    if (rc == SC_OK && m != MPI_SUCCESS)
        rc = sc__mpi_err(err, m, "MPI_Alltoall of the asks sent", __FILE__, __LINE__);
    uint64_t t0 = sc__clock_ns();
    while (rc == SC_OK && (p->ngives || p->nlost || !peer_all_asked(p, owed))) {
        rc = sc__peer_pump(p, err);
        if (rc == SC_OK && 1e-9 * (double)(sc__clock_ns() - t0) > p->o.timeout_s)
            rc = sc__seterr(err, SC_EMPI, "rank %d: transfers between nodes still open after "
                            "%.0f s at close (another rank stopped answering)", p->rank,
                            p->o.timeout_s);
    }
    free(owed);
    return rc;
}

void sc__peer_close(sc__peer *p)
{
    if (!p)
        return;
    sc_error err = SC_ERROR_INIT;
    if (p->ready && peer_finish(p, &err) != SC_OK)
        sc__log(p->o.log_level, SC__LOG_WARN, p->rank, "closing peer transfers: %s", err.msg);
    for (size_t i = 0; i < p->nasks; i++) { /* only after an error */
        ask *a = p->asks[i];
        sc__cache_unreserve(p->cache, a->shard);
        if (!a->posted) { /* a posted one's buffers are MPI's: left, not freed */
            free(a->buf);
            free(a);
        }
    }
    for (size_t i = 0; i < p->ngives; i++) /* likewise: posted sends keep their buffers */
        if (!p->gives[i]->posted) {
            sc__cache_unmap(&p->gives[i]->m);
            free(p->gives[i]);
        }
    if (p->comm != MPI_COMM_NULL)
        MPI_Comm_free(&p->comm);
    free(p->asks);
    free(p->gives);
    free(p->lost);
    free(p->sent_to);
    free(p->got_from);
    free(p->node_of);
    free(p);
}
