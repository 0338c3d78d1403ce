#!/usr/bin/env bash
# `shardcache scan --decode` on JPEG datasets of both layouts with a few
# samples damaged as no decoder can take (zeroed, truncated, random bytes,
# empty): on 1 and 3 ranks every bad id is named exactly once and no good
# one, the skip list parses and carries the fingerprint of the samples a
# job takes it by (decode-once too), and the exit status says 0 clean, 1 bad samples, 2 an error
# (one rank's unreadable file too, without a hang).
. "$(dirname "$0")/lib.sh"
sc=$SC_BIN
d=$SC_T_TMP
py=/usr/bin/python3 # the system's, with h5py (scripts/test installs it)

"$sc" --version | grep -q "^jpeg (libjpeg-turbo, SC_DECODE): yes" || skip "built without libjpeg-turbo"
"$py" -c "import h5py" 2>/dev/null || skip "python3-h5py missing (scripts/test installs it)"

expect_ok "top-level help lists scan" "^  scan +decode every image" "$sc" --help
for flag in --decode --source --field --skip-list --fields --shard-size --sample-axis; do
    expect_ok "help documents $flag" "^  $flag" "$sc" scan --help
done

# Layout A: 60 samples, /images and a copy /thumbs (a second encoded field);
# layout B: 60 samples in 6 files of 10.  Each damaged sample's id is written
# to a file per field chosen: <set>.all (every field), <set>.images, <set>.thumbs.
"$sc" make-dataset --out "$d/a.h5" --samples 60 --shape 3x16x16 --encode jpeg --seed 1 >/dev/null 2>&1 &&
"$sc" make-dataset --out "$d/b" --samples 60 --shape 3x16x16 --encode jpeg --layout B \
    --shard-size 10 --seed 2 >/dev/null 2>&1 &&
"$sc" make-dataset --out "$d/clean.h5" --samples 30 --shape 1x16x16 --encode jpeg >/dev/null 2>&1 ||
    failed "make-dataset --encode jpeg"
