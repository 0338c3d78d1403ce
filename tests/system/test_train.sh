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

# Order shows in what the model learned: on a class-sorted file (hard,
# overlapping classes), the default shuffle scores a held-out set as well as
# the same samples stored in random order, and reducing the shuffle to
# window 1 (batches of one shard, one class) trains measurably worse, though
# its training loss looks no worse.
sorted=$SC_T_TMP/sorted.h5 random=$SC_T_TMP/random.h5 held=$SC_T_TMP/held.h5
for args in "--out $sorted --sorted" "--out $random" "--out $held --samples 4096 --heldout"; do
    # shellcheck disable=SC2086
    "$SC_BIN" make-dataset --samples 16384 --shape 1x4x4 --noise 255 --seed 3 $args \
        >/dev/null 2>&1 || failed "make-dataset $args"
done
heldout() { # SOURCE WINDOW: the held-out loss after 3 epochs at a high learning rate
    env SC_SOURCE="$1" SC_SHUFFLE_WINDOW="$2" SC_CACHE_DIR="$SC_T_TMP/c-$2-${1##*/}" \
        SC_SHARD_SIZE=256 SC_BATCH_SIZE=64 SC_AUDIT_DIR= SC_SEED=0 \
        "$MPIEXEC" -n 2 --oversubscribe "$train" --epochs 3 --lr 0.5 --eval "$held" 2>&1 |
        sed -n 's/^held-out: loss \([0-9.]*\), accuracy .*/\1/p'
}
one=$(heldout "$sorted" 1) auto=$(heldout "$sorted" auto) rnd=$(heldout "$random" auto)
awk -v one="${one:-0}" -v auto="${auto:-9}" -v rnd="${rnd:-0}" \
    'BEGIN { exit !(one > auto + 0.1 && auto < rnd + 0.02) }' \
    && pass "held-out loss: sorted file window 1 $one, default $auto, random file $rnd" \
    || failed "held-out loss: sorted file window 1 '$one', default '$auto', random file '$rnd'"
"$SC_BIN" make-dataset --out "$SC_T_TMP/small.h5" --samples 64 --shape 1x2x2 >/dev/null 2>&1
expect_fail "--eval of another shape is refused on every rank" \
    "small.h5: needs a uint8 field '/images' of 16 bytes a sample" \
    env SC_SOURCE="$sorted" SC_CACHE_DIR="$SC_T_TMP/c-bad" SC_SHARD_SIZE=256 SC_AUDIT_DIR= \
    "$MPIEXEC" -n 2 --oversubscribe "$train" --epochs 1 --eval "$SC_T_TMP/small.h5"
"$SC_BIN" make-dataset --out "$SC_T_TMP/twenty.h5" --samples 256 --shape 1x4x4 --labels 20 \
    >/dev/null 2>&1
expect_fail "--eval with labels past --classes is refused, not skipped" \
    "twenty.h5: sample [0-9]+ has label 1[0-9], outside 0..9 \(--classes\)" \
    env SC_SOURCE="$sorted" SC_CACHE_DIR="$SC_T_TMP/c-bad" SC_SHARD_SIZE=256 SC_AUDIT_DIR= \
    "$MPIEXEC" -n 2 --oversubscribe "$train" --epochs 1 --eval "$SC_T_TMP/twenty.h5"

expect_fail "missing source is named" "nope\.h5" \
    env SC_SOURCE="$SC_T_TMP/nope.h5" "${mpi[@]}" "$train" --epochs 1
expect_fail "bad flag value is named" "bad value 'x' for --epochs" \
    "${mpi[@]}" "$train" --epochs x
expect_fail "bad SC_* setting is named" "SC_BATCH_SIZE" \
    env SC_BATCH_SIZE=zero "${mpi[@]}" "$train" --epochs 1
finish
