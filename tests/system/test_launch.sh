#!/usr/bin/env bash
# launch/ as shipped: every script passes shellcheck; shardcache-run prints
# what it would run (--dry-run) and where each rank goes (blocks of cores;
# near its GPU from a saved 8-GPU two-socket `nvidia-smi topo -m`, with
# mpirun and srun), refuses bad input by name, binds two real ranks to
# cores of their own, and runs a real job with mpirun: staging first,
# tracing on, the summary at the end, its own temporary cache and its
# private Open MPI session directory removed afterwards.  The Slurm
# scripts' copies of outdir.sh's sc_others_may_write are its text.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}" "${SC_SOURCE_DIR:?}"
run=$SC_SOURCE_DIR/launch/shardcache-run
train=$SC_BUILD_DIR/bin/train

if command -v shellcheck >/dev/null; then
    for f in "$SC_SOURCE_DIR"/launch/shardcache-run "$SC_SOURCE_DIR"/launch/slurm/*.sbatch \
             "$SC_SOURCE_DIR"/scripts/demo "$SC_SOURCE_DIR"/scripts/test "$SC_SOURCE_DIR"/scripts/bench \
             "$SC_SOURCE_DIR"/scripts/lib.sh "$SC_SOURCE_DIR"/scripts/gpu-bundle \
             "$SC_SOURCE_DIR"/bench/gpu.sh "$SC_SOURCE_DIR"/tests/cluster/*.sh \
             "$SC_SOURCE_DIR"/tests/cluster/vcx; do
        [ -e "$f" ] || continue
        expect_ok "shellcheck ${f#"$SC_SOURCE_DIR"/}" "" shellcheck -x -e SC1091,SC2086 "$f"
    done
else
    failed "shellcheck is missing (scripts/test installs Debian's shellcheck)"
fi

# The Slurm scripts check their installation with a copy of outdir.sh's
# sc_others_may_write (before anything there is trusted): the same text.
want=$(sed -n '/^sc_others_may_write() {$/,/^}$/p' "$SC_SOURCE_DIR/launch/outdir.sh")
for f in "$SC_SOURCE_DIR"/launch/slurm/*.sbatch; do
    [ -n "$want" ] && [ "$(sed -n '/^sc_others_may_write() {$/,/^}$/p' "$f")" = "$want" ] \
        && pass "${f##*/}: its sc_others_may_write is outdir.sh's" || failed "${f##*/}: sc_others_may_write differs from outdir.sh's"
done

