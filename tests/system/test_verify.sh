#!/usr/bin/env bash
# `shardcache verify` on a real job's audit trail, then on that trail with a
# sample duplicated, one skipped, one moved to the wrong rank, a rank
# missing: each is named, with a non-zero exit; and with --source, a
# layout-B job's shards (files grouped and cut) taken from its dataset.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}"
soak=$SC_BUILD_DIR/bin/soak_job
d=$SC_T_TMP
out=$("$MPIEXEC" -n 2 --oversubscribe "$soak" --jobs 1 --seed 3 --world 2 --dir "$d" --verify "$SC_BIN" 2>&1)
grep -q "^1 passed, 0 failed$" <<<"$out" && pass "a clean job verifies" || { failed "clean job"; echo "$out" | tail; }
job=$d/job0
flags=$(cat "$job/flags")
verify() { "$SC_BIN" verify --audit-dir "$1" $flags; }
expect_ok "verify says ok" "^exactly-once: ok \([0-9]+ epochs, [0-9]+ samples, 0 duplicated, 0 skipped\)$" verify "$job"

cp -r "$job" "$d/dup"; f=$d/dup/audit-r0.bin
head -c 40 "$f" | tail -c 16 >> "$f"
expect_fail "a duplicate is named" "delivered 2 times" verify "$d/dup"
expect_fail "and counted" "exactly-once: FAILED .* 1 duplicated, 0 skipped" verify "$d/dup"

cp -r "$job" "$d/skip"; f=$d/skip/audit-r0.bin
{ head -c 24 "$f"; tail -c +41 "$f"; } > "$f.new" && mv "$f.new" "$f"
expect_fail "a skip is named" "not delivered" verify "$d/skip"
expect_fail "and counted" "exactly-once: FAILED .* 0 duplicated, 1 skipped" verify "$d/skip"

cp -r "$job" "$d/moved"
head -c 40 "$d/moved/audit-r0.bin" | tail -c 16 >> "$d/moved/audit-r1.bin"
f=$d/moved/audit-r0.bin; { head -c 24 "$f"; tail -c +41 "$f"; } > "$f.new" && mv "$f.new" "$f"
expect_fail "a sample on the wrong rank" "consumed on rank 1, owned by rank 0" verify "$d/moved"

# A sample of a cut (a range of a shard served by another rank than its
# home) belongs to the rank it is cut to: consumed on the home rank instead,
# it is named (whole-shard ownership would take it for the home's).
cut=$("$SC_BIN" plan $flags --epochs 1 --list-cuts | sed -n 's/^  cut 0: shard \([0-9]*\) \[\([0-9]*\), [0-9]*) from rank \([0-9]*\) -> rank \([0-9]*\)$/\1 \2 \3 \4/p')
if [ -n "$cut" ]; then
    read -r cs cb cfrom cto <<<"$cut"
    cid=$(awk -v s="$cs" -v b="$cb" 'NR <= s { n += $1 } END { print n + b }' "$job/sizes.txt")
    cp -r "$job" "$d/cut"
    python3 - "$d/cut" "$cid" "$cfrom" "$cto" <<'PY'
import struct, sys
d, sid, src, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(r):
    b = open(f"{d}/audit-r{r}.bin", "rb").read()
    return b[:24], [b[i:i + 16] for i in range(24, len(b) - 15, 16)]
hd, ds = load(dst)
rec = next(x for x in ds if struct.unpack("<QQ", x) == (0, sid))
ds.remove(rec)
hs, ss = load(src)
open(f"{d}/audit-r{dst}.bin", "wb").write(hd + b"".join(ds))
open(f"{d}/audit-r{src}.bin", "wb").write(hs + b"".join(ss + [rec]))
PY
    expect_fail "a cut sample on its shard's home rank" \
        "epoch 0: sample $cid consumed on rank $cfrom, owned by rank $cto" verify "$d/cut"
else
    failed "the job's epoch 0 has no cut: pick another seed (plan: $("$SC_BIN" plan $flags --epochs 1))"
fi

# One damaged record claims epoch 2^50: refused at once, not walked epoch by epoch.
cp -r "$job" "$d/far"
python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack("<QQ", 1 << 50, 0))' \
    >>"$d/far/audit-r0.bin"
expect_fail "a trail with an epoch gap is refused" "with gaps .*: damaged" \
    timeout 20 "$SC_BIN" verify --audit-dir "$d/far" $flags
expect_fail "in --union too" "with gaps .*: damaged" \
    timeout 20 "$SC_BIN" verify --audit-dir "$d/far" --audit-dir "$job" --union $flags

cp -r "$job" "$d/lost"; rm "$d/lost/audit-r1.bin"
expect_fail "a missing rank" "audit-r1.bin' is missing \(the job had 2 ranks\)" verify "$d/lost"
expect_fail "another seed" "exactly-once: FAILED" "$SC_BIN" verify --audit-dir "$job" \
    $(sed 's/--plan-seed [0-9]*/--plan-seed 12345/' <<<"$flags")
expect_fail "no audit dir" "no audit file" "$SC_BIN" verify --audit-dir "$d/none" --shards 4

# --source: a layout-B job whose files (13 samples each) are cut into shards
# of 5, 4 and 4: verify takes the job's shards from the dataset, where the
# layout-A flags of the same counts describe other shards.
"$SC_BIN" make-dataset --out "$d/bdir" --layout B --shard-size 13 --samples 65 --shape 8 \
    --labels 4 >/dev/null
SC_SOURCE=$d/bdir SC_CACHE_DIR=$d/bcache SC_SHARD_SIZE=5 SC_BATCH_SIZE=4 SC_SEED=9 \
    SC_AUDIT_DIR=$d/baudit "$MPIEXEC" -n 2 --oversubscribe "$SC_BUILD_DIR/bin/train" --epochs 2 \
    >/dev/null 2>&1 || failed "the layout-B job"
bflags=(--audit-dir "$d/baudit" --plan-seed 9 --batch 4 --mode sticky) # a job's default mode
expect_ok "verify --source takes a layout-B job's cut shards" \
    "^exactly-once: ok \(2 epochs, 128 samples, 0 duplicated" "$SC_BIN" verify "${bflags[@]}" --source "$d/bdir" \
    --shard-size 5
expect_fail "layout A's shards of the same counts are not the job's" "exactly-once: FAILED" \
    "$SC_BIN" verify "${bflags[@]}" --samples 65 --shard-size 5
expect_fail "--source names what it cannot open" "--source: .*$d/none" \
    "$SC_BIN" verify "${bflags[@]}" --source "$d/none"
expect_ok "without --shard-size, SC_SHARD_SIZE's, as the job's" "^exactly-once: ok" \
    env SC_SHARD_SIZE=5 "$SC_BIN" verify "${bflags[@]}" --source "$d/bdir"
expect_fail "--source with other shards is refused" "--source gives the shards" \
    "$SC_BIN" verify "${bflags[@]}" --source "$d/bdir" --samples 65
expect_ok "plan --source plans the job's 15 shards" "15 shards" \
    "$SC_BIN" plan --source "$d/bdir" --shard-size 5 --ranks 2 --batch 4 --epochs 1
finish
