#!/usr/bin/env bash
# Runs a libFuzzer target for SECONDS from its seed corpus, then prints one
# line: "fuzz NAME: N executions in S s (E exec/s)" (libFuzzer's final stats).
# usage: run.sh FUZZER SECONDS CORPUS [libFuzzer flags...]
#
# CORPUS (tests/fuzz/corpus/<target>/) holds the committed seeds and every
# input that once crashed the target; they are copied to a scratch corpus,
# so what the run finds stays out of the source tree.  The plan decoder's
# seeds are also real plans, made by the command (SC_BIN).  A crash input is
# kept in $SC_BUILD_DIR/fuzz-artifacts/: add it to CORPUS once fixed.
set -eu
fuzzer=$1 seconds=$2 seeds=$3
shift 3
name=$(basename "$fuzzer")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
if [ -d "$seeds" ]; then
    find "$seeds" -maxdepth 1 -type f -exec cp {} "$work/corpus/" \;
fi
if [ "$name" = fuzz_plan_decode ]; then
    : "${SC_BIN:?}"
    "$SC_BIN" plan --shards 16 --ranks 3 --epochs 1 --save "$work/corpus/global" >/dev/null
    "$SC_BIN" plan --shards 40 --ranks 5 --epochs 2 --mode sticky --exchange 0.3 \
        --remainder pad --save "$work/corpus/sticky" >/dev/null
    "$SC_BIN" plan --shards 1 --ranks 1 --epochs 1 --save "$work/corpus/one" >/dev/null
fi
artifacts=${SC_BUILD_DIR:-$work}/fuzz-artifacts
mkdir -p "$artifacts"
# The target itself is built with ASan+UBSan; leaks count as crashes, and
# an input taking over 10 s is a hang.
rc=0
# A crash exits 1, not libFuzzer's 77: ctest takes 77 for a skip, and a
# crash must fail the test.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -max_len=4096 -print_final_stats=1 \
    -error_exitcode=1 \
    -artifact_prefix="$artifacts/$name-" "$@" "$work/corpus" 2>"$work/log" || rc=$?
cat "$work/log"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
echo "fuzz $name: ${runs:-?} executions, ${rate:-?} exec/s (a ${seconds}-s run)"
if [ "$rc" -ne 0 ]; then
    echo "fuzz $name: FAILED (exit $rc); the input is in $artifacts/" >&2
fi
exit "$rc"
