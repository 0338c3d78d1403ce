#!/usr/bin/env bash
# down.sh: tear the virtual cluster down; safe to run twice, or after a
# half-made up.sh.  Every process inside a node (holders, daemons, orted,
# ranks, slurmstepd) is in the node's network namespace: TERM them by pid,
# KILL what is left after VC_GRACE seconds (slurmstepd ignores TERM), then
# delete the namespaces, links and bridge, and $VC_STATE (VC_KEEP_LOGS=DIR
# copies its logs first).  The nodes' /tmp tmpfs go with their last process.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
nodes=$(vc_nodes)
pids_in() {
    local nd
    for nd in $nodes; do
        [ -e "/run/netns/$nd" ] && ip netns pids "$nd" 2>/dev/null
        vc_pid "$nd"
    done
    return 0
}
alive() { # running, not a zombie waiting to be reaped
    local st
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${st##*) }
    [ "${st%% *}" != Z ]
}
left() { local p; for p in $(pids_in | sort -un); do alive "$p" && echo "$p"; done; }
pids=$(left)
if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for _ in $(seq $((${VC_GRACE:-3} * 10))); do
        [ -z "$(left)" ] && break
        sleep 0.1
    done
    for _ in 1 2 3 4 5; do   # what is left, and what forked meanwhile
        pids=$(left)
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null
        sleep 0.2
    done
fi
rest=$(left)
if [ -n "${VC_KEEP_LOGS:-}" ] && [ -d "$VC_STATE/log" ]; then
    mkdir -p "$VC_KEEP_LOGS" && cp -r "$VC_STATE/log/." "$VC_KEEP_LOGS/" 2>/dev/null
fi
for nd in $nodes; do
    ip netns del "$nd" 2>/dev/null
    ip link del "vc-$nd" 2>/dev/null
done
ip link del "$VC_BR" 2>/dev/null
if [ -e "$VC_STATE/netns-mount-ours" ] && mountpoint -q /run/netns && [ -z "$(ls -A /run/netns)" ]; then
    umount /run/netns 2>/dev/null
fi
rm -rf "$VC_STATE"
echo "vc: down${rest:+; still alive: $rest}"
[ -z "$rest" ]
