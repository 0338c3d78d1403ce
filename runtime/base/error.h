/*
 * error.h - how a failure becomes an sc_error.
 *
 * Every internal function that can fail returns an sc_status and, when the
 * caller handed it an sc_error, fills in a sentence saying what failed and
 * on which epoch, rank, shard or file.  Foreign libraries (MPI, HDF5, CUDA,
 * NCCL) are turned into sc_status right at the call, by the layer that
 * talks to them (mpi/mpierr.h, storage/h5.h, pipeline/device.c), so that
 * their codes never leak past the module that made the call.  This
 * file must never print or abort: reporting is the caller's business.
 */
#ifndef SC_ERROR_H
#define SC_ERROR_H

#include <stdarg.h>

#include "shardcache/base.h"

#if defined(__GNUC__)
#define SC__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SC__PRINTF(a, b)
#endif

/* Records `code` and the formatted message in `err` (may be NULL); returns code. */
int sc__seterr(sc_error *err, int code, const char *fmt, ...) SC__PRINTF(3, 4);
int sc__vseterr(sc_error *err, int code, const char *fmt, va_list ap);

/*
 * Prepends "context: " to the message already in err and returns `code`,
 * the failing call's status: the status is an input, never read back from
 * err, so a caller that passed no sc_error still gets the failure.
 */
int sc__errctx(sc_error *err, int code, const char *fmt, ...) SC__PRINTF(3, 4);

/* Clears err to SC_OK; returns SC_OK. */
int sc__errok(sc_error *err);

#endif /* SC_ERROR_H */
