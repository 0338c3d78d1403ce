#!/usr/bin/env bash
# The layers of runtime/ (docs/architecture.md): no file includes a header
# from a layer above it, and each layer's compile command refuses what the
# layer must not see (core: no <mpi.h>, no <hdf5.h>).  See layers.py.
set -u
exec python3 "$(dirname "$0")/layers.py" "${SC_SOURCE_DIR:?}" "${SC_BUILD_DIR:?}"