# launch/ompi.env is the one list: every setting in it reaches ctest's tests too.
while IFS= read -r line; do
    case $line in '' | '#'*) continue ;; esac
    line=${line#one-node: } # the suite's jobs run on one node
    grep -qF "$line" "$SC_BUILD_DIR/tests/CTestTestfile.cmake" && pass "ctest gets $line" \
        || failed "ompi.env's $line is not in the tests' environment"
done <"$SC_SOURCE_DIR/launch/ompi.env"

unset SLURM_JOB_ID SC_CACHE_DIR SLURM_TMPDIR SHARDCACHE_GPU_TOPO SHARDCACHE_CPU_TOPO OMPI_MCA_mpi_yield_when_idle
# No GPUs unless a test says so: block placement, the same on any machine.
export CUDA_VISIBLE_DEVICES=
data=$SC_SOURCE_DIR/tests/system/data
# Cores here (not hyperthreads) and the block of cores each of N ranks gets.
cores=$(($(nproc) / $(lscpu | awk -F: '/^Thread\(s\) per core/ { t = $2 + 0 } END { print t ? t : 1 }')))
block() { local k=$((cores / $1)); echo $((k > 0 ? k : 1)); }

expect_ok "dry run: mpirun, ranks, a block of cores per rank, forwarded settings" \
    "^\+ mpirun -np 2 --map-by ppr:2:node:pe=$(block 2) --bind-to core .*-x SC_SEED .* $train --epochs 2$" \
    env SC_SEED=4 "$run" --dry-run -n 2 -- "$train" --epochs 2
expect_ok "dry run: the placement is said" \
    "^shardcache-run: placement: 2 ranks per node, $(block 2) cores each \($cores cores on this node / 2 ranks\)$" \
    "$run" --dry-run -n 2 -- "$train"
expect_ok "dry run: one rank gets all $cores cores" "^\+ mpirun -np 1 --map-by ppr:1:node:pe=$cores --bind-to core " \
    "$run" --dry-run -n 1 -- "$train"
expect_ok "dry run: 4 ranks, $(block 4) cores each" "^\+ mpirun -np 4 --map-by ppr:4:node:pe=$(block 4) --bind-to core " \
    "$run" --dry-run -n 4 -- "$train"
expect_ok "dry run: --cores-per-rank sets the block" "^\+ mpirun -np 2 --map-by ppr:2:node:pe=3 --bind-to core " \
    "$run" --dry-run -n 2 --cores-per-rank 3 -- "$train"
expect_ok "dry run: ... and says so" "^shardcache-run: placement: 2 ranks per node, 3 cores each \(--cores-per-rank\)$" \
    "$run" --dry-run -n 2 --cores-per-rank 3 -- "$train"
out=$("$run" --dry-run -n 4 --oversubscribe -- "$train" 2>&1)
grep -q -- "^+ mpirun -np 4 --oversubscribe --bind-to none " <<<"$out" && ! grep -q -- "pe=\|--bind-to core" <<<"$out" \
    && pass "dry run: --oversubscribe leaves ranks unbound" || { failed "--oversubscribe placement"; echo "$out"; }
# Oversubscribed, MPI waits yield the core (srun would not tell Open MPI); not otherwise.
expect_ok "dry run: more ranks than cores: MPI waits yield" \
    "^shardcache-run: MPI waits yield the core \(OMPI_MCA_mpi_yield_when_idle=1: $((cores + 1)) ranks x 1 cores > $cores cores here\)$" \
    "$run" --dry-run -n $((cores + 1)) -- "$train"
out=$("$run" --dry-run -n 1 -- "$train" 2>&1)
grep -q "yield" <<<"$out" && { failed "1 rank on $cores cores: yields"; echo "$out"; } \
    || pass "dry run: 1 rank: MPI waits spin (Open MPI's default)"
expect_ok "dry run: --overcommit under Slurm: MPI waits yield" "-x OMPI_MCA_mpi_yield_when_idle" \
    env SLURM_JOB_ID=1 SLURM_NTASKS=2 SLURM_OVERCOMMIT=1 "$run" --dry-run --launcher mpirun -- "$train"
# A saved two-socket machine: 96 cores, 192 hyperthreads; 8 ranks get 12 cores, not 24.
expect_ok "dry run: cores, not hyperthreads (lscpu -p of a 2x48-core SMT machine)" \
    "^\+ mpirun -np 8 --map-by ppr:8:node:pe=12 --bind-to core " \
    env SHARDCACHE_CPU_TOPO="$data/lscpu-2socket-96core.txt" "$run" --dry-run -n 8 -- "$train"

# srun (a stand-in that has PMIx; a dry run starts nothing): --cpus-per-task
# from the job, else the job's CPUs on a node / ranks per node.
mkdir -p "$SC_T_TMP/srun"
printf '#!/bin/sh\necho "MPI plugin types are..."; echo pmix\n' >"$SC_T_TMP/srun/srun"
chmod +x "$SC_T_TMP/srun/srun"
slurm=(env PATH="$SC_T_TMP/srun:$PATH" SLURM_JOB_ID=1 SLURM_NTASKS=8 SLURM_JOB_NUM_NODES=2)
expect_ok "dry run: srun gets the job's --cpus-per-task, cores bound" \
    "^\+ srun --ntasks=8 --mpi=pmix --cpus-per-task=6 --cpu-bind=cores --export=ALL $train$" \
    "${slurm[@]}" SLURM_CPUS_PER_TASK=6 "$run" --dry-run -- "$train"
expect_ok "dry run: srun, the job's 32 CPUs a node / 4 ranks a node" \
    "^\+ srun --ntasks=8 --mpi=pmix --cpus-per-task=8 --cpu-bind=cores " \
    "${slurm[@]}" SLURM_CPUS_ON_NODE=32 "$run" --dry-run -- "$train"
expect_ok "dry run: mpirun inside the allocation, 4 ranks a node" \
    "^\+ mpirun -np 8 --map-by ppr:4:node:pe=6 --bind-to core " \
    "${slurm[@]}" SLURM_CPUS_PER_TASK=6 "$run" --dry-run --launcher mpirun -- "$train"

# Near the GPUs: the saved 8-GPU machine, GPUs 0-3 on socket 0 (CPUs
# 0-47,96-143), 4-7 on socket 1.
topo=$data/nvidia-smi-topo-8gpu-2socket.txt
# same NAME WANT CMD...: CMD exits 0 and prints exactly WANT.
same() {
    local name=$1 want=$2 out
    shift 2
    out=$("$@" 2>&1) && [ "$out" = "$want" ] && pass "$name" \
        || { failed "$name"; diff <(echo "$want") <(echo "$out"); }
}
same "--print-gpu-cpus: each GPU's CPUs and NUMA node" "GPU0 0-47,96-143 0
GPU1 0-47,96-143 0
GPU2 0-47,96-143 0
GPU3 0-47,96-143 0
GPU4 48-95,144-191 1
GPU5 48-95,144-191 1
GPU6 48-95,144-191 1
GPU7 48-95,144-191 1" "$run" --print-gpu-cpus "$topo"
# Padded with spaces, the header underlined (a terminal's), one GPU N/A.
printf '\033[4m        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID\033[0m\n%s\n%s\n%s\n\nLegend:\n' \
    'GPU0     X      SYS     PIX     0-23            0               N/A' \
    'GPU1    SYS      X      SYS     N/A             N/A             N/A' \
    'NIC0    PIX     SYS      X' >"$SC_T_TMP/topo-spaces.txt"
same "--print-gpu-cpus: spaces, underline, an N/A GPU left out" "GPU0 0-23 0" \
    "$run" --print-gpu-cpus - <"$SC_T_TMP/topo-spaces.txt"
expect_fail "--print-gpu-cpus: no topology" "no GPU with a CPU affinity" "$run" --print-gpu-cpus /dev/null
gpu=(env -u CUDA_VISIBLE_DEVICES SHARDCACHE_GPU_TOPO="$topo" SHARDCACHE_CPU_TOPO="$data/lscpu-2socket-96core.txt")
out=$("${gpu[@]}" "$run" --dry-run -- "$train" 2>&1)
grep -q "^shardcache-run: 8 ranks via mpirun, 8 GPUs" <<<"$out" \
    && grep -q "^shardcache-run:   local rank 0: GPU0, NUMA node 0, CPUs 0-11,96-107$" <<<"$out" \
    && grep -q "^shardcache-run:   local rank 5: GPU5, NUMA node 1, CPUs 60-71,156-167$" <<<"$out" \
    && pass "dry run: 8 ranks, each on 12 cores (and their hyperthreads) of its GPU's socket" \
    || { failed "GPU placement"; echo "$out"; }
grep -q "^shardcache-run:   rankfile: rank 3=$(hostname) slot=36-47,132-143$" <<<"$out" \
    && grep -q "^shardcache-run:   rankfile: rank 7=$(hostname) slot=84-95,180-191$" <<<"$out" \
    && grep -Eq "^\+ mpirun -np 8 --rankfile [^ ]+ --mca rmaps_rank_file_physical 1 " <<<"$out" \
    && pass "dry run: mpirun binds them with a physical rankfile" || { failed "GPU rankfile"; echo "$out"; }
expect_ok "dry run: GPUs 4,5 only: both ranks on socket 1, half of it each" \
    "^shardcache-run:   local rank 1: GPU5, NUMA node 1, CPUs 72-95,168-191$" \
    "${gpu[@]}" CUDA_VISIBLE_DEVICES=4,5 "$run" --dry-run -- "$train"
expect_ok "dry run: srun binds them with CPU masks" \
    "^\+ srun --ntasks=8 --mpi=pmix --cpus-per-task=12 --cpu-bind=mask_cpu:0xfff000000000000000000000fff\\\\,0xfff000000000000000000000fff000\\\\,.*,0xfff000000000000000000000fff000000000000000000000 --export=ALL --gpus-per-task=1 " \
    "${gpu[@]}" PATH="$SC_T_TMP/srun:$PATH" SLURM_JOB_ID=1 SLURM_NTASKS=8 SLURM_CPUS_PER_TASK=12 \
    "$run" --dry-run -- "$train"
expect_ok "dry run: --cores-per-rank 5 near GPUs 4,5: CPUs 48-52,144-148 and 53-57,149-153, as masks" \
    "^\+ srun --ntasks=2 --mpi=pmix --cpus-per-task=5 --cpu-bind=mask_cpu:0x1f00000000000000000000001f000000000000\\\\,0x3e00000000000000000000003e0000000000000 " \
    "${gpu[@]}" CUDA_VISIBLE_DEVICES=4,5 PATH="$SC_T_TMP/srun:$PATH" SLURM_JOB_ID=1 SLURM_NTASKS=2 \
    "$run" --dry-run --cores-per-rank 5 -- "$train"
out=$("${gpu[@]}" "$run" --dry-run --oversubscribe -- "$train" 2>&1)
grep -q -- "^+ mpirun -np 8 --oversubscribe --bind-to none " <<<"$out" && ! grep -q rankfile <<<"$out" \
    && pass "dry run: --oversubscribe: no GPU binding either" || { failed "GPU + --oversubscribe"; echo "$out"; }

# Many nodes without Slurm: --hostfile (comments, repeats and slots= ignored).
printf '# two nodes\nnodeA slots=8\n\nnodeB\nnodeA\n' >"$SC_T_TMP/hosts"
expect_ok "dry run: --hostfile: mpirun on its nodes, ranks per node from them" \
    "^\+ mpirun -np 4 --hostfile $SC_T_TMP/hosts --map-by ppr:2:node:pe=$(block 2) --bind-to core " \
    "$run" --dry-run -n 4 --hostfile "$SC_T_TMP/hosts" -- "$train"
# One node: Open MPI over shared memory only, no TCP transport listening
# (ompi.env's one-node line); across nodes TCP stays.
expect_ok "dry run: one node: OMPI_MCA_btl=self,vader set, forwarded and said" \
    "^shardcache-run: one node: Open MPI over shared memory only" \
    env -u OMPI_MCA_btl "$run" --dry-run -n 2 -- "$train"
out=$(env -u OMPI_MCA_btl "$run" --dry-run -n 2 -- "$train" 2>&1)
grep -q -- "-x OMPI_MCA_btl " <<<"$out" && pass "dry run: one node: -x OMPI_MCA_btl" || failed "one node: btl not forwarded: $out"
out=$(env -u OMPI_MCA_btl "$run" --dry-run -n 4 --hostfile "$SC_T_TMP/hosts" -- "$train" 2>&1)
! grep -q "OMPI_MCA_btl\b" <<<"$out" && pass "dry run: two nodes: the TCP transport left on" \
    || failed "two nodes got OMPI_MCA_btl: $out"
expect_ok "dry run: --hostfile: the nodes are said" "^shardcache-run: 2 nodes \($SC_T_TMP/hosts\): nodeA nodeB$" \
    "$run" --dry-run -n 4 --hostfile "$SC_T_TMP/hosts" -- "$train"
expect_ok "dry run: --hostfile: ranks default to the nodes x the GPUs of this one" \
    "^shardcache-run:   rankfile: rank 13=nodeB slot=60-71,156-167$" \
    "${gpu[@]}" "$run" --dry-run --hostfile "$SC_T_TMP/hosts" -- "$train"
expect_fail "--hostfile: fewer slots than ranks a node: refused, naming the host" \
    "the hostfile gives nodeA 8 slots, fewer than the 9 ranks a node of 18 ranks on 2 nodes" \
    "$run" --dry-run -n 18 --hostfile "$SC_T_TMP/hosts" -- "$train"
expect_ok "dry run: --hostfile: --oversubscribe passes more" "^\+ mpirun -np 18 --hostfile .* --oversubscribe " \
    "$run" --dry-run -n 18 --oversubscribe --hostfile "$SC_T_TMP/hosts" -- "$train"
expect_fail "--hostfile with srun: refused" "--hostfile is for mpirun" \
    "$run" --dry-run --launcher srun --hostfile "$SC_T_TMP/hosts" -- "$train"
expect_fail "--hostfile naming no host: refused" "names no host" \
    "$run" --dry-run --hostfile /dev/null -- "$train"
expect_fail "--hostfile unreadable: refused" "cannot read the hostfile '$SC_T_TMP/none'" \
    "$run" --dry-run --hostfile "$SC_T_TMP/none" -- "$train"

expect_ok "dry run: staging first, with the same settings" "^\+ mpirun .* stage --epochs 2$" \
    env SHARDCACHE="$SC_BIN" "$run" --dry-run -n 2 --stage 2 -- "$train"
expect_ok "dry run: staging with the shardcache beside the trainer, said" \
    "^shardcache-run: the shardcache command: $(dirname "$train")/shardcache$" \
    env -u SHARDCACHE "$run" --dry-run -n 2 --stage 1 -- "$train"
expect_ok "dry run: the library's default cache" "cache in the default .*/shardcache-$(id -u)$" \
    "$run" --dry-run -n 2 -- "$train"
out=$("$run" --dry-run -n 2 -- "$train" 2>&1)
grep -q -- "-x SC_CACHE_DIR" <<<"$out" && failed "SC_CACHE_DIR forwarded though unset" \
    || pass "no SC_CACHE_DIR of its own: the library's rule applies"
expect_ok "dry run: SC_CACHE_DIR is kept" "cache in /scratch/mine$" \
    env SC_CACHE_DIR=/scratch/mine "$run" --dry-run -n 2 -- "$train"
expect_ok "dry run: -x forwards a setting" "-x SC_BATCH_SIZE" \
    "$run" --dry-run -n 2 -x SC_BATCH_SIZE=64 -- "$train"
expect_ok "dry run: one rank per core without GPUs" "^shardcache-run: $cores ranks via mpirun, 0 GPUs" \
    env CUDA_VISIBLE_DEVICES= "$run" --dry-run -- "$train"
expect_ok "dry run: one rank per visible GPU" "^shardcache-run: 3 ranks via mpirun, 3 GPUs" \
    env CUDA_VISIBLE_DEVICES=0,1,2 "$run" --dry-run -- "$train"
expect_fail "no command" "no training command given" "$run" -n 2
expect_fail "bad rank count" "--ranks must be a positive integer, not 'four'" "$run" -n four -- true
expect_fail "bad launcher" "--launcher must be auto, mpirun or srun, not 'ssh'" \
    "$run" --launcher ssh -- true
expect_fail "unknown option" "unknown option '--nope'" "$run" --nope -- true
expect_fail "bad cores per rank" "--cores-per-rank must be a positive integer, not '0'" \
    "$run" --cores-per-rank 0 -- true

# Two real ranks, each bound to cores of its own (none of the other's).
if [ "$cores" -ge 2 ]; then
    out=$("$run" -n 2 -- sh -c 'sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status' 2>&1)
    mine=$(sed -n 's/^Cpus_allowed_list:\t//p' /proc/self/status)
    sets=$(grep -E '^[0-9][0-9,-]*$' <<<"$out" | sort -u)
    [ "$(grep -c . <<<"$sets")" = 2 ] && ! grep -qx "$mine" <<<"$sets" \
        && pass "a real 2-rank job: two distinct blocks ($(tr '\n' ' ' <<<"$sets"))" \
        || { failed "real binding"; echo "$out"; }
else
    pass "one core here: no 2-rank binding to check"
fi

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
grep -q "^shardcache-run: Open MPI's session directory in the private $SC_T_TMP/shardcache-ompi\." <<<"$out" \
    && ! compgen -G "$SC_T_TMP/shardcache-ompi.*" >/dev/null \
    && pass "Open MPI's session directory in a private directory of its own, removed at the end" \
    || { failed "Open MPI's session directory"; grep "session" <<<"$out"; ls "$SC_T_TMP"; }
# No SC_CACHE_DIR: staging and training used the library's default, private to the user.
root=$SC_T_TMP/shardcache-$(id -u)
compgen -G "$root/shardcache-*-l*/s*.h5" >/dev/null && [ "$(stat -c %a "$root")" = 700 ] \
    && pass "the cache is in the default root, $root, mode 700" \
    || { failed "no cache under $root (or not 0700)"; ls -la "$SC_T_TMP" "$root" 2>&1 | head; }
finish
