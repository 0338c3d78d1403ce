"""pytest under mpiexec: every rank runs every test, in the same order.

A failed test on one rank would leave the others waiting in a collective:
the failure is printed with its rank and the job ends (MPI_Abort), so that
a failing MPI test fails, never hangs.  Each test gets a directory shared
by all ranks (rank 0 makes it) and the synthetic dataset.
"""
import os
import shutil
import sys
import tempfile

import pytest
from mpi4py import MPI

COMM = MPI.COMM_WORLD
SAMPLES, SHAPE, CLASSES = 1000, (3, 6, 6), 10


def pytest_runtest_logreport(report):
    if report.failed:
        sys.stderr.write(f"\n[rank {COMM.Get_rank()}] {report.nodeid} failed:\n"
                         f"{report.longreprtext}\n")
        sys.stderr.flush()
        COMM.Abort(1)


@pytest.fixture(scope="session")
def shared_dir():
    path = tempfile.mkdtemp(prefix="sc-pytest-") if COMM.Get_rank() == 0 else None
    path = COMM.bcast(path, root=0)
    yield path
    COMM.Barrier()
    if COMM.Get_rank() == 0:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def dataset(shared_dir):
    """A random image set (h5py: a child MPI process cannot start under
    mpiexec): images uint8 [3,6,6], labels int64."""
    path = os.path.join(shared_dir, "data.h5")
    if COMM.Get_rank() == 0:
        import h5py
        import numpy as np

        rng = np.random.default_rng(4)
        with h5py.File(path, "w") as f:
            f["images"] = rng.integers(0, 256, (SAMPLES,) + SHAPE, dtype=np.uint8)
            f["labels"] = rng.integers(0, CLASSES, SAMPLES, dtype=np.int64)
    COMM.Barrier()
    return path


@pytest.fixture
def cache_dir(shared_dir, request):
    return os.path.join(shared_dir, "cache-" + request.node.name)
