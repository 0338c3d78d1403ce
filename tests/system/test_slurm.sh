#!/usr/bin/env bash
# The Slurm batch scripts as shipped, on a real single-host Slurm cluster
# from Debian's packages (slurm-wlm, munge): munged, slurmctld and slurmd
# are started here with a generated configuration for this host (8 CPUs
# whatever the host has: SlurmdParameters=config_overrides) and stopped at
# the end whatever happens.  launch/slurm/stage.sbatch warms the caches,
# launch/slurm/train.sbatch runs after it, both submitted with
# --cpus-per-task=2 (4 ranks x 2 = the 8 CPUs); the job logs must show
# srun given those 2 cores per rank, exactly-once ok, a falling loss, a
# warm cache from the first epoch (>= 95% hits), the trace summary and
# Open MPI's session directory in a private directory (srun too); the
# scripts find shardcache from their submitted path, not from a planted
# launch/shardcache-run in the submit directory.  If
# the daemons cannot start here, the test says so and fails: it never skips.
. "$(dirname "$0")/lib.sh"
: "${SC_BUILD_DIR:?}" "${SC_SOURCE_DIR:?}"
d=$SC_T_TMP/slurm
mkdir -p "$d/state" "$d/spool" "$d/munge"
chmod 755 "$SC_T_TMP" "$d" "$d/munge"

cant() { failed "Slurm cannot run here: $*"; finish; exit 1; }
[ "$(id -u)" -eq 0 ] || cant "starting slurmd and munged needs root (CI runs as root)"
for c in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$c" >/dev/null || cant "'$c' is missing (scripts/test installs slurm-wlm and munge)"
done

stop_cluster() {
    local f
    for f in slurmd slurmctld munged; do
        [ -s "$d/$f.pid" ] && kill "$(cat "$d/$f.pid")" 2>/dev/null
    done
    sleep 1
    for f in slurmd slurmctld munged; do
        [ -s "$d/$f.pid" ] && kill -9 "$(cat "$d/$f.pid")" 2>/dev/null
    done
    rm -rf "$SC_T_TMP"
}
trap stop_cluster EXIT

host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$d/munge.key"
munged --force --key-file="$d/munge.key" --socket="$d/munge/sock" --pid-file="$d/munged.pid" \
    --log-file="$d/munged.log" --seed-file="$d/munge.seed" \
    || cant "munged did not start: $(tail -3 "$d/munged.log" 2>/dev/null)"

cat >"$d/slurm.conf" <<EOF
ClusterName=sctest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ReturnToService=2
MinJobAge=600
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$d/slurm.conf
slurmctld -f "$SLURM_CONF" || cant "slurmctld did not start: $(tail -3 "$d/slurmctld.log" 2>/dev/null)"
slurmd -f "$SLURM_CONF" || cant "slurmd did not start: $(tail -3 "$d/slurmd.log" 2>/dev/null)"
for _ in $(seq 60); do
    [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ] && break
    sleep 1
done
[ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ] \
    || cant "the node never became idle: $(sinfo -h -N -o '%t %E' 2>&1); $(tail -3 "$d/slurmd.log")"
pass "single-host Slurm cluster up ($host, 8 CPUs, port $port)"

# The job's inputs, as a user would set them before sbatch.
"$SC_BIN" make-dataset --out "$d/data.h5" --samples 8192 --shape 3x16x16 --labels 10 \
    --seed 4 >/dev/null
# No SHARDCACHE_HOME: the scripts find the checkout from the path they were
# submitted by (scontrol's Command=), not from the submit directory, where
# a planted launch/shardcache-run must not run.
unset SHARDCACHE_HOME
mkdir -p "$d/launch"
printf '#!/bin/sh\ntouch "%s/planted-ran"; exit 1\n' "$d" >"$d/launch/shardcache-run"
chmod 755 "$d/launch/shardcache-run"
export SHARDCACHE_BIN=$SC_BUILD_DIR/bin SC_SOURCE=$d/data.h5 \
    SC_CACHE_DIR=$d/cache SC_SHARD_SIZE=128 SC_BATCH_SIZE=32 SC_SHUFFLE=sticky SC_SEED=5 \
    STAGE_EPOCHS=1 TRAIN_ARGS="--epochs 3"
