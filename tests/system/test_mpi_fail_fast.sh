#!/usr/bin/env bash
# A failing assertion in an MPI test ends the job instead of leaving the
# other ranks in a collective until ctest's timeout: the MPI tests run with
# CMOCKA_TEST_ABORT=1 (tests/CMakeLists.txt), so cmocka prints the failure
# and aborts the rank, and mpirun takes the job down.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
prog=$SC_BUILD_DIR/bin/mpi_fail_fast
ulimit -c 0
start=$(date +%s)
out=$(CMOCKA_TEST_ABORT=1 timeout 120 "$MPIEXEC" -n 3 --oversubscribe "$prog" 2>&1)
rc=$?
secs=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && pass "the job ends, failed (rc $rc, ${secs}s)" \
    || { failed "rc $rc after ${secs}s (124: it hung)"; tail -20 <<<"$out"; }
grep -q "1 != 0x2\|1 != 2" <<<"$out" && pass "the failed assertion is printed" \
    || { failed "no assertion message"; tail -20 <<<"$out"; }
grep -q "CMOCKA_TEST_ABORT=1" "$SC_BUILD_DIR/tests/CTestTestfile.cmake" \
    && pass "the suite's MPI tests run with CMOCKA_TEST_ABORT=1" || failed "MPI tests do not abort on failure"
finish
