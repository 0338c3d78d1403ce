/*
 * shardcache/plan_share.h - a plan computed once and broadcast: the one
 * plan call that needs MPI.
 */
#ifndef SHARDCACHE_PLAN_SHARE_H
#define SHARDCACHE_PLAN_SHARE_H

#include <mpi.h>

#include "shardcache/plan.h"

#ifdef __cplusplus
extern "C" {
#endif


/*
 * Rank 0 computes the plan and broadcasts it; every rank decodes it and
 * checks its hash, world size, fingerprint, epoch, seed and mode against
 * its own `params`.  Any mismatch fails on that rank with SC_EPLAN naming
 * the rank and the epoch.  Collective over `comm`.  Non-root ranks need
 * params->shard_sizes only for what they compare, so they may pass the
 * same params as rank 0; `prev` matters on rank 0 only.
 */
SC_API int sc_plan_share(MPI_Comm comm, const sc_plan_params *params,
                         const sc_plan *prev, sc_plan **out, sc_error *err);
#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_PLAN_SHARE_H */
