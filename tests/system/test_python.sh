#!/usr/bin/env bash
# The Python package's example (examples/train.py) as a user runs it: a
# small CNN under DistributedDataParallel (gloo), 4 ranks, fed by
# shardcache: the loss falls and every epoch is exactly-once; a checkpoint
# resumes on 2 ranks, exactly-once; the same loop on PyTorch's DataLoader
# (--loader torch) trains too; launch/shardcache-run starts it.  Skipped
# where the package is not built.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
ls "$SC_BUILD_DIR"/python/shardcache/_core*.so >/dev/null 2>&1 || skip "the Python package is not built"
py=/usr/bin/python3
"$py" -c "import torch, h5py" 2>/dev/null || skip "python3-torch or python3-h5py missing"
export PYTHONPATH=$SC_BUILD_DIR/python
data=$SC_T_TMP/data.h5
expect_ok "make-dataset" "wrote .*4096 samples" \
    "$SC_BIN" make-dataset --out "$data" --samples 4096 --shape 3x12x12 --dtype uint8 \
    --labels 10 --seed 3
export SC_CACHE_DIR=$SC_T_TMP/cache SC_SHARD_SIZE=128
train=$SC_SOURCE_DIR/examples/train.py

out=$("$MPIEXEC" -n 4 --oversubscribe "$py" "$train" --source "$data" --epochs 2 \
      --checkpoint "$SC_T_TMP/ck.pt" 2>&1); rc=$?
[ "$rc" -eq 0 ] && pass "train.py on 4 ranks exits 0" || { failed "exit $rc"; tail -20 <<<"$out"; }
[ "$(grep -c "^epoch [01]: loss .* data wait .*, exactly-once ok$" <<<"$out")" -eq 2 ] \
    && pass "two epochs, each exactly-once, with the data wait" || { failed "epoch lines"; tail -5 <<<"$out"; }
read -r first last < <(sed -n 's/^loss: \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' <<<"$out")
awk -v a="${first:-0}" -v b="${last:-0}" 'BEGIN { exit !(b < a && b > 0) }' \
    && pass "loss fell ($first -> $last)" || { failed "loss did not fall"; tail -5 <<<"$out"; }

out=$("$MPIEXEC" -n 2 --oversubscribe "$py" "$train" --source "$data" --epochs 1 \
      --resume "$SC_T_TMP/ck.pt" 2>&1); rc=$?
[ "$rc" -eq 0 ] && grep -q "^epoch 2: loss .*, exactly-once ok$" <<<"$out" \
    && pass "resumed on 2 ranks at epoch 2, exactly-once" || { failed "resume"; tail -5 <<<"$out"; }

out=$("$MPIEXEC" -n 2 --oversubscribe "$py" "$train" --source "$data" --epochs 1 \
      --loader torch --workers 1 2>&1)
grep -q "^epoch 0: loss .*, exactly-once not checked (DataLoader)$" <<<"$out" \
    && pass "the same loop on DataLoader" || { failed "--loader torch"; tail -5 <<<"$out"; }

expect_ok "launched by shardcache-run, exactly-once" "^epoch 0: loss .*, exactly-once ok$" \
    env SHARDCACHE="$SC_BIN" "$SC_SOURCE_DIR/launch/shardcache-run" -n 2 -- \
    "$py" "$train" --source "$data" --epochs 1

# One rank stops while the others go on: the job ends with a message and
# the rank's own exit code, never hangs (an uncaught exception, or sys.exit
# mid-epoch with the loader open).
cat >"$SC_T_TMP/stop.py" <<'PY'
import sys, shardcache
loader = shardcache.Loader(source=sys.argv[1], batch_size=16)
for k, batch in enumerate(loader.epoch(0)):
    if loader.rank == 1 and k == 2:
        raise RuntimeError("a bug on rank 1") if sys.argv[2] == "raise" else sys.exit(3)
loader.close()
PY
for how in raise exit; do
    want=$([ $how = raise ] && echo "rank 1: uncaught RuntimeError" \
           || echo "rank 1: exiting in the middle of epoch 0 .*exit code 3")
    expect_fail "rank 1 stops ($how): the job ends, saying so" "$want" \
        timeout 60 "$MPIEXEC" -n 3 --oversubscribe "$py" "$SC_T_TMP/stop.py" "$data" $how
done
timeout 60 "$MPIEXEC" -n 3 --oversubscribe "$py" "$SC_T_TMP/stop.py" "$data" exit >/dev/null 2>&1
rc=$?
[ "$rc" -eq 3 ] && pass "sys.exit(3) mid-epoch ends the job with 3" || failed "exit code $rc, not 3"

# A script that ends between epochs without close(): closed at exit, code 0
# (it was ended with MPI_Abort and code 1).
cat >"$SC_T_TMP/noclose.py" <<'PY'
import sys, shardcache
loader = shardcache.Loader(source=sys.argv[1], batch_size=16)
for batch in loader.epoch(0):
    pass
print(f"rank {loader.rank}: {loader.verdict(0)}")
PY
expect_ok "no close() between epochs: closed at exit, code 0" "rank 1: epoch 0: exactly-once ok" \
    timeout 60 "$MPIEXEC" -n 2 --oversubscribe "$py" "$SC_T_TMP/noclose.py" "$data"

# One process (python3 -i, a notebook): an exception is the user's, never the end.
out=$(printf '%s\n' "import shardcache" \
      "loader = shardcache.Loader(source='$data', batch_size=16)" \
      "next(iter(loader.epoch(0)))['nope']" "print('still here')" \
      | timeout 60 "$py" -i 2>&1); rc=$?
[ "$rc" -eq 0 ] && grep -q "still here" <<<"$out" && grep -q "KeyError" <<<"$out" \
    && pass "one process: an exception leaves the interpreter running" \
    || { failed "python3 -i (rc=$rc)"; tail -5 <<<"$out"; }

expect_fail "a missing source is named" "nope\.h5" \
    "$MPIEXEC" -n 2 --oversubscribe "$py" "$train" --source "$SC_T_TMP/nope.h5" --epochs 1
finish
