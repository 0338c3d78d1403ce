#!/usr/bin/env bash
# launch/ as shipped: every script passes shellcheck; shardcache-run prints
# what it would run (--dry-run), refuses bad input by name, and runs a real
# job with mpirun: staging first, tracing on, the summary at the end, its
# own temporary cache removed afterwards.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}" "${SC_SOURCE_DIR:?}"
run=$SC_SOURCE_DIR/launch/shardcache-run
train=$SC_BUILD_DIR/bin/train

if command -v shellcheck >/dev/null; then
    for f in "$SC_SOURCE_DIR"/launch/shardcache-run "$SC_SOURCE_DIR"/launch/slurm/*.sbatch \
             "$SC_SOURCE_DIR"/scripts/demo "$SC_SOURCE_DIR"/scripts/test "$SC_SOURCE_DIR"/scripts/bench \
             "$SC_SOURCE_DIR"/scripts/lib.sh "$SC_SOURCE_DIR"/scripts/gpu-bundle \
             "$SC_SOURCE_DIR"/bench/gpu.sh; do
        [ -e "$f" ] || continue
        expect_ok "shellcheck ${f#"$SC_SOURCE_DIR"/}" "" shellcheck -x -e SC1091,SC2086 "$f"
    done
else
    failed "shellcheck is missing (scripts/test installs Debian's shellcheck)"
fi

# launch/ompi.env is the one list: every setting in it reaches ctest's tests too.
while IFS= read -r line; do
    case $line in '' | '#'*) continue ;; esac
    grep -qF "$line" "$SC_BUILD_DIR/tests/CTestTestfile.cmake" && pass "ctest gets $line" \
        || failed "ompi.env's $line is not in the tests' environment"
done <"$SC_SOURCE_DIR/launch/ompi.env"

unset SLURM_JOB_ID SC_CACHE_DIR SLURM_TMPDIR
expect_ok "dry run: mpirun, ranks, binding, forwarded settings" \
    "^\+ mpirun -np 3 --bind-to core --map-by core .*-x SC_SEED .* $train --epochs 2$" \
    env SC_SEED=4 "$run" --dry-run -n 3 -- "$train" --epochs 2
expect_ok "dry run: staging first, with the same settings" "^\+ mpirun .* stage --epochs 2$" \
    env SHARDCACHE="$SC_BIN" "$run" --dry-run -n 2 --stage 2 -- "$train"
expect_ok "dry run: the library's default cache" "cache in the default .*/shardcache-$(id -u)$" \
    "$run" --dry-run -n 2 -- "$train"
out=$("$run" --dry-run -n 2 -- "$train" 2>&1)
grep -q -- "-x SC_CACHE_DIR" <<<"$out" && failed "SC_CACHE_DIR forwarded though unset" \
    || pass "no SC_CACHE_DIR of its own: the library's rule applies"
expect_ok "dry run: SC_CACHE_DIR is kept" "cache in /scratch/mine$" \
    env SC_CACHE_DIR=/scratch/mine "$run" --dry-run -n 2 -- "$train"
expect_ok "dry run: -x forwards a setting" "-x SC_BATCH_SIZE" \
    "$run" --dry-run -n 2 -x SC_BATCH_SIZE=64 -- "$train"
expect_ok "dry run: one rank per core without GPUs" "^shardcache-run: $(nproc) ranks via mpirun, 0 GPUs" \
    env CUDA_VISIBLE_DEVICES= "$run" --dry-run -- "$train"
expect_ok "dry run: one rank per visible GPU" "^shardcache-run: 3 ranks via mpirun, 3 GPUs" \
    env CUDA_VISIBLE_DEVICES=0,1,2 "$run" --dry-run -- "$train"
expect_fail "no command" "no training command given" "$run" -n 2
expect_fail "bad rank count" "--ranks must be a positive integer, not 'four'" "$run" -n four -- true
expect_fail "bad launcher" "--launcher must be auto, mpirun or srun, not 'ssh'" \
    "$run" --launcher ssh -- true
expect_fail "unknown option" "unknown option '--nope'" "$run" --nope -- true

# A real job, as on a workstation: stage, train traced, summary, cleanup.
"$SC_BIN" make-dataset --out "$SC_T_TMP/data.h5" --samples 4096 --shape 3x16x16 --labels 10 \
    --seed 6 >/dev/null
export SC_SOURCE=$SC_T_TMP/data.h5 SC_SHARD_SIZE=128 SC_BATCH_SIZE=32 SC_SEED=3 \
    SHARDCACHE=$SC_BIN TMPDIR=$SC_T_TMP
out=$("$run" -n 4 --oversubscribe --stage 1 --trace "$SC_T_TMP/trace" -- "$train" --epochs 2 2>&1)
rc=$?
[ "$rc" -eq 0 ] && pass "a staged, traced job runs" || { failed "job exit $rc"; tail -20 <<<"$out"; }
grep -q "^exactly-once: ok (2 epochs" <<<"$out" && pass "its exactly-once verdict" || failed "verdict"
grep -q "^epoch 0: .*cache hit rate 100.0%" <<<"$out" && pass "staged: warm from epoch 0" \
    || { failed "not warm after staging"; grep "^epoch 0" <<<"$out"; }
grep -Eq "^(bottleneck|verdict): " <<<"$out" && [ -s "$SC_T_TMP/trace/summary.txt" ] \
    && pass "trace merged and summarized" || failed "no trace summary"
# No SC_CACHE_DIR: staging and training used the library's default, private to the user.
root=$SC_T_TMP/shardcache-$(id -u)
compgen -G "$root/shardcache-*-l*/s*.h5" >/dev/null && [ "$(stat -c %a "$root")" = 700 ] \
    && pass "the cache is in the default root, $root, mode 700" \
    || { failed "no cache under $root (or not 0700)"; ls -la "$SC_T_TMP" "$root" 2>&1 | head; }
finish
