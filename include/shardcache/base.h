/*
 * shardcache/base.h - what every part of the API shares: the export macro,
 * the status codes and their texts, sc_error, the limits of names and
 * shapes, and what this build can do.
 *
 * No MPI, no HDF5: the pure layers of the library (plans, schedules) and
 * tools that only read shardcache's file formats include this alone.
 * A training loop includes <shardcache.h>, which includes this.
 */
#ifndef SHARDCACHE_BASE_H
#define SHARDCACHE_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SC_API __attribute__((visibility("default")))
#else
#define SC_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

/*
 * One list makes the enum and sc_strerror(), so that a code and its text
 * can never drift apart.  Codes are stable across releases: append only,
 * and a retired code's number is never given to another (-10 was
 * SC_ENCCL, which nothing returned: the library makes no NCCL call).
 */
#define SC_STATUS_LIST(X)                                                    \
    X(OK, 0, "success")                                                      \
    X(END_OF_EPOCH, 1, "end of epoch: no more batches")                      \
    X(EINVAL, -1, "invalid argument")                                        \
    X(ENOMEM, -2, "out of memory")                                           \
    X(EOVERFLOW, -3, "value too large for its type")                         \
    X(EPLAN, -4, "epoch plan invalid or not the same on every rank")         \
    X(EFORMAT, -5, "malformed, truncated or corrupted data")                 \
    X(EVERSION, -6, "unsupported format version")                            \
    X(EMPI, -7, "MPI call failed")                                           \
    X(EHDF5, -8, "HDF5 call failed")                                         \
    X(ECUDA, -9, "CUDA call failed")                                         \
    X(EIO, -11, "I/O error")                                                 \
    X(ECHECKSUM, -12, "checksum mismatch")                                   \
    X(EOWNERSHIP, -13, "shard owned by another rank")                        \
    X(ENOTSUP, -14, "not supported by this build")                          \
    X(ETRANSFORM, -15, "a transform or augmentation callback failed")

typedef enum sc_status {
#define SC__STATUS_ENUM(name, value, text) SC_##name = (value),
    SC_STATUS_LIST(SC__STATUS_ENUM)
#undef SC__STATUS_ENUM
} sc_status;

/* The text of a status code; never NULL, also for unknown codes. */
SC_API const char *sc_strerror(int code);

/* The symbolic name of a status code ("SC_EPLAN"); never NULL. */
SC_API const char *sc_status_name(int code);

/*
 * What went wrong, for calls that have no handle to keep it in.  Every such
 * call accepts NULL when the caller only wants the status.
 */
#define SC_ERROR_MSG_MAX 512
typedef struct sc_error {
    int code;                   /* the status the call returned */
    char msg[SC_ERROR_MSG_MAX]; /* one or more sentences, never empty on error */
} sc_error;

#define SC_ERROR_INIT {.code = SC_OK, .msg = ""}

/* ------------------------------------------------------------------------ */
/* Limits                                                                   */
/* ------------------------------------------------------------------------ */

#define SC_PATH_MAX 4096  /* a path in a setting or a message */
#define SC_MAX_FIELDS 16  /* fields in a dataset and in a batch */
#define SC_MAX_DIMS 8     /* dimensions of one sample of a field */

/* ------------------------------------------------------------------------ */
/* Build features                                                           */
/* ------------------------------------------------------------------------ */

typedef struct sc_features {
    int cuda;          /* 1 when built with the CUDA runtime */
    int nccl;          /* 1 when built with NCCL */
    int cuda_devices;  /* devices visible now; 0 with no GPU or no CUDA */
    int nccl_version;  /* ncclGetVersion(), 0 without NCCL */
    int testing;       /* 1 when fault-injection hooks are compiled in */
    /* appended (room taken from reserved[]) */
    int jpeg;          /* 1 when built with libjpeg-turbo: SC_DECODE=jpeg works */
    int reserved[7];   /* room for later fields: the size stays */
} sc_features;

/*
 * What this build of the library can do.  Finding no GPU is not an error:
 * cuda_devices is 0 and the call returns SC_OK.
 */
SC_API int sc_features_get(sc_features *out);

/* ------------------------------------------------------------------------ */
/* Output files and directories                                             */
/* ------------------------------------------------------------------------ */

/*
 * What the library writes (traces, audit trails, plans, datasets), and its
 * tools and example trainer, is created through these two, safe on a node
 * shared with other users (docs/reliability.md, "Shared nodes"); a
 * program's own outputs can be too.
 *
 * sc_output_open creates `path` for writing, mode 0600, with
 * open(O_CREAT|O_EXCL|O_NOFOLLOW) in its directory: a symlink planted at
 * the name is never followed and no existing file is written into.  This
 * user's own regular file there is replaced (removed, then made anew: a
 * hard link to it elsewhere keeps the old bytes); a symlink, another
 * user's file or anything else is refused with SC_EIO and a message
 * naming it and its owner.  *fd: the descriptor (close-on-exec), the
 * caller's to close; -1 on failure.
 */
SC_API int sc_output_open(const char *path, int *fd, sc_error *err);

/*
 * Makes directory `path` (its parent must exist), mode 0700, or accepts
 * an existing one only if it is a directory, not a symlink, this user's,
 * and neither its group nor others may write it: no one else can then
 * plant, swap or remove what is written there.  SC_EIO naming the
 * directory, its owner or mode otherwise.
 */
SC_API int sc_output_dir(const char *path, sc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_BASE_H */
