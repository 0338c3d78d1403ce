#!/usr/bin/env bash
# Checkpoint and resume, as a user runs them: a 4-rank training job that
# checkpoints every step is killed mid-epoch (SIGKILL on all ranks right
# after a random step's checkpoint); it is resumed on 4, on 2 and on 3
# ranks, and `shardcache verify --union` over the audit trails of both runs
# finds every epoch exactly once; resumed on 2 ranks and killed again inside
# the epoch it resumed, it is resumed on 3, exactly once over three trails.  A checkpoint with a rank's record missing
# is refused naming it.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
train=$SC_BUILD_DIR/bin/train
d=$SC_T_TMP
"$SC_BIN" make-dataset --out "$d/data.h5" --samples 6000 --shape 3x8x8 --labels 10 --seed 8 \
    >/dev/null 2>&1
export SC_SOURCE=$d/data.h5 SC_CACHE_DIR=$d/cache SC_SHARD_SIZE=50 SC_BATCH_SIZE=16 \
    SC_SHUFFLE=sticky SC_SEED=21 SC_REMAINDER=drop
shape=(--shards 120 --shard-size 50)
# 6000 samples, 4 ranks, batches of 16: 93 steps per epoch; kill inside epoch 1.
kill_at=$((93 + 1 + RANDOM % 90))
mkdir -p "$d/ck"
out=$(SC_AUDIT_DIR=$d/audit1 "$MPIEXEC" -n 4 --oversubscribe "$train" --epochs 3 \
      --checkpoint "$d/ck" --kill-after "$kill_at" 2>&1)
rc=$?
[ "$rc" -ne 0 ] && [ -s "$d/ck/ckpt-r3.bin" ] && pass "4-rank job killed after step $kill_at" \
    || { failed "the job was not killed (rc $rc)"; tail -5 <<<"$out"; }
grep -q "^epoch 0: .*exactly-once ok" <<<"$out" && ! grep -q "^epoch 1:" <<<"$out" \
    && pass "it died inside epoch 1" || { failed "not killed in epoch 1"; tail -5 <<<"$out"; }

for n in 4 2 3; do
    cp -r "$d/ck" "$d/ck$n"
    out=$(SC_AUDIT_DIR=$d/audit2-$n "$MPIEXEC" -n "$n" --oversubscribe "$train" --epochs 3 \
          --resume "$d/ck$n" 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] && grep -q "^exactly-once: ok (2 epochs" <<<"$out" \
        && pass "resumed on $n ranks: epochs 1-2 exactly-once" \
        || { failed "resume on $n ranks (rc $rc)"; tail -8 <<<"$out"; }
    grep -q "^epoch 1: .*exactly-once ok" <<<"$out" && pass "the interrupted epoch's verdict covers both runs ($n ranks)" \
        || failed "epoch 1 verdict on $n ranks"
    expect_ok "union of both audit trails, exactly once ($n ranks)" \
        "^exactly-once: ok \(3 epochs, [0-9]+ samples, 0 duplicated, 0 skipped; 2 trails\)$" \
        "$SC_BIN" verify --union --audit-dir "$d/audit1" --audit-dir "$d/audit2-$n" "${shape[@]}"
done
# Killed again inside the epoch it resumed on 2 ranks (its checkpoints name what each rank
# had left), then resumed on 3: still every epoch exactly once over the three trails.
mkdir -p "$d/ckc"
cp -r "$d/ck" "$d/ckb"
kill2=$((1 + RANDOM % 5)) # epoch 1 has 6 steps or more left on 2 ranks
out=$(SC_AUDIT_DIR=$d/audit3-2 "$MPIEXEC" -n 2 --oversubscribe "$train" --epochs 3 \
      --resume "$d/ckb" --checkpoint "$d/ckc" --kill-after "$kill2" 2>&1)
rc=$?
[ "$rc" -ne 0 ] && [ -s "$d/ckc/ckpt-r1.bin" ] && ! grep -q "^epoch 1:" <<<"$out" \
    && pass "resumed on 2 ranks, killed again after step $kill2 of epoch 1" \
    || { failed "the resumed job was not killed inside epoch 1 (rc $rc)"; tail -5 <<<"$out"; }
out=$(SC_AUDIT_DIR=$d/audit3-3 "$MPIEXEC" -n 3 --oversubscribe "$train" --epochs 3 \
      --resume "$d/ckc" 2>&1)
rc=$?
[ "$rc" -eq 0 ] && grep -q "^exactly-once: ok (2 epochs" <<<"$out" \
    && grep -q "^epoch 1: .*exactly-once ok" <<<"$out" \
    && pass "and resumed from there on 3 ranks: epochs 1-2 exactly-once" \
    || { failed "the second resume, on 3 ranks (rc $rc)"; tail -8 <<<"$out"; }
expect_ok "union of the three audit trails, exactly once" \
    "^exactly-once: ok \(3 epochs, [0-9]+ samples, 0 duplicated, 0 skipped; 3 trails\)$" \
    "$SC_BIN" verify --union --audit-dir "$d/audit1" --audit-dir "$d/audit3-2" \
    --audit-dir "$d/audit3-3" "${shape[@]}"

# The union check is not vacuous: two resumed runs without the first miss epoch 0 and the
# start of epoch 1, and two resumptions together deliver the rest twice.
expect_fail "two resumptions together are caught" "exactly-once: FAILED .* [1-9][0-9]* duplicated, [1-9][0-9]* skipped" \
    "$SC_BIN" verify --union --audit-dir "$d/audit2-4" --audit-dir "$d/audit2-2" "${shape[@]}"

cp -r "$d/ck" "$d/cklost" && rm "$d/cklost/ckpt-r3.bin"
expect_fail "a missing rank record is refused" "all 4 are needed, 3 given" \
    "$MPIEXEC" -n 2 --oversubscribe "$train" --epochs 3 --resume "$d/cklost"
finish
