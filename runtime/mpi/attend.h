/*
 * attend.h - whether a one-sided window's atomics need their target rank
 * inside MPI to complete.
 *
 * The ownership ledger's claims are atomics on other ranks' words.  Where
 * the network or shared memory carries them, a claim completes while its
 * target trains; where they travel as messages (osc/ucx and osc/pt2pt over
 * TCP, osc/pt2pt even on one host), the target answers only from inside
 * MPI, and the ledger must run MPI's progress on every batch.  Running it
 * where it is not needed costs the training thread: with more ranks than
 * cores, each probe that finds nothing gives the core away
 * (docs/ownership.md, "Across nodes").
 */
#ifndef SC_ATTEND_H
#define SC_ATTEND_H

#include <stdint.h>

#include <mpi.h>

#include "error.h"

/*
 * *attended: 1 where an atomic on another rank's word of `win` may wait
 * for that rank to enter MPI, 0 where it is known not to.  Across nodes it
 * is 1; on one host it is tried once, on rank 1's two words at `at` (0 on
 * entry; base: this rank's window memory, the window locked for all).  A
 * try too slow, failed, or under the separate memory model gives 1, which
 * is only slower.  Collective over comm, the window's group; every rank
 * enters each collective whatever failed, and all return the same status.
 */
int sc__win_attended(MPI_Comm comm, MPI_Win win, uint32_t *base, MPI_Aint at, int *attended,
                     sc_error *err);

#endif /* SC_ATTEND_H */
