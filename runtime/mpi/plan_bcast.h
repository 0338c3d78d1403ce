/*
 * plan_bcast.h - everything shardcache says over MPI about plans.
 *
 * Rank 0 computes an epoch plan and broadcasts it with non-blocking
 * collectives (MPI_Ibcast of a small header, then of the payload), so that
 * the plan for epoch e+1 can be in flight while epoch e runs.  Every rank
 * decodes what arrives and checks it against its own inputs before using
 * it.  This module must never block inside sc__plan_bcast_start/test, and
 * must never leave a collective half-posted: if rank 0 cannot compute the
 * plan, it still broadcasts a header saying so, so that no rank hangs.
 */
#ifndef SC_PLAN_BCAST_H
#define SC_PLAN_BCAST_H

#include "shardcache/plan_share.h"

typedef struct sc__plan_bcast {
    MPI_Comm comm;         /* headers go here (not owned) */
    MPI_Comm data;         /* payloads go here (not owned) */
    MPI_Datatype word;     /* 8 bytes, uninterpreted: the wire is little-endian */
    int root, rank, stage; /* idle, header posted, payload posted, done */
    uint64_t head[4];      /* payload bytes (0: root failed), hash (closing: epochs
                              begun), -status, epoch */
    unsigned char *buf;    /* non-root: received payload; root: the plan's wire */
    size_t len;
    MPI_Request req[2];
    const sc_plan *plan;   /* root: the plan being sent (must outlive the bcast) */
    struct sc__plan_bcast *after; /* the broadcast started just before, or NULL */
} sc__plan_bcast;

/*
 * Posts the broadcast.  On the root, `plan` is the plan to send, or NULL
 * with `root_status` saying why there is none.  `epoch` names the epoch in
 * messages on every rank.
 *
 * Ordering: MPI matches non-blocking collectives by the order they are
 * posted on a communicator.  The root posts a payload at start, the others
 * when its header arrives, so with several broadcasts in flight the headers
 * and payloads travel on two communicators (`comm`, `data`), and `after`
 * names the broadcast started just before this one (NULL if none is in
 * flight): a payload is never posted before the previous one, whatever
 * order the caller tests or finishes them in.  `after` must stay in memory
 * until this broadcast is finished.  With one broadcast in flight at a time
 * `comm` and `data` may be the same communicator.
 */
int sc__plan_bcast_start(sc__plan_bcast *b, sc__plan_bcast *after,
                         MPI_Comm comm, MPI_Comm data, int root,
                         const sc_plan *plan, int root_status, uint64_t epoch,
                         sc_error *err);

/*
 * The root's closing word, posted where the broadcast of `epoch` would be:
 * no plan, and `begun`, the epochs the root began (the last one's number
 * plus one; 0: none), so that a rank still waiting can say how far the root
 * went, not which broadcast told it.
 */
int sc__plan_bcast_closing(sc__plan_bcast *b, sc__plan_bcast *after, MPI_Comm comm,
                           MPI_Comm data, int root, uint64_t begun, uint64_t epoch,
                           sc_error *err);

/* Makes progress without blocking; *done is 1 once the payload is here. */
int sc__plan_bcast_test(sc__plan_bcast *b, int *done, sc_error *err);

/*
 * Waits for the broadcast, decodes it (non-root) and checks it against
 * `expect` on this rank.  On the root *out is a new reference to nothing:
 * the root keeps its own plan, and *out is set to NULL.
 */
int sc__plan_bcast_finish(sc__plan_bcast *b, const sc_plan_params *expect,
                          sc_plan **out, sc_error *err);

#endif /* SC_PLAN_BCAST_H */
