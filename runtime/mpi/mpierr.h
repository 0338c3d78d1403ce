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

/*
 * A communicator of the library's own, duplicated from comm, whose errors
 * come back as codes (SC_EMPI with MPI's text) where the caller's default
 * handler would abort the job first; and this rank and the size in it
 * (either may be NULL).  MPI's error code; *out is MPI_COMM_NULL unless made.
 */
int sc__comm_own(MPI_Comm comm, MPI_Comm *out, int *rank, int *size);

#define SC_MPI_CHECK(err, call)                                              \
    do {                                                                     \
        int sc__mpi_rc = (call);                                             \
        if (sc__mpi_rc != MPI_SUCCESS)                                       \
            return sc__mpi_err((err), sc__mpi_rc, #call, __FILE__, __LINE__); \
    } while (0)

#endif /* SC_MPIERR_H */