cd "$d" || cant "no directory $d"

# state ID: the job's state while Slurm remembers it.
state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
wait_job() {
    local s
    for _ in $(seq 300); do
        s=$(state "$1")
        case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$s"; return;; esac
        sleep 1
    done
    echo "still $(state "$1") after 300 s"
}

# The scripts ask 8 cores per rank, for real nodes; this one has 8 CPUs in all.
sid=$(sbatch --parsable --cpus-per-task=2 "$SC_SOURCE_DIR/launch/slurm/stage.sbatch") \
    || cant "sbatch refused stage.sbatch"
tid=$(sbatch --parsable --cpus-per-task=2 --dependency=afterok:"$sid" "$SC_SOURCE_DIR/launch/slurm/train.sbatch") \
    || cant "sbatch refused train.sbatch"
s=$(wait_job "$sid")
[ "$s" = COMPLETED ] && pass "stage.sbatch completed" \
    || { failed "stage.sbatch: $s"; tail -20 "shardcache-stage-$sid.out"; }
s=$(wait_job "$tid")
[ "$s" = COMPLETED ] && pass "train.sbatch completed" \
    || { failed "train.sbatch: $s"; tail -30 "shardcache-train-$tid.out"; }

slog=shardcache-stage-$sid.out tlog=shardcache-train-$tid.out
grep -q "4 ranks via srun" "$tlog" && pass "launched with srun (PMIx) inside the allocation" \
    || failed "train.sbatch did not launch with srun: $(grep 'shardcache-run:' "$tlog")"
grep -q "^+ srun --ntasks=4 --mpi=pmix --cpus-per-task=2 --cpu-bind=cores " "$tlog" \
    && grep -q "^+ srun --ntasks=4 --mpi=pmix --cpus-per-task=2 --cpu-bind=cores " "$slog" \
    && pass "both jobs' --cpus-per-task=2 reached srun: 2 cores bound per rank" \
    || failed "--cpus-per-task not passed on: $(grep -h '^+ srun' "$slog" "$tlog")"
grep -Eq "staged|hits|misses" "$slog" && pass "stage log shows the staged shards" \
    || { failed "stage log"; tail -10 "$slog"; }
grep -Eq "cache directories under|no caches under" "$slog" && pass "stage.sbatch ran shardcache cache gc first" \
    || { failed "no cache gc in the stage log"; head -10 "$slog"; }
grep -Eq "^exactly-once: ok \(3 epochs, [0-9]+ samples, 0 duplicated, 0 skipped\)$" "$tlog" \
    && pass "job log: exactly-once ok" || { failed "job log: exactly-once"; tail -20 "$tlog"; }
read -r first last < <(sed -n 's/^loss: \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' "$tlog")
awk -v a="${first:-0}" -v b="${last:-0}" 'BEGIN { exit !(b < a && b > 0) }' \
    && pass "job log: loss fell ($first -> $last)" || failed "job log: loss did not fall"
hit=$(sed -n 's/^epoch 0: .*cache hit rate \([0-9.]*\)%.*/\1/p' "$tlog")
awk -v h="${hit:-0}" 'BEGIN { exit !(h >= 95) }' \
    && pass "staged cache warm from the first epoch ($hit% hits)" \
    || failed "epoch 0 cache hit rate '${hit}', wanted >= 95%"
grep -Eq "^(bottleneck|verdict): " "$tlog" && pass "job log ends with the trace summary" \
    || failed "no trace summary in the job log"
[ ! -e "$d/planted-ran" ] && pass "the submit directory's launch/shardcache-run never ran" \
    || failed "the planted launch/shardcache-run ran"
[ -s "shardcache-$tid/trace/job.json" ] && pass "merged trace in the job's output directory" \
    || failed "no merged trace in shardcache-$tid/trace"
grep -q "^shardcache-run: Open MPI's session directory in the private " "$tlog" \
    && pass "Open MPI's session directory in a private directory (one node, srun too)" \
    || failed "no private session directory in the job log"
finish
