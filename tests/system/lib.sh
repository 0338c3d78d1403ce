# Shared by the system tests: fail loudly with what was expected.
set -u
: "${SC_BIN:?SC_BIN must point at the shardcache binary}"
: "${MPIEXEC:=mpiexec}"
. "$(dirname "${BASH_SOURCE[0]}")/../../launch/ompi-env.sh"
SC_T_PASS=0
SC_T_FAIL=0
SC_T_TMP=$(mktemp -d)
trap 'rm -rf "$SC_T_TMP"' EXIT

pass() { SC_T_PASS=$((SC_T_PASS + 1)); echo "ok - $*"; }
failed() { SC_T_FAIL=$((SC_T_FAIL + 1)); echo "FAIL - $*"; }

# expect_ok NAME PATTERN CMD...: CMD exits 0 and its output matches PATTERN.
expect_ok() {
    local name=$1 pattern=$2 out rc
    shift 2
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -Eq -- "$pattern" <<<"$out"; then pass "$name"
    else failed "$name (rc=$rc, wanted /$pattern/)"; printf '%s\n' "$out" | tail -20; fi
}

# expect_fail NAME PATTERN CMD...: CMD exits non-zero and says PATTERN.
expect_fail() {
    local name=$1 pattern=$2 out rc
    shift 2
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && grep -Eq -- "$pattern" <<<"$out"; then pass "$name"
    else failed "$name (rc=$rc, wanted failure with /$pattern/)"; printf '%s\n' "$out" | tail -20; fi
}

# skip REASON: this machine lacks what the test needs (ctest: skipped, not passed).
skip() { echo "skipped: $*"; exit 77; }

finish() {
    echo "$SC_T_PASS passed, $SC_T_FAIL failed"
    [ "$SC_T_FAIL" -eq 0 ]
}
