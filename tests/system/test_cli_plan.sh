#!/usr/bin/env bash
# `shardcache plan` as a user runs it: alone, under mpirun, and with bad input.
. "$(dirname "$0")/lib.sh"
sc=$SC_BIN

expect_ok "help names every flag" "--shard-sizes.*" "$sc" plan --help
for flag in --shards --shard-size --shard-sizes --ranks --epochs --seed --batch \
            --mode --exchange --remainder --check --save --quality --labels --window \
            --sample-bytes --partitions --list-cuts; do
    expect_ok "help documents $flag" "^  $flag" "$sc" plan --help
done
expect_ok "top-level help lists plan" "plan +compute" "$sc" --help
expect_ok "version reports features" "^cuda: (yes|no)" "$sc" --version

expect_ok "global check" "^plan check: ok$" \
    "$sc" plan --shards 5000 --ranks 64 --epochs 3 --seed 9 --batch 64 --check
expect_ok "sticky check" "^plan check: ok$" \
    "$sc" plan --shards 5000 --ranks 16 --epochs 4 --mode sticky --exchange 0.2 --check
expect_ok "sticky moves the exchange fraction" "moved 1000 shards \(20.0%\)" \
    "$sc" plan --shards 5000 --ranks 16 --epochs 2 --mode sticky --exchange 0.2
expect_ok "pad check" "^plan check: ok$" \
    "$sc" plan --shards 99 --shard-size 7 --ranks 8 --batch 10 --remainder pad --check
out=$("$sc" plan --shards 300 --ranks 7 --epochs 2 --check 2>&1)
last=$(tail -n 1 <<<"$out")
[ "$last" = "plan check: ok" ] && pass "check ends with the line" || failed "last line was '$last'"
expect_ok "one line per epoch" "^epoch 2: .* batches/rank .* dropped .* padded .* balance .* moved .* cuts [0-9]+, plan .* KiB, .* ms$" \
    "$sc" plan --shards 100 --ranks 4 --epochs 3

printf '%s\n' 5 100 3 70 2000 1 1 1 > "$SC_T_TMP/sizes.txt"
expect_ok "shard sizes from a file" "^plan check: ok$" \
    "$sc" plan --shard-sizes "$SC_T_TMP/sizes.txt" --ranks 3 --batch 1 --check
expect_ok "save writes the plan" "plan check: ok" \
    "$sc" plan --shards 40 --ranks 3 --save "$SC_T_TMP/p.plan" --check
[ "$(head -c 4 "$SC_T_TMP/p.plan")" = "SCPL" ] && pass "saved plan has its magic" || failed "saved plan lacks SCPL"

# The remainder is cut at sample granularity: 6,000 samples in shards of
# 1,024 on 4 ranks with batch 64 drop 112 (< R x B = 256; whole shards
# dropped 1,904) and pad repeats 144, each by cutting sample ranges of shards.
expect_ok "drop leaves out fewer than R x B" "^epoch 0: 23 batches/rank of 64, dropped 112, padded 0, .* cuts [1-9]" \
    "$sc" plan --samples 6000 --shard-size 1024 --ranks 4 --batch 64 --epochs 1
expect_ok "pad repeats fewer than R x B" "^epoch 0: 24 batches/rank of 64, dropped 0, padded 144, " \
    "$sc" plan --samples 6000 --shard-size 1024 --ranks 4 --batch 64 --epochs 1 --remainder pad
out=$("$sc" plan --samples 6000 --shard-size 1024 --ranks 4 --batch 64 --epochs 4 --mode sticky \
      --remainder pad --list-cuts --check 2>&1)
awk '/^epoch / { split($0, a, "cuts "); c = a[2] + 0; total += c; if (c > 6) bad = 1 }
     /^  cut [0-9]+: shard [0-9]+ \[[0-9]+, [0-9]+\) from rank [0-3] -> rank [0-3]$/ { listed++ }
     END { exit bad || total == 0 || listed != total }' <<<"$out" &&
    pass "--list-cuts: each cut, at most 2 (R-1) an epoch" || failed "--list-cuts: $out"
grep -q "^checked: 4 epochs, 6 shards, 4 ranks; 24000 samples, each served by exactly one rank$" \
    <<<"$out" && pass "--check counts every sample's rank" || failed "--check: $out"