"$py" - "$d" <<'PY' || failed "damaging samples with h5py"
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
def damage(ds, i, how):
    x = ds[i]
    ds[i] = {"zeroed": np.zeros(len(x), np.uint8),
             "half": x[: len(x) // 2],
             "head": x[:20],
             "random": np.frombuffer(rng.bytes(len(x)), np.uint8),
             "empty": np.zeros(0, np.uint8)}[how]
with h5py.File(f"{d}/a.h5", "r+") as f:
    img = f["images"]
    f.create_dataset("thumbs", data=img[...], dtype=h5py.vlen_dtype(np.uint8))
    for i, how in ((0, "zeroed"), (17, "half"), (40, "random"), (59, "head")):
        damage(img, i, how)
    for i, how in ((23, "empty"), (40, "zeroed")):
        damage(f["thumbs"], i, how)
open(f"{d}/a.images", "w").write("0\n17\n40\n59\n")
open(f"{d}/a.thumbs", "w").write("23\n40\n")
open(f"{d}/a.all", "w").write("0\n17\n23\n40\n59\n")
bad = []
for file, row, how in ((0, 3, "zeroed"), (2, 9, "half"), (3, 0, "random"), (5, 9, "head")):
    with h5py.File(f"{d}/b/shard-{file:06d}.h5", "r+") as f:
        damage(f["images"], row, how)
    bad.append(file * 10 + row)
open(f"{d}/b.all", "w").write("".join(f"{i}\n" for i in bad))
PY

# scan_check NAME WANT EXPECT_RC LIST OUT: the output names exactly the ids
# in WANT, once each and in id order, the summary counts them, and LIST
# (unless "-") is a skip list of those ids.
scan_check() {
    local name=$1 want=$2 rc_want=$3 list=$4 out=$5 n
    n=$(wc -l <"$want")
    local named; named=$(sed -n 's/^bad sample \([0-9]*\): file .*, field \/[a-z]*: ..*$/\1/p' <<<"$out" | uniq)
    [ "$named" = "$(cat "$want")" ] && pass "$name: every bad id named once, in order, no good one" ||
        { failed "$name: named '$(tr '\n' ' ' <<<"$named")', want '$(tr '\n' ' ' <"$want")'"; echo "$out" | tail; }
    grep -Eq "^scanned: [0-9]+ samples on [13] ranks?, $n bad, [0-9.]+ s, [0-9.]+ MB/s$" <<<"$out" &&
        pass "$name: the summary counts $n bad" || { failed "$name: no summary of $n bad"; echo "$out" | tail -3; }
    [ "$rc" -eq "$rc_want" ] && pass "$name: exit status $rc_want" || failed "$name: exit status $rc, want $rc_want"
    [ "$list" = - ] && return
    awk -v want="$want" '
        NR == 1 { ok = $0 == "# shardcache skip list 1"; next }
        NR == 2 { ok = ok && /^# source \//; next }
        NR == 3 { ok = ok && /^# fingerprint [0-9a-f]+$/ && length($0) == 30; next }
        /^#/ || /^$/ { next }
        { ok = ok && /^[0-9]+\t[^\t]+$/; split($0, f, "\t"); got = got f[1] "\n" }
        END { while ((getline l < want) > 0) w = w l "\n"; exit !(ok && got == w && NR >= 3) }' "$list" &&
        pass "$name: the skip list parses and lists exactly those ids" ||
        { failed "$name: skip list"; cat "$list"; }
}

run_scan() { # NP ARGS...: sets out and rc
    local np=$1
    shift
    out=$(timeout 120 "$MPIEXEC" -n "$np" --oversubscribe "$sc" scan --decode "$@" 2>"$d/stderr"); rc=$?
}

for np in 1 3; do
    run_scan $np "$d/a.h5" --skip-list "$d/a$np.list"
    scan_check "layout A, $np ranks, every encoded field" "$d/a.all" 1 "$d/a$np.list" "$out"
    run_scan $np "$d/b" --skip-list "$d/b$np.list"
    scan_check "layout B, $np ranks" "$d/b.all" 1 "$d/b$np.list" "$out"
    run_scan $np --source "$d/a.h5" --field thumbs --skip-list "$d/t$np.list"
    scan_check "layout A, $np ranks, --field thumbs" "$d/a.thumbs" 1 "$d/t$np.list" "$out"
done
cmp -s "$d/a1.list" "$d/a3.list" && cmp -s "$d/b1.list" "$d/b3.list" &&
    pass "1 and 3 ranks write the same skip list" || failed "the skip lists differ between 1 and 3 ranks"
grep -q "^40	/images: .*; /thumbs: " "$d/a1.list" && pass "a sample bad in two fields: one line, both reasons" ||
    failed "sample 40's line: $(grep '^40' "$d/a1.list")"
run_scan 3 "$d/a.h5" --field /images
scan_check "layout A, 3 ranks, --field /images" "$d/a.images" 1 - "$out"
grep -q "skip list" <<<"$out" && failed "a skip list said without --skip-list" || pass "no --skip-list: none written"

# The list's fingerprint is the source's samples' (files, stamps, counts):
# the same whatever SC_SHARD_SIZE or SC_DECODE say, and a job takes it.
fp_of() { sed -n 's/^# fingerprint //p' "$1"; }
SC_SHARD_SIZE=7 SC_DECODE=jpeg-once run_scan 1 "$d/a.h5" --skip-list "$d/a7.list"
[ "$(fp_of "$d/a7.list")" = "$(fp_of "$d/a1.list")" ] &&
    pass "the fingerprint is the samples' (SC_SHARD_SIZE, SC_DECODE aside)" ||
    failed "fingerprints $(fp_of "$d/a7.list") and $(fp_of "$d/a1.list")"
stage() { "$sc" stage --cache-bytes unbounded --shard-size 5 "$@" >"$d/stage.out" 2>&1; }
SC_SKIP_LIST=$d/a1.list stage --source "$d/a.h5" --cache-dir "$d/cache" &&
    pass "a job takes the list (layout A, another shard size)" || failed "$(cat "$d/stage.out")"
SC_SKIP_LIST=$d/b1.list stage --source "$d/b" --cache-dir "$d/cache" &&
    pass "a job takes the list (layout B)" || failed "$(cat "$d/stage.out")"
sed 's/^# fingerprint .*/# fingerprint 0123456789abcdef/' "$d/a1.list" >"$d/other.list"
SC_SKIP_LIST=$d/other.list stage --source "$d/a.h5" --cache-dir "$d/cache" &&
    failed "another source's list taken" ||
    { grep -q "other.list', line 3: made for the dataset of fingerprint 0123456789abcdef" \
        "$d/stage.out" && pass "another source's list refused, file and line named" ||
        failed "$(cat "$d/stage.out")"; }
# Decode-once fills its cache only with the list (its bad images are never
# decoded), into a cache of its own: a job without the list never reads it.
SC_DECODE=images=jpeg-once stage --source "$d/a.h5" --cache-dir "$d/once" &&
    failed "decode-once staged bad images" || pass "decode-once without the list stops on a bad image"
SC_DECODE=images=jpeg-once SC_SKIP_LIST=$d/a1.list stage --source "$d/a.h5" --cache-dir "$d/once" &&
    pass "decode-once with the list stages" || failed "$(cat "$d/stage.out")"
[ "$(ls "$d/once" | wc -l)" -ge 2 ] && pass "the list keys decode-once's cache" ||
    failed "caches: $(ls "$d/once")"

# A clean set: exit 0, an empty list a job still takes.
run_scan 3 "$d/clean.h5" --skip-list "$d/clean.list"
: >"$d/none"
scan_check "a clean set" "$d/none" 0 "$d/clean.list" "$out"

# Errors: exit 2, one message naming what failed, no list.
expect_code() { # NAME PATTERN CMD...: exit 2 and stderr says PATTERN once
    local name=$1 pattern=$2 n
    shift 2
    "$@" >"$d/stdout" 2>"$d/stderr"; rc=$?
    n=$(grep -Ec -- "$pattern" "$d/stderr")
    [ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && pass "$name" ||
        { failed "$name (rc=$rc, /$pattern/ said $n times)"; tail -5 "$d/stderr"; }
}
expect_code "no --decode" "say what to check: --decode" "$sc" scan "$d/a.h5"
expect_code "a missing source" "$d/nope" "$MPIEXEC" -n 3 --oversubscribe "$sc" scan --decode "$d/nope"
expect_code "--field of no such field" "source '$d/a.h5' has no field 'nope'" \
    "$MPIEXEC" -n 3 --oversubscribe "$sc" scan --decode "$d/a.h5" --field nope
expect_code "--field of a field that holds no images" "field '/labels' holds fixed-shape int64" \
    "$MPIEXEC" -n 3 --oversubscribe "$sc" scan --decode "$d/a.h5" --field labels
# One file's heap damaged: the open (which reads only the lengths) passes,
# rank 2's read of its shard fails; every rank stops, rank 2 names the file.
cp -r "$d/b" "$d/heap"
"$py" - "$d/heap/shard-000005.h5" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); i = b.find(b"GCOL")
assert i > 0 and b.count(b"GCOL") == 1
b[i:i + 4] = b"XXXX"; open(p, "wb").write(b)
PY
expect_code "one rank's unreadable file: named, every rank ends" \
    "rank 2: .*'$d/heap/shard-000005.h5'" \
    timeout 120 "$MPIEXEC" -n 3 --oversubscribe "$sc" scan --decode "$d/heap" --shard-size 10 \
    --skip-list "$d/heap.list"
[ "$(grep -c "^shardcache scan:" "$d/stderr")" -eq 1 ] && pass "one error message for the job" ||
    failed "error messages: $(grep "^shardcache scan:" "$d/stderr")"
[ ! -e "$d/heap.list" ] && pass "no skip list after an error" || failed "a skip list written after an error"
finish
