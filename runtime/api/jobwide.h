/*
 * jobwide.h - the settings every rank of a job must share, checked at open.
 */
#ifndef SC_JOBWIDE_H
#define SC_JOBWIDE_H

#include <mpi.h>

#include "shardcache.h"

/*
 * Collective: SC_OK when every rank of comm has the same job-wide settings
 * (seed, batch size, shuffle, remainder, shard size, fields, decode, ...);
 * else SC_EINVAL on every rank, naming the first rank that differs from
 * rank 0, the setting and both values.  (A mismatch used to surface at the
 * first epoch's begin, as a plan "with seed 0" a rank did not expect.)
 */
int sc__jobwide_check(MPI_Comm comm, const sc_config *cfg, sc_error *err);

#endif /* SC_JOBWIDE_H */