# Partitions: the flag, or SC_PARTITIONS as a job reads it.
expect_ok "--partitions check" "^partitions: 8, 2 a rank, each giving 32 samples to every global batch of 256$" \
    "$sc" plan --samples 60000 --shard-size 100 --ranks 4 --batch 64 --partitions 8 --check
expect_ok "SC_PARTITIONS applies" "^partitions: 16, 2 a rank, each giving 16 samples" \
    env SC_PARTITIONS=16 "$sc" plan --samples 60000 --shard-size 100 --ranks 8 --batch 32 --check
expect_ok "--list-cuts names partitions" "^  cut 0: shard [0-9]+ \[[0-9]+, [0-9]+\) from rank [0-3] -> rank [0-3] \(partition [0-7] -> [0-7]\)$" \
    "$sc" plan --samples 6000 --shard-size 100 --ranks 4 --batch 64 --partitions 8 --list-cuts --epochs 1
# Over partitions the plan is the world size's no more: at the same R x B,
# 2, 4 and 8 ranks get the same cuts between the same partitions.
for rb in "2 64" "4 32" "8 16"; do
    set -- $rb
    "$sc" plan --samples 6000 --shard-size 100 --ranks "$1" --batch "$2" --partitions 8 --epochs 3 \
        --mode sticky --list-cuts | grep '^  cut' | sed 's/from rank [0-9]* -> rank [0-9]*//' \
        > "$SC_T_TMP/cuts-$1"
done
[ -s "$SC_T_TMP/cuts-2" ] && cmp -s "$SC_T_TMP/cuts-2" "$SC_T_TMP/cuts-4" &&
    cmp -s "$SC_T_TMP/cuts-2" "$SC_T_TMP/cuts-8" &&
    pass "partitions: the same cuts on 2, 4 and 8 ranks" || failed "partitions: cuts differ by world size"
expect_fail "partitions not a multiple of the ranks" "SC_PARTITIONS=6 is not a multiple of the 4 ranks" \
    "$sc" plan --shards 100 --ranks 4 --batch 64 --partitions 6
expect_fail "more partitions than shards" "SC_PARTITIONS=16 is more than the 8 shards: every partition needs a shard" \
    "$sc" plan --shards 8 --ranks 4 --batch 64 --partitions 16
expect_fail "a global batch the partitions do not divide" "the global batch, 4 ranks x 6 = 24 samples, is not a multiple of SC_PARTITIONS=16" \
    "$sc" plan --shards 100 --ranks 4 --batch 6 --partitions 16
expect_fail "pad with partitions and less than a global batch" "with SC_PARTITIONS=8 an epoch needs one, under drop and pad; use a batch size of at most 20 \\(a multiple of P/R = 2\\)" \
    "$sc" plan --shards 8 --shard-size 10 --ranks 4 --batch 64 --partitions 8 --remainder pad
expect_fail "--partitions that is no number" "--partitions: SC_PARTITIONS='x' is not a non-negative integer" \
    "$sc" plan --partitions x
expect_fail "SC_PARTITIONS that is no number" "SC_PARTITIONS='-1'" env SC_PARTITIONS=-1 "$sc" plan

# --quality on class-sorted labels: an auto window (half of SC_STREAM_BYTES)
# reaches a uniform order's label entropy within 0.05 bits; window 1 is far off.
"$sc" make-dataset --out "$SC_T_TMP/sorted.h5" --samples 16384 --shape 3x8x8 --sorted \
    >/dev/null 2>&1 || failed "make-dataset --sorted"
q=("$sc" plan --ranks 4 --batch 64 --shard-size 128 --epochs 2 --quality
   --labels "$SC_T_TMP/sorted.h5:/labels")
for mode in global sticky; do
    out=$("${q[@]}" --mode $mode 2>&1)
    if awk '/quality \(window/ { n++; if ($13 + 0 < $16 + 0 - 0.05) bad = 1 }
            END { exit !(n == 2 && !bad) }' <<<"$out"; then
        pass "$mode: label entropy within 0.05 bits of uniform"
    else
        failed "$mode: $out"
    fi
done
out=$("${q[@]}" --window 1 2>&1)
awk '/quality \(window 1\)/ { if ($13 + 0 > 1.0) bad = 1; n++ } END { exit !(n == 2 && !bad) }' <<<"$out" &&
    pass "window 1: batches of one class" || failed "window 1: $out"
