#!/usr/bin/env bash
# Tracing end to end: a 4-rank job with SC_TRACE writes one valid Chrome
# trace per rank; merge keeps every event; summary and plot work, and the
# plot renders in headless Chromium as a picture, not a blank page; an
# artificially slow stage (SC_FAULT=slow:cache_read) is named as the
# bottleneck; a full ring drops and counts events without failing the job;
# SC_TRACE on some ranks only is refused; a rank file cut short (a dead
# rank) still merges up to where it ends.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
train=$SC_BUILD_DIR/bin/train
d=$SC_T_TMP
mpi=("$MPIEXEC" -n 4 --oversubscribe)
"$SC_BIN" make-dataset --out "$d/data.h5" --samples 4096 --shape 3x16x16 --labels 10 \
    --seed 2 >/dev/null
export SC_SOURCE=$d/data.h5 SC_CACHE_DIR=$d/cache SC_SHARD_SIZE=32 SC_BATCH_SIZE=32 \
    SC_SHUFFLE=sticky SC_SEED=9

# events FILE: the event count `trace check` reports.
events() { "$SC_BIN" trace check "$1" | sed -n 's/.*valid JSON, \([0-9]*\) events.*/\1/p'; }

mkdir -p "$d/t1"
expect_ok "traced job runs" "^exactly-once: ok" env SC_TRACE="$d/t1/job" "${mpi[@]}" "$train" --epochs 2
total=0
for r in 0 1 2 3; do
    f=$d/t1/job.rank$r.json
    n=$(events "$f")
    if [ -n "$n" ] && [ "$n" -gt 0 ]; then total=$((total + n)); pass "rank $r trace is valid JSON ($n events)"
    else failed "rank $r trace"; "$SC_BIN" trace check "$f"; fi
done
expect_ok "merge" "^merged $total events from 4 files \(4 ranks\)" \
    "$SC_BIN" trace merge "$d/t1" -o "$d/job.json"
[ "$(events "$d/job.json")" = "$total" ] && pass "merge keeps every event ($total)" \
    || failed "merged file has $(events "$d/job.json") events, ranks had $total"
out=$("$SC_BIN" trace summary "$d/job.json" 2>&1)
# shards/batch: 32-sample batches from a 32-shard share of 32-sample shards
# (an auto window spans it) meet about 20 shards; 1 would mean no shuffle.
for want in "^trace .*: 4 ranks, 2 epochs" "^[0-3] +[0-9.]+ +[0-9.]+%" "^job " \
    "shards/batch" "^[0-3] +([^ ]+ +){5}(1[5-9]|2[0-9])\.[0-9] " \
    "^shuffle/assembly +[0-9.]+%" "^epoch end spread:" "^stragglers: " "^(bottleneck|verdict): "; do
    grep -Eq -- "$want" <<<"$out" && pass "summary: /$want/" || { failed "summary lacks /$want/"; echo "$out"; }
done
expect_ok "plot" "^wrote .*job.svg: [0-9]+ lanes" "$SC_BIN" trace plot "$d/job.json" -o "$d/job.svg"
grep -q "<rect " "$d/job.svg" && grep -q "</svg>" "$d/job.svg" && pass "plot is an SVG with shapes" \
    || failed "plot is not an SVG"

# The picture, rendered by a browser: enough non-white pixels to be a plot.
if command -v chromium >/dev/null; then
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$d/chrome" --window-size=1200,400 --screenshot="$d/job.png" \
        "file://$d/job.svg" >"$d/chrome.log" 2>&1
    ink=$(python3 "$(dirname "$0")/png_ink.py" "$d/job.png" 2>&1)
    awk -v p="${ink:-0}" 'BEGIN { exit !(p > 1.0) }' 2>/dev/null \
        && pass "Chromium renders the plot ($ink% of pixels drawn)" \
        || { failed "the rendered plot looks blank: '$ink'"; tail -5 "$d/chrome.log"; }
else
    failed "chromium is not installed (scripts/test installs Debian's chromium)"
fi

# A slow stage, on purpose: the summary must name it.
"${mpi[@]}" "$train" --epochs 1 >/dev/null 2>&1   # warm the cache for these shards
mkdir -p "$d/t2"
expect_ok "job with a slow cache read" "^exactly-once: ok" \
    env SC_FAULT=slow:cache_read SC_TRACE="$d/t2/job" "${mpi[@]}" "$train" --epochs 2
"$SC_BIN" trace merge "$d/t2" -o "$d/slow.json" >/dev/null
expect_ok "summary names the slow stage" "^bottleneck: cache read on rank [0-3]" \
    "$SC_BIN" trace summary "$d/slow.json"

# A ring far too small: events are dropped and counted, the job is fine.
mkdir -p "$d/t3"
expect_ok "job with tiny trace rings" "^exactly-once: ok" \
    env SC_TRACE_EVENTS=8 SC_TRACE="$d/t3/job" "${mpi[@]}" "$train" --epochs 2
"$SC_BIN" trace merge "$d/t3" -o "$d/small.json" >/dev/null
dropped=$("$SC_BIN" trace check "$d/small.json" | sed -n 's/.*, \([0-9]*\) dropped$/\1/p')
[ "${dropped:-0}" -gt 0 ] && pass "overflow counted ($dropped dropped)" || failed "no drops counted"
expect_ok "summary says so" "events were dropped" "$SC_BIN" trace summary "$d/small.json"

expect_fail "SC_TRACE on some ranks only is refused" "SC_TRACE is (set|unset) here but not on every rank" \
    "$MPIEXEC" --oversubscribe -n 1 env SC_TRACE="$d/t4" "$train" --epochs 1 : -n 1 "$train" --epochs 1

# A rank that died mid-write: its file ends inside an event.
cp "$d/t1/job.rank1.json" "$d/cut.rank1.json"
half=$(( $(wc -l <"$d/cut.rank1.json") / 2 ))
truncate -s $(( $(head -n "$half" "$d/cut.rank1.json" | wc -c) + 20 )) "$d/cut.rank1.json"
mkdir -p "$d/t5" && mv "$d/cut.rank1.json" "$d/t5/"
out=$("$SC_BIN" trace merge "$d/t5" -o "$d/cut.json" 2>&1)
grep -q "ends mid-event" <<<"$out" && grep -q "^merged [1-9][0-9]* events" <<<"$out" \
    && [ -n "$(events "$d/cut.json")" ] && pass "a cut file merges up to its last whole event" \
    || { failed "cut file"; echo "$out"; }
expect_fail "not a trace is refused" "not valid JSON" "$SC_BIN" trace summary "$d/data.h5"
finish
