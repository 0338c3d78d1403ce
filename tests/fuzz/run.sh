#!/usr/bin/env bash
# Runs a libFuzzer target for SECONDS from a seed corpus of real plans.
# usage: run.sh FUZZER SECONDS
set -eu
fuzzer=$1 seconds=$2
: "${SC_BIN:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
"$SC_BIN" plan --shards 16 --ranks 3 --epochs 1 --save "$work/corpus/global" >/dev/null
"$SC_BIN" plan --shards 40 --ranks 5 --epochs 2 --mode sticky --exchange 0.3 \
    --remainder pad --save "$work/corpus/sticky" >/dev/null
"$SC_BIN" plan --shards 1 --ranks 1 --epochs 1 --save "$work/corpus/one" >/dev/null
# The target itself is built with ASan+UBSan; leaks count as crashes.
exec "$fuzzer" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus"
