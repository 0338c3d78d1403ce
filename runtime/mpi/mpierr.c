/*
 * mpierr.c - MPI error codes as statuses and messages.
 */
#include "mpierr.h"

#include <stdio.h>

int sc__mpi_err(sc_error *err, int mpi_rc, const char *call, const char *file,
                int line)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (MPI_Error_string(mpi_rc, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", mpi_rc);
    return sc__seterr(err, SC_EMPI, "%s failed at %s:%d: %s", call, file,
                      line, text);
}

int sc__comm_own(MPI_Comm comm, MPI_Comm *out, int *rank, int *size)
{
    int m = MPI_Comm_dup(comm, out);
    if (m != MPI_SUCCESS) {
        *out = MPI_COMM_NULL; /* undefined after a failure: nothing to free */
        return m;
    }
    m = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    if (m == MPI_SUCCESS && rank)
        m = MPI_Comm_rank(*out, rank);
    if (m == MPI_SUCCESS && size)
        m = MPI_Comm_size(*out, size);
    return m;
}
