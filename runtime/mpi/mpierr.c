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
