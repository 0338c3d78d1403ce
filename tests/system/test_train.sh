#!/usr/bin/env bash
# The example trainer end to end, as the demo runs it: a synthetic dataset,
# 4 ranks, 3 sticky epochs, the cache in a temporary directory.  The job
# must print the four summary lines with exactly-once ok, a falling loss and
# a warm cache after epoch 1; a second job on the same cache starts warm;
# the same job through the simulated device has the same losses; bad input
# is refused with a message naming it.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
train=$SC_BUILD_DIR/bin/train
data=$SC_T_TMP/data.h5
expect_ok "make-dataset" "wrote .*8192 samples" \
    "$SC_BIN" make-dataset --out "$data" --samples 8192 --shape 3x16x16 --dtype uint8 \
    --labels 10 --seed 3
export SC_SOURCE=$data SC_CACHE_DIR=$SC_T_TMP/cache SC_SHARD_SIZE=128 SC_BATCH_SIZE=32 \
    SC_SHUFFLE=sticky SC_EXCHANGE=0.1 SC_SEED=5 SC_AUDIT_DIR=$SC_T_TMP/audit
mpi=("$MPIEXEC" -n 4 --oversubscribe)

out=$("${mpi[@]}" "$train" --epochs 3 2>&1); rc=$?
[ "$rc" -eq 0 ] && pass "trainer exits 0" || { failed "trainer exit $rc"; tail -20 <<<"$out"; }
grep -Eq "^exactly-once: ok \(3 epochs, [0-9]+ samples, 0 duplicated, 0 skipped\)$" <<<"$out" \
    && pass "exactly-once line" || { failed "exactly-once line"; tail -8 <<<"$out"; }
read -r first last < <(sed -n 's/^loss: \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' <<<"$out")
awk -v a="${first:-0}" -v b="${last:-0}" 'BEGIN { exit !(b < a && b > 0) }' \
    && pass "loss fell ($first -> $last)" || { failed "loss did not fall"; tail -8 <<<"$out"; }
grep -Eq "^consumer wait: [0-9]+\.[0-9]% of step time$" <<<"$out" && pass "consumer wait line" \
    || failed "consumer wait line"
hit=$(sed -n 's/^cache hit rate after epoch 1: \([0-9.]*\)%$/\1/p' <<<"$out")
# Sticky with 10% exchanged: about 90% of epoch 1+'s shards were read before.
awk -v h="${hit:-0}" 'BEGIN { exit !(h >= 80) }' && pass "cache warm after epoch 1 ($hit%)" \
    || { failed "cache hit rate after epoch 1: '${hit}'"; tail -8 <<<"$out"; }
[ "$(grep -c "^epoch [0-2]: loss .* exactly-once ok$" <<<"$out")" -eq 3 ] \
    && pass "one line per epoch" || failed "per-epoch lines"

# The audit trail agrees, checked by the CLI alone.
expect_ok "verify the audit trail" "^exactly-once: ok \(3 epochs" \
    "$SC_BIN" verify --audit-dir "$SC_T_TMP/audit" --plan-seed 5 --shards 64 --shard-size 128 \
    --batch 32 --mode sticky --exchange 0.1

# A second job on the same nodes starts warm, from its first epoch.
rm -rf "$SC_T_TMP/audit"
out=$("${mpi[@]}" "$train" --epochs 1 2>&1)
grep -q "^epoch 0: .*cache hit rate 100.0%" <<<"$out" && pass "second job warm from epoch 0" \
    || { failed "second job not warm"; tail -5 <<<"$out"; }

# The device path, on the simulated device (testing builds): the same
# batches in the same order, so the same losses to the last digit.
losses() { sed -n 's/^epoch \([0-9]*\): loss \([0-9.]*\),.*exactly-once ok$/\1 \2/p'; }
cpu=$("${mpi[@]}" "$train" --epochs 2 --device cpu 2>&1 | losses)
sim=$(SC_SIM_COPY_US=20 "${mpi[@]}" "$train" --epochs 2 --device sim 2>&1 | losses)
[ -n "$cpu" ] && [ "$(wc -l <<<"$cpu")" -eq 2 ] && [ "$sim" = "$cpu" ] \
    && pass "simulated device: the CPU path's losses ($(tr '\n' ' ' <<<"$sim"))" \
    || failed "simulated device losses '$sim' vs CPU '$cpu'"

# SC_DEVICE is the trainer's too, when --device does not say: no GPU here.
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect_fail "SC_DEVICE=cuda without a GPU is refused, not trained on the CPU" \
        "SC_DEVICE=cuda" env SC_DEVICE=cuda "${mpi[@]}" "$train" --epochs 1
fi

expect_fail "missing source is named" "nope\.h5" \
    env SC_SOURCE="$SC_T_TMP/nope.h5" "${mpi[@]}" "$train" --epochs 1
expect_fail "bad flag value is named" "bad value 'x' for --epochs" \
    "${mpi[@]}" "$train" --epochs x
expect_fail "bad SC_* setting is named" "SC_BATCH_SIZE" \
    env SC_BATCH_SIZE=zero "${mpi[@]}" "$train" --epochs 1
finish
