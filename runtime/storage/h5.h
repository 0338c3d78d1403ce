/*
 * h5.h - the HDF5 boundary: every HDF5 call in shardcache goes through here.
 *
 * Debian's parallel HDF5 is built without thread safety, and the stream
 * module reads from producer threads, so every HDF5 call is made holding
 * one process-wide lock (sc__h5_lock); that lock is the one piece of
 * global mutable state in the library besides the trace clock.  While it
 * is held, HDF5's automatic error printing is off, so that a truncated or
 * foreign file yields one sc_error naming file and dataset instead of a
 * page of HDF5 stack on the user's terminal; the innermost HDF5 message is
 * kept in that sc_error.  This module must never leave the lock held on
 * return, and must never print.
 */
#ifndef SC_H5_H
#define SC_H5_H

#include <hdf5.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"

/* Whether this thread holds the HDF5 lock (asserted where a caller must). */
int sc__h5_held(void);
void sc__h5_lock(void);
void sc__h5_unlock(void);

/*
 * Formats err as SC_EHDF5 (or `code`) with the given context and HDF5's own
 * innermost message appended.  Call with the lock held, right after the
 * failing call.
 */
int sc__h5_err(sc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * An HDF5 type in words, for messages: "a 2-byte float (float16)", "a
 * variable-length sequence of uint8", "a fixed-length string of 8 bytes",
 * "a compound of 3 members", ...  Never fails; writes at most n bytes.
 */
void sc__h5_type_words(hid_t type, char *buf, size_t n);

/*
 * The dtype of an HDF5 file type, or SC__DT_INVALID when unsupported.  A
 * fixed-length string is SC__DT_U8: its width is one more dimension.
 */
sc__dtype sc__h5_dtype(hid_t type);
/* A fixed-length string type's width in bytes; 0 for any other type. */
size_t sc__h5_string_width(hid_t type);
/*
 * The memory type that reads a field of file type `file_type` and dtype dt
 * into the bytes shardcache delivers (this machine's byte order), or that
 * writes dt when file_type is negative.  The caller closes it.
 */
hid_t sc__h5_mem_type(hid_t file_type, sc__dtype dt);

/*
 * Where dataset d's data lies in its file when HDF5 keeps it there as is:
 * contiguous, allocated, in the file itself (not external) and `bytes`
 * long; else UINT64_MAX.  For reads outside HDF5 and its lock (pread).
 * The caller holds the lock.
 */
uint64_t sc__h5_raw_offset(hid_t d, uint64_t bytes);

#endif /* SC_H5_H */
