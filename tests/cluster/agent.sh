#!/bin/sh
# agent.sh: Open MPI's remote shell (--mca plm_rsh_agent agent.sh) for the
# virtual cluster: "logs in" to a node by entering its namespaces instead of
# ssh.  Called as ssh is: agent.sh [-options] HOST WORDS...; like ssh it
# joins the words for a shell on the node, with a fresh environment (mpirun
# passes what its daemon needs on the command line; -x passes the rest).
VC_STATE=${VC_STATE:-/run/vc}
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
host=${1:?usage: agent.sh HOST COMMAND...}; shift
# A node named by its address, or with a domain.
case $host in
    *[0-9].*[0-9].*[0-9].*[0-9]) host=$(awk -v a="$host" '$1 == a { print $2; exit }' "$VC_STATE/hosts") ;;
    *) host=${host%%.*} ;;
esac
pid=$(cat "$VC_STATE/$host.pid" 2>/dev/null) || pid=""
if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then
    echo "agent.sh: no virtual node '$host'" >&2
    exit 255
fi
# The agent itself stays where mpirun is (as ssh does): when the node dies
# it is left to say so, as ssh says "Connection to HOST closed".
nsenter -t "$pid" -n -u -i -m -- env -i PATH="$PATH" HOME="${HOME:-/root}" \
    LANG="${LANG:-C.UTF-8}" USER="${USER:-root}" VC_STATE="$VC_STATE" \
    ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} \
    ${OMPI_ALLOW_RUN_AS_ROOT:+OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1} \
    /bin/sh -c "cd / && $*"
rc=$?
if [ $rc -gt 128 ] || [ ! -d "/proc/$pid" ]; then
    echo "agent.sh: connection to $host closed: its processes died (status $rc)" >&2
fi
exit $rc
