# shellcheck shell=bash
# outdir.sh - source it (bash): sc_out_dir DIR, the scripts' one way to
# make or accept an output directory on a node shared with other users,
# as the library's sc_output_dir does: DIR is made 0700 (its parent must
# exist), or an existing DIR is accepted only if it is a directory, not a
# symlink, this user's, and neither its group nor others may write it.
# Prints why and returns 1 otherwise.
sc_out_dir() {
    local d=$1 owner mode
    mkdir -m 700 -- "$d" 2>/dev/null
    if [ -L "$d" ] || [ ! -d "$d" ]; then
        echo "output directory '$d' is a symlink or not a directory (or cannot be made): not used; remove it or write elsewhere" >&2
        return 1
    fi
    read -r owner mode < <(stat -c '%u %a' -- "$d")
    if [ "$owner" != "$(id -u)" ]; then
        echo "output directory '$d' belongs to uid $owner, not to you ($(id -u)), who could change what is written there: write elsewhere" >&2
        return 1
    fi
    if (( 8#$mode & 8#022 )); then
        echo "output directory '$d' (mode $mode) is writable by others, who could change what is written there: chmod go-w it or write elsewhere" >&2
        return 1
    fi
}
