#!/usr/bin/env bash
# slurm-up.sh: Slurm on the running virtual cluster (up.sh first): munged
# and slurmctld in head, a slurmd in each node ($VC_SLOTS CPUs each).  Use
# it from head: SLURM_CONF=$VC_STATE/slurm/slurm.conf vcx head srun ...
# down.sh stops the daemons with everything else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
s=$VC_STATE/slurm
vc_up || vc_die "the virtual cluster is not up (tests/cluster/up.sh)"
for c in munged slurmctld slurmd sinfo srun; do
    command -v $c >/dev/null || vc_die "'$c' is missing (apt-get install slurm-wlm munge)"
done
for d in munged slurmctld; do
    p=$(cat "$s/$d.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null \
        && vc_die "Slurm is up already ($d, pid $p): tests/cluster/down.sh stops the cluster"
done
mkdir -p "$s/state"
chmod 700 "$s"
workers=$(vc_workers)
dd if=/dev/urandom of="$s/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$s/munge.key"
"$VC_BIN/vcx" head munged --force --key-file="$s/munge.key" --socket="$s/munge.sock" \
    --pid-file="$s/munged.pid" --log-file="$VC_STATE/log/munged.log" --seed-file="$s/munge.seed"
lines=$(for nd in $workers; do echo "NodeName=$nd NodeAddr=$(vc_ip "$nd") CPUs=$VC_SLOTS State=UNKNOWN"; done)
awk -v nodes="$lines" -v list="$(paste -sd, <<<"$workers")" -v state="$VC_STATE" -v net="$VC_NET" '
    { gsub(/@STATE@/, state); gsub(/@NET@/, net); gsub(/@LIST@/, list) }
    /^@NODES@$/ { print nodes; next } { print }' "$here/slurm.conf.in" >"$s/slurm.conf"
export SLURM_CONF=$s/slurm.conf
"$VC_BIN/vcx" head slurmctld -f "$SLURM_CONF"
for nd in $workers; do
    "$VC_BIN/vcx" "$nd" mkdir -p /tmp/slurmd
    "$VC_BIN/vcx" "$nd" slurmd -f "$SLURM_CONF"
done
want=$(wc -w <<<"$workers") idle=0
for _ in $(seq 120); do
    idle=$("$VC_BIN/vcx" head sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    [ "$idle" -eq "$want" ] && break
    sleep 0.25
done
[ "$idle" -eq "$want" ] || vc_die "only $idle of $want slurmd idle: $("$VC_BIN/vcx" head sinfo -N -o '%N %t %E' 2>&1); see $VC_STATE/log"
echo "vc: slurm up: $want nodes idle, partition vc; export SLURM_CONF=$SLURM_CONF"
