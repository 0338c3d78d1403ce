#!/usr/bin/env bash
# bench/gpu.sh: the GPU figures, on a machine with a GPU, in under 5 minutes.
# Builds with CUDA and NCCL required (build/gpu), then:
#   - bench_gpu: batches delivered to the device (sc_batch_next, SC_DEVICE=cuda,
#     consumed on a stream as a training step would) with 2, 4 and 8
#     producers in the same run, each against the link's limit: pinned
#     host-to-device copies of 256 MiB in 8 and 32 MiB pieces, all in flight
#     at once, on one stream and on two, the best of them;
#   - the example trainer on the GPU (CUDA kernels as the step, one rank):
#     the training thread's wait in sc_batch_next with real kernels (the
#     step only queues GPU work, so this wait is the ring's back-pressure
#     when the GPU is behind as much as data starvation);
# and writes both, with the date and the GPU's name, into docs/benchmarks.md.
# Never part of CI (no GPU there).  Usage: bench/gpu.sh [--size MiB]
# On a GPU machine without our packages and registries, build a bundle here
# first (scripts/gpu-bundle), carry it there, and run
# SC_GPU_BUNDLE=.gpu bench/gpu.sh: it then builds nothing and installs nothing.
# scripts/gpu-check runs this and the other GPU checks (the trainer's losses
# on the GPU against the CPU, the refusal of two ranks on one GPU,
# compute-sanitizer) in one call: see docs/benchmarks.md, "On a GPU".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
size=1024
[ "${1:-}" = --size ] && size=${2:?--size needs MiB}
if [ -n "${SC_GPU_BUNDLE:-}" ]; then
    [ -f "$SC_GPU_BUNDLE/env.sh" ] || { echo "bench/gpu.sh: no bundle in '$SC_GPU_BUNDLE'" >&2; exit 1; }
    . "$SC_GPU_BUNDLE/env.sh"
    bin=$SC_GPU_BUNDLE/bin
else
    sc_ensure_packages $SC_BUILD_PACKAGES
    cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DSC_WITH_CUDA=ON -DSC_WITH_NCCL=ON \
        -DSC_TESTING=OFF -DBUILD_TESTING=ON >build-gpu.log 2>&1 || { cat build-gpu.log; exit 1; }
    cmake --build build/gpu -j "$(nproc)" --target bench_gpu train shardcache_cli mpi_test_gpu \
        >>build-gpu.log 2>&1 || { tail -40 build-gpu.log; exit 1; }
    rm -f build-gpu.log
    bin=build/gpu/bin
fi
sc_mpi_env
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$gpu" ] || { echo "bench/gpu.sh: no GPU visible (nvidia-smi)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/shardcache-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$bin/shardcache" make-dataset --out "$work/data.h5" --samples 65536 --shape 3x64x64 \
    --labels 10 --seed 1 >"$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }
out=$(SC_SOURCE=$work/data.h5 SC_CACHE_DIR=$work/cache SC_BATCH_SIZE=256 SC_SHARD_SIZE=1024 \
      mpirun -np 1 "$bin/train" --epochs 3 --device gpu 2>&1) || { echo "$out"; exit 1; }
echo "$out"
wait_line=$(grep "^consumer wait:" <<<"$out")
loss_line=$(grep "^loss:" <<<"$out")
"$bin/bench_gpu" --size "$size" --producers 2,4,8 --runs 3 --doc docs/benchmarks.md \
    --label "$(date -u +%Y-%m-%d), $gpu" \
    --note "The example trainer on this GPU (CUDA kernels as the step, 1 rank, 65,536 samples of 3x64x64, 3 epochs; its steps only queue GPU work, so its wait in sc_batch_next counts the ring waiting for the GPU to release slots as well as data starvation): $wait_line; $loss_line."