# auto: half of 256M in whole shards of 100 x 3080 bytes: 435 shards, (435 - 1) x 100 + 1 samples
expect_ok "quality without labels" "quality \(window 43401\): .* shards/batch \(uniform .*\), moved 0.3" \
    "$sc" plan --shards 64 --shard-size 100 --ranks 4 --batch 50 --quality --sample-bytes 3080

# Bad input: a clear message and a non-zero exit, never a crash.
expect_fail "auto window without a sample size" "needs a sample's bytes" "$sc" plan --quality
expect_fail "labels without --quality" "go with --quality" \
    "$sc" plan --labels "$SC_T_TMP/sorted.h5:/labels"
expect_fail "labels without a field" "give FILE:FIELD" \
    "$sc" plan --quality --labels "$SC_T_TMP/sorted.h5"
expect_fail "labels that are images" "/images holds uint8, 192 bytes a sample: not one integer label" \
    "$sc" plan --quality --shard-size 128 --labels "$SC_T_TMP/sorted.h5:/images"
expect_fail "bad window" "SC_SHUFFLE_WINDOW='big'" "$sc" plan --quality --window big
expect_fail "zero shards" "--shards '0'" "$sc" plan --shards 0
expect_fail "more ranks than shards" "more ranks \(9\) than shards \(4\)" "$sc" plan --shards 4 --ranks 9
expect_fail "batch 0" "--batch '0'" "$sc" plan --batch 0
expect_fail "exchange outside [0,1]" "--exchange '1.5'" "$sc" plan --mode sticky --exchange 1.5
expect_fail "unknown mode" "--mode must be global or sticky, not .random." "$sc" plan --mode random
expect_fail "unknown flag" "see .shardcache plan --help" "$sc" plan --bogus
expect_fail "typo in a number" "--seed '12x'" "$sc" plan --seed 12x
expect_fail "missing sizes file" "cannot open" "$sc" plan --shard-sizes "$SC_T_TMP/nope"
printf '%s\n' 18446744073709551615 5 > "$SC_T_TMP/huge.txt"
expect_fail "sizes that overflow" "SC_EOVERFLOW.*overflow 64 bits at shard 1" \
    "$sc" plan --shard-sizes "$SC_T_TMP/huge.txt" --ranks 1
# Refused before any epoch, as a job's open refuses it, naming what would fit.
expect_fail "batch larger than a rank" "SC_EINVAL: 800 samples cannot give each of 4 ranks a batch of 5000 with remainder=drop: that takes 20000 samples \(4 x 5000\); remainder=pad, or a batch size of at most 200, would" \
    "$sc" plan --shards 8 --shard-size 100 --ranks 4 --batch 5000
expect_fail "a small set on more ranks than its shards" "more ranks \(9\) than shards \(7\)" \
    "$sc" plan --samples 7 --ranks 9
expect_ok "1,000 samples: auto shards of 3 on 8 ranks" "dataset: 1000 samples in shards of 3 \(auto\)" \
    "$sc" plan --samples 1000 --sample-bytes 3080 --ranks 8 --batch 64 --check
expect_fail "unknown command" "unknown command 'nope'" "$sc" nope

# Under mpirun: rank 0 plans and broadcasts, every rank checks.
expect_ok "mpirun -np 4 broadcast check" "broadcast from rank 0" \
    "$MPIEXEC" -n 4 --oversubscribe "$sc" plan --shards 2000 --epochs 3 --mode sticky --check
expect_ok "mpirun -np 4 same plan everywhere" "same plan on every rank" \
    "$MPIEXEC" -n 4 --oversubscribe "$sc" plan --shards 2000 --epochs 2 --check
expect_ok "mpirun -np 4 with partitions" "same plan on every rank; 60000 samples" \
    "$MPIEXEC" -n 4 --oversubscribe "$sc" plan --shards 300 --shard-size 100 --partitions 8 \
    --batch 16 --epochs 2 --mode sticky --check
expect_fail "mpirun with --ranks that disagree" "--ranks 3 but running on 4 MPI ranks" \
    "$MPIEXEC" -n 4 --oversubscribe "$sc" plan --ranks 3
finish
