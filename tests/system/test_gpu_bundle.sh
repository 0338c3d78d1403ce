#!/usr/bin/env bash
# scripts/gpu-bundle: what a GPU machine without our packages runs (see
# bench/gpu.sh).  The bundle must work where none of Open MPI, PMIx,
# parallel HDF5 or their libraries is installed: each check runs in a mount
# namespace whose /usr/lib/x86_64-linux-gnu holds only the C and C++
# runtimes and the shell tools' libraries, with Open MPI's help texts,
# orted and cmake hidden.  There: make-dataset, a one-rank job (an MPI
# singleton, which starts the bundle's orted) and a two-rank job under the
# bundle's mpirun, exactly once; and bench/gpu.sh, from the bundle, as far
# as the GPU it needs (a stand-in nvidia-smi names one; train then finds no
# device and says so).  Its programs carry one CUDA runtime, the shared
# libcudart the library links, and no static copy (cudart_static, nvcc's
# default); scripts/gpu-check refuses plainly without a GPU.  Skipped (77)
# without the CUDA toolkit.
. "$(dirname "$0")/lib.sh"
: "${SC_SOURCE_DIR:?}"
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "skipped: no CUDA toolkit in /usr/local/cuda"
    exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
    failed "needs root: a mount namespace hides the system's libraries"
    finish
    exit
fi

bundle=$SC_T_TMP/bundle
expect_ok "the bundle builds" "^gpu-bundle: " "$SC_SOURCE_DIR/scripts/gpu-bundle" "$bundle"
kib=$(du -sk "$bundle" | cut -f1)
if [ "$kib" -lt $((60 * 1024)) ]; then pass "the bundle is ${kib} KiB (a device run carries 64 MiB)"
else failed "the bundle is ${kib} KiB, over the 60 MiB a device run can carry with the tree"; fi

# One CUDA runtime per program: the shared libcudart, needed once, and none of
# cudart_static's definitions (cudaMalloc & co., __cudart*) linked in; nor is
# cudart_static on any link line (where the shared one comes first, nothing
# of it is linked, but the order is all that keeps it out).
build=$SC_SOURCE_DIR/build/gpu-bundle
if grep -rqs -- cudart_static "$build/examples" "$build/bench" "$build/build.ninja"; then
    failed "cudart_static is on a link line: $(grep -rls -- cudart_static "$build/examples" "$build/bench" "$build/build.ninja" | head -3)"
else
    pass "no link line names cudart_static"
fi
for prog in bin/train bin/bench_gpu lib/libshardcache.so; do
    f=$bundle/$prog
    needed=$(readelf -d "$f" | grep -c 'NEEDED.*\[libcudart\.so')
    static=$(nm --defined-only "$f" 2>/dev/null | grep -cE ' [TtDdBbRr] (cuda[A-Z]|__cudart)')
    imports=$(nm -D --undefined-only "$f" | grep -c ' cuda[A-Z]')
    if [ "$needed" -eq 1 ] && [ "$static" -eq 0 ] && [ "$imports" -gt 0 ]; then
        pass "$prog: one CUDA runtime, the shared libcudart ($imports calls into it)"
    else
        failed "$prog: libcudart needed $needed times, $static static cudart definitions, $imports imports"
    fi
done

# hidden.sh CMD...: CMD with the system's libraries hidden, the bundle's env.
multi=/usr/lib/x86_64-linux-gnu
keep=$SC_T_TMP/keep
mkdir -p "$keep" "$SC_T_TMP/fake" "$SC_T_TMP/nogpu"
for tool in bash sh env id grep mktemp date cat rm head dirname nproc cut du; do
    ldd "$(command -v "$tool")" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do cp -L "$lib" "$keep/"; done
for lib in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
           libstdc++.so.6 libgcc_s.so.1 libatomic.so.1 ld-linux-x86-64.so.2; do
    [ -e "$multi/$lib" ] && cp -L "$multi/$lib" "$keep/"
done
printf '#!/bin/sh\necho "Stand-in GPU"\n' >"$SC_T_TMP/fake/nvidia-smi"
chmod +x "$SC_T_TMP/fake/nvidia-smi"
cat >"$SC_T_TMP/hidden.sh" <<EOF
set -e
mount -t tmpfs none /usr/share/openmpi
mount --bind /dev/null /usr/bin/orted
[ -e /usr/bin/cmake ] && mount --bind /dev/null /usr/bin/cmake
mount --bind "$keep" "$multi"
. "$bundle/env.sh"
export PATH=$SC_T_TMP/fake:\$PATH
cd "$SC_T_TMP"
exec "\$@"
EOF
hidden() { unshare -m bash "$SC_T_TMP/hidden.sh" "$@"; }

expect_fail "hidden: the system's Open MPI is out of reach" "cannot open shared object" \
    hidden env -u LD_LIBRARY_PATH /usr/bin/mpirun.openmpi --version
expect_ok "hidden: make-dataset" "^wrote " \
    hidden shardcache make-dataset --out "$SC_T_TMP/d.h5" --samples 4096 --shape 3x8x8 --labels 10
expect_ok "hidden: one rank (singleton, the bundle's orted), exactly once" "^exactly-once: ok" \
    hidden env SC_CACHE_DIR="$SC_T_TMP/c1" train --epochs 2 --device cpu --source "$SC_T_TMP/d.h5"
expect_ok "hidden: two ranks under the bundle's mpirun, exactly once" "^exactly-once: ok" \
    hidden env SC_CACHE_DIR="$SC_T_TMP/c2" mpirun -np 2 --oversubscribe \
    train --epochs 2 --device cpu --source "$SC_T_TMP/d.h5"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed" >&2; exit 9\n' >"$SC_T_TMP/nogpu/nvidia-smi"
chmod +x "$SC_T_TMP/nogpu/nvidia-smi"
expect_fail "scripts/gpu-check refuses without a GPU, plainly" "^gpu-check: no GPU is visible" \
    env PATH="$SC_T_TMP/nogpu:$PATH" OUT="$SC_T_TMP/gc" bash "$SC_SOURCE_DIR/scripts/gpu-check"
if [ ! -e "$SC_T_TMP/gc" ]; then pass "and runs nothing"
else failed "gpu-check wrote $SC_T_TMP/gc without a GPU"; fi
out=$(hidden mpi_test_gpu 2>&1); rc=$?
[ "$rc" -eq 77 ] && grep -q "^skipped: no GPU visible" <<<"$out" \
    && pass "hidden: the GPU tests run from the bundle and skip without a GPU" \
    || { failed "hidden: mpi_test_gpu exit $rc, wanted 77"; tail -5 <<<"$out"; }
expect_fail "hidden: bench/gpu.sh runs from the bundle up to the GPU" \
    "SC_DEVICE=cuda but CUDA shows no device to node-local rank 0" \
    hidden env SC_GPU_BUNDLE="$bundle" bash "$SC_SOURCE_DIR/bench/gpu.sh" --size 16
finish
