/*
 * mpierr.h - the MPI boundary: an MPI error code becomes SC_EMPI with
 * MPI's own text, the call and where it was made.  Every module that calls
 * MPI includes this; nothing below the mpi layer may.
 */
#ifndef SC_MPIERR_H
#define SC_MPIERR_H

#include <mpi.h>

#include "error.h"

/* The MPI error string, with file and line, as SC_EMPI. */
int sc__mpi_err(sc_error *err, int mpi_rc, const char *call, const char *file,
                int line);

#define SC_MPI_CHECK(err, call)                                              \
    do {                                                                     \
        int sc__mpi_rc = (call);                                             \
        if (sc__mpi_rc != MPI_SUCCESS)                                       \
            return sc__mpi_err((err), sc__mpi_rc, #call, __FILE__, __LINE__); \
    } while (0)

#endif /* SC_MPIERR_H */
