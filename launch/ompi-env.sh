# ompi-env.sh - source it (bash): exports the Open MPI settings listed in
# ompi.env beside it, keeping any value already set; its "one-node:" lines
# only when SC_OMPI_NODES=1 (the job runs on one node).
sc_ompi_env() {
    local line name
    while IFS= read -r line; do
        case $line in '' | '#'*) continue ;; esac
        case $line in
            'one-node: '*) [ "${SC_OMPI_NODES:-}" = 1 ] || continue; line=${line#one-node: } ;;
        esac
        name=${line%%=*}
        case $name in OMPI_ALLOW_RUN_AS_ROOT*) [ "$(id -u)" -eq 0 ] || continue ;; esac
        [ -n "${!name:-}" ] || export "${line?}"
    done <"$(dirname "${BASH_SOURCE[0]}")/ompi.env"
}
sc_ompi_env
