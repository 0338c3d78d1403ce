#!/usr/bin/env bash
# up.sh [N]: a virtual cluster on this machine (root): "head" (where mpirun,
# slurmctld and munged run) and node1..nodeN, each with
#   - its own network namespace: eth0 on bridge $VC_BR, address $VC_NET.(10+k),
#     no route out (IPv4 only);
#   - its own hostname (UTS) and IPC namespace (shared memory segments);
#   - its own mount namespace with a private tmpfs on /tmp and /dev/shm (its
#     node-local scratch) and the cluster's /etc/hosts;
# and everything else shared: the file system outside /tmp is the cluster's
# "parallel file system" (sources, binaries, job outputs), and the paths
# under /tmp that $VC_KEEP lists (a checkout or build there), which every
# node sees through its own /tmp.  No PID namespace:
# every process is visible from the host and killed by pid.  A holder
# process (sleep) keeps each node's namespaces; `vcx NODE CMD` runs in them.
# Prints the nodes and their addresses.  On any failure it tears down
# (down.sh); it refuses, saying why, when this machine cannot (vc_cannot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
n=${1:-2}
[[ $n =~ ^[1-9]$ ]] || vc_die "usage: up.sh [N]  (1..9 nodes besides head)"
why=$(vc_cannot)
[ -z "$why" ] || vc_die "cannot start: $why"
vc_up && vc_die "a virtual cluster is up already ($VC_STATE/nodes): tests/cluster/down.sh first"
ip link show "$VC_BR" >/dev/null 2>&1 && vc_die "a link named $VC_BR exists already"
nodes="head"
for k in $(seq "$n"); do nodes="$nodes node$k"; done
for nd in $nodes; do
    [ -e "/run/netns/$nd" ] && vc_die "a network namespace '$nd' exists already"
done

for p in ${VC_KEEP:-}; do
    [[ $p == /tmp/?* && -d $p ]] || vc_die "VC_KEEP: '$p' is not a directory under /tmp"
done
mkdir -p "$VC_STATE/log" "$VC_BIN" "$VC_STATE/keep"
cp "$here/lib.sh" "$here/vcx" "$here/agent.sh" "$VC_BIN/"
mountpoint -q /run/netns 2>/dev/null || touch "$VC_STATE/netns-mount-ours"
undo() { echo "vc: up.sh failed; tearing down" >&2; "$here/down.sh" >&2; }
trap '[ $? -eq 0 ] || undo' EXIT
{
    echo "127.0.0.1 localhost"
    for nd in $nodes; do echo "$(vc_ip "$nd") $nd"; done
} >"$VC_STATE/hosts"
for k in $(seq "$n"); do echo "node$k slots=$VC_SLOTS"; done >"$VC_STATE/hostfile"
: >"$VC_STATE/nodes"

ip link add "$VC_BR" type bridge
sysctl -qw "net.ipv6.conf.$VC_BR.disable_ipv6=1"
# br_netfilter (where loaded) would run the host's firewall on bridged frames.
ip link set "$VC_BR" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 2>/dev/null || true
ip addr add "$VC_NET.1/24" dev "$VC_BR"
ip link set "$VC_BR" up
for nd in $nodes; do
    echo "$nd" >>"$VC_STATE/nodes"   # first, so that down.sh removes a half-made node
    ip netns add "$nd"
    ip netns exec "$nd" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip link add "vc-$nd" type veth peer name eth0 netns "$nd"
    sysctl -qw "net.ipv6.conf.vc-$nd.disable_ipv6=1"
    ip link set "vc-$nd" master "$VC_BR" up
    ip -n "$nd" addr add "$(vc_ip "$nd")/24" dev eth0
    ip -n "$nd" link set lo up
    ip -n "$nd" link set eth0 up
    # The holder: nsenter --net (not `ip netns exec`, which remounts /sys),
    # then new UTS, IPC and mount namespaces; nsenter and unshare exec, so
    # the shell's $$ is the holder's pid.  Each VC_KEEP path is held at a
    # mount point under $VC_STATE/keep while the tmpfs covers /tmp, then put
    # back at its own path (in this node's namespace only).
    # shellcheck disable=SC2016
    setsid nsenter --net="/run/netns/$nd" unshare --uts --ipc --mount --propagation private -- \
        /bin/sh -c 'set -e
            hostname "$1"
            i=0; for p in $4; do i=$((i + 1)); mkdir -p "$2/keep/$1.$i"; mount --bind "$p" "$2/keep/$1.$i"; done
            mount -t tmpfs -o mode=1777,size="$3" "tmpfs-$1" /tmp
            i=0; for p in $4; do
                i=$((i + 1)); mkdir -p "$p"; mount --bind "$2/keep/$1.$i" "$p"; umount "$2/keep/$1.$i"
            done
            mount -t tmpfs -o mode=1777,size="$3" "shm-$1" /dev/shm
            mount --bind "$2/hosts" /etc/hosts
            echo $$ >"$2/$1.pid"
            exec sleep infinity' holder "$nd" "$VC_STATE" "$VC_TMPFS" "${VC_KEEP:-}" \
        </dev/null >>"$VC_STATE/log/holder-$nd.log" 2>&1 &
done
for nd in $nodes; do
    for _ in $(seq 100); do vc_pid "$nd" >/dev/null && break; sleep 0.05; done
    vc_pid "$nd" >/dev/null || vc_die "node $nd did not come up: $(cat "$VC_STATE/log/holder-$nd.log")"
done
echo "vc: up: $n nodes besides head on bridge $VC_BR ($VC_NET.0/24); each with its own /tmp ($VC_TMPFS tmpfs)"
for nd in $nodes; do
    # shellcheck disable=SC2016
    "$VC_BIN/vcx" "$nd" sh -c 'printf "vc:   %-6s %-12s %s\n" "$(hostname)" "$(ip -4 -o addr show eth0 | awk "{ print \$4 }")" "$1"' \
        sh "$(case $nd in head) echo "mpirun, slurmctld" ;; *) echo "$VC_SLOTS slots" ;; esac)"
done
