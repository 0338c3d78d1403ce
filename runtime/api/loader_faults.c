/*
 * loader_faults.c - the loader's test-only faults (SC_FAULT, SC_FAULT_RANK,
 * SC_FAULT_EPOCH): a rank that plans or runs another plan than rank 0's,
 * reads a shard twice or never, or makes an MPI call MPI refuses, so that
 * the tests can see the loader catch each.  Compiled only into testing
 * builds (SC_TESTING, CMakeLists.txt); release builds get loader_state.h's
 * no-op stand-ins.
 */
#include <stdlib.h>

#include "fault.h"
#include "loader_state.h"
#include "mpierr.h"
#include "plan_state.h"

#ifndef SC_TESTING
#error "loader_faults.c is compiled only into testing builds (SC_TESTING)"
#endif

/* Test-only faults (SC_FAULT), read once at open: one bit each. */
enum {
    LF_PLAN_SEED = 1u << 0,   /* this rank plans with another seed */
    LF_WORLD = 1u << 1,       /* ... another world size */
    LF_FINGERPRINT = 1u << 2, /* ... another dataset fingerprint */
    LF_OWN_PLAN = 1u << 3,    /* runs a plan it made itself, not rank 0's */
    LF_STALE_PLAN = 1u << 4,  /* runs the previous epoch's plan */
    LF_DUP_SHARD = 1u << 5,   /* reads its first shard twice */
    LF_SKIP_SHARD = 1u << 6,  /* never reads its last shard */
    LF_MPI_ERROR = 1u << 7,   /* an MPI call on the loader's communicator fails */
};


/* A fault aimed at this rank and epoch (SC_FAULT_RANK, SC_FAULT_EPOCH). */
static int loader_fault(const sc_loader *ld, unsigned fault, uint64_t epoch)
{
    return (ld->fault.mask & fault) && ld->rank == ld->fault.rank && epoch == ld->fault.epoch;
}

void sc__loader_read_faults(sc_loader *ld)
{
    ld->fault.rank = ld->size - 1;
    ld->fault.epoch = 1;
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"plan-seed", LF_PLAN_SEED},   {"world", LF_WORLD},
                 {"fingerprint", LF_FINGERPRINT}, {"own-plan", LF_OWN_PLAN},
                 {"stale-plan", LF_STALE_PLAN}, {"dup-shard", LF_DUP_SHARD},
                 {"skip-shard", LF_SKIP_SHARD},  {"mpi-error", LF_MPI_ERROR}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (sc__fault(names[i].name))
            ld->fault.mask |= names[i].bit;
    const char *fr = getenv("SC_FAULT_RANK"), *fe = getenv("SC_FAULT_EPOCH");
    if (fr && *fr)
        ld->fault.rank = atoi(fr);
    if (fe && *fe)
        ld->fault.epoch = strtoull(fe, NULL, 10);
}

/* Plans as if this rank had its own seed, world size or dataset. */
void sc__loader_fault_params(const sc_loader *ld, uint64_t epoch, sc_plan_params *p)
{
    if (loader_fault(ld, LF_PLAN_SEED, epoch))
        p->seed++; /* as if this rank had its own SC_SEED */
    if (loader_fault(ld, LF_WORLD, epoch))
        p->world_size++;
    if (loader_fault(ld, LF_FINGERPRINT, epoch))
        p->fingerprint++;
}

/*
 * The plan-level faults, done on purpose: this rank runs another plan than
 * the one rank 0 broadcast (`prev`: the previous epoch's record, or NULL).
 * *use becomes it; SC_OK or why it failed.
 */
int sc__loader_fault_plan(const sc_loader *ld, sc__loader_rec *r, const sc__loader_rec *prev,
                          const sc_plan_params *p, const sc_plan **use, sc_error *err)
{
    int rc = SC_OK;
    if (loader_fault(ld, LF_OWN_PLAN, r->epoch)) {
        /* The classic bug: this rank shuffles with its own RNG. */
        sc_plan_params q = *p;
        q.seed ^= 0x9e3779b97f4a7c15ULL;
        rc = sc_plan_create(&q, NULL, &r->extra, err);
        if (rc == SC_OK) {
            sc_plan_free(r->plan);
            *use = r->plan = r->extra;
            r->extra = NULL;
        }
    }
    if (rc == SC_OK && loader_fault(ld, LF_STALE_PLAN, r->epoch) && prev && prev->plan) {
        /* Still on the previous epoch's assignment at the handoff. */
        size_t len;
        const void *wire = sc__plan_wire(prev->plan, &len);
        if ((rc = sc_plan_decode(wire, len, &r->extra, err)) == SC_OK) {
            r->extra->info.epoch = r->epoch;
            *use = r->extra;
        }
    }
    return rc;
}

/*
 * An MPI call MPI itself refuses (a negative count), on the loader's own
 * communicator: with MPI's default handler the job would abort here; the
 * loader's returns the error, which must become SC_EMPI with MPI's text.
 */
int sc__loader_fault_mpi(const sc_loader *ld, uint64_t epoch, sc_error *err)
{
    if (loader_fault(ld, LF_MPI_ERROR, epoch))
        SC_MPI_CHECK(err, MPI_Send(NULL, -1, MPI_BYTE, 0, 0, ld->comm));
    return SC_OK;
}

unsigned sc__loader_fault_sched(const sc_loader *ld, uint64_t epoch)
{
    return (loader_fault(ld, LF_DUP_SHARD, epoch) ? SC__SCHED_DUP_SHARD : 0) |
           (loader_fault(ld, LF_SKIP_SHARD, epoch) ? SC__SCHED_SKIP_SHARD : 0);
}

uint64_t sc__loader_ckpt_max_pieces(void)
{
    /* A small bound, so that the tests reach it with a few batches. */
    return sc__fault("ckpt-2-pieces") ? 2 : SC__CKPT_MAX_PIECES;
}
