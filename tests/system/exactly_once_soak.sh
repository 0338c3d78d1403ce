#!/usr/bin/env bash
# The exactly-once soak (ctest label "soak"): SOAK_RUNS randomized clean
# jobs on the real loader over 1..8 ranks, checked by the runtime and by
# `shardcache verify`;
# then each injected fault must be caught, jobs killed at random points
# and resumed on random numbers of ranks (half of them killed again inside
# the epoch they resumed, and resumed once more) must stay exactly-once
# (their audit trails checked together by `shardcache verify --union`), and a
# skewed (epoch-ahead) run must pass.  The last line is "N passed, N failed".
. "$(dirname "$0")/lib.sh"
soak=$1
runs=${SOAK_RUNS:-${2:-200}}
seed=${SC_TEST_SEED:-$(date +%s)}
echo "# soak seed $seed, $runs jobs"
mpi=("$MPIEXEC" -n 8 --oversubscribe)
out=$("${mpi[@]}" "$soak" --jobs "$runs" --seed "$seed" --dir "$SC_T_TMP" --verify "$SC_BIN" 2>&1)
tail -n 1 <<<"$out" | grep -q "^$runs passed, 0 failed$" && pass "$runs clean jobs exactly-once" \
    || { failed "clean jobs"; grep -v " ok $" <<<"$out" | tail -20; }
for fault in plan-seed own-plan stale-plan dup-shard skip-shard world fingerprint; do
    mkdir -p "$SC_T_TMP/$fault"
    out=$("${mpi[@]}" "$soak" --jobs 12 --seed "$seed" --dir "$SC_T_TMP/$fault" --fault "$fault" 2>&1)
    tail -n 1 <<<"$out" | grep -q "^12 passed, 0 failed$" && pass "fault $fault caught in 12 jobs" \
        || { failed "fault $fault"; tail -15 <<<"$out"; }
done
mkdir -p "$SC_T_TMP/resume"
out=$("${mpi[@]}" "$soak" --jobs 40 --seed "$seed" --dir "$SC_T_TMP/resume" --fault resume --verify "$SC_BIN" 2>&1)
tail -n 1 <<<"$out" | grep -q "^40 passed, 0 failed$" \
    && pass "40 jobs killed at random points and resumed (some twice) on random rank counts stay exactly-once" \
    || { failed "resume"; grep -v " ok $" <<<"$out" | tail -15; }
mkdir -p "$SC_T_TMP/skew"
out=$("${mpi[@]}" "$soak" --jobs 12 --seed "$seed" --dir "$SC_T_TMP/skew" --fault skew 2>&1)
tail -n 1 <<<"$out" | grep -q "^12 passed, 0 failed$" && pass "ranks an epoch apart stay exactly-once" \
    || { failed "skew"; tail -15 <<<"$out"; }
finish
