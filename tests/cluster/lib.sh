# shellcheck shell=bash
# tests/cluster/lib.sh: the virtual cluster's settings and helpers, sourced
# by up.sh, down.sh, vcx, slurm-up.sh and the tests.  Every setting can be
# overridden from the environment.  docs/testing.md, "The virtual cluster".
VC_STATE=${VC_STATE:-/run/vc}          # holder pids, hosts, hostfile, Slurm state, logs
VC_BR=${VC_BR:-vcbr0}                  # the bridge, in the host's network namespace
VC_NET=${VC_NET:-10.77.0}              # a /24: .1 the bridge, .10 head, .(10+k) nodek
VC_SLOTS=${VC_SLOTS:-2}                # ranks per node in the hostfile; Slurm's CPUs per node
VC_TMPFS=${VC_TMPFS:-512m}             # each node's private /tmp (its node-local scratch)
VC_KEEP=${VC_KEEP:-}                   # directories under /tmp every node still sees (a build)
export VC_STATE VC_BR VC_NET VC_SLOTS VC_KEEP
# The helpers as the nodes see them: a node's /tmp is its own, so nothing
# the nodes run may live under the host's /tmp (up.sh copies them here).
VC_BIN=$VC_STATE/bin

vc_die() { echo "vc: $*" >&2; exit 2; }

# vc_cannot: why this machine cannot run the cluster (one line), or nothing.
vc_cannot() {
    local c
    [ "$(id -u)" -eq 0 ] || { echo "the virtual cluster needs root (namespaces, a bridge, tmpfs mounts)"; return; }
    for c in ip unshare nsenter setsid mount; do
        command -v "$c" >/dev/null || { echo "'$c' is missing (util-linux, iproute2)"; return; }
    done
    unshare --net --uts --ipc --mount true 2>/dev/null \
        || echo "unshare cannot make namespaces here (no CAP_SYS_ADMIN: a container without privileges?)"
}

vc_ip() { # vc_ip NODE: its address
    case $1 in
        head) echo "$VC_NET.10" ;;
        node[1-9]*) echo "$VC_NET.$((10 + ${1#node}))" ;;
        *) return 1 ;;
    esac
}
vc_pid() { # vc_pid NODE: the pid of the node's holder (its namespaces), if alive
    local p
    p=$(cat "$VC_STATE/$1.pid" 2>/dev/null) && [ -d "/proc/$p" ] && echo "$p"
}
vc_nodes() { cat "$VC_STATE/nodes" 2>/dev/null; }              # head node1 .. nodeN
vc_workers() { vc_nodes | grep -v '^head$'; }                 # node1 .. nodeN
vc_up() { [ -e "$VC_STATE/nodes" ]; }

# vc_env: the environment of jobs on the cluster, for mpirun and srun alike:
# TCP between nodes (a test environment's OMPI_MCA_btl=self,vader would
# forbid it), MPI waits that yield the core (the nodes share this machine's
# cores, which neither shardcache-run nor Open MPI can see), Slurm's config,
# and agent.sh instead of ssh for any mpirun (shardcache-run's too).
vc_env() {
    export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mpi_yield_when_idle=1 SLURM_CONF=$VC_STATE/slurm/slurm.conf \
        OMPI_MCA_plm_rsh_agent=$VC_BIN/agent.sh
}

# vc_mpirun ARGS...: mpirun inside head, starting its daemons in the nodes
# through agent.sh instead of ssh; VC_SLOTS ranks a node (hostfile).
VC_MPIRUN=("$VC_BIN/vcx" head mpirun --hostfile "$VC_STATE/hostfile" --mca plm_rsh_agent "$VC_BIN/agent.sh")
vc_mpirun() { "${VC_MPIRUN[@]}" "$@"; }
