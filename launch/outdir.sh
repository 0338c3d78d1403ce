# shellcheck shell=bash
# outdir.sh - source it (bash): the scripts' one check of where they write
# on a node shared with other users, as the library's sc_output_dir.

# sc_others_may_write PATH...: what of each PATH, resolved (realpath -e),
# and of every directory above it, someone else could change: one not
# yours nor root's, or one group or others may write (a sticky directory
# excepted, whose entries only their owners may rename), printed as
# "'P' (owner U, mode M) "; a missing PATH as "'PATH' (missing) ".  Only
# the resolved path is checked: use that one afterwards, not PATH (a link
# on the way could be repointed).  The launch/slurm scripts hold a copy of
# this function (they check launch/ with it before sourcing anything from
# there); tests/system/test_launch.sh checks the copies are this text.
sc_others_may_write() {
    local a p
    for a in "$@"; do
        p=$(realpath -e -- "$a" 2>/dev/null) || { echo "'$a' (missing) "; continue; }
        while :; do
            find "${p:-/}" -maxdepth 0 \( \( ! -user "$(id -u)" ! -user 0 \) -o \( -perm /022 ! \( -type d -perm -1000 \) \) \) -printf "'%p' (owner %u, mode %m) "
            [ -n "$p" ] || break
            p=${p%/*}
        done
    done
}

# sc_out_dir [--new] DIR: make or accept DIR as an output directory and
# print its resolved path, the one to write under afterwards.  Every
# directory above DIR, from / down, must be yours or root's and writable
# by no one else (a sticky one such as /tmp is fine): whoever may write
# one of them could rename DIR away mid-job and put a link to your files
# in its place, so a group project directory without the sticky bit
# (2770) is refused.  DIR is made 0700; an existing DIR is accepted only
# if it is a directory, not a symlink, yours, and neither group nor
# others may write it; with --new, not at all (a per-job directory).
# Prints why and returns 1 otherwise.
sc_out_dir() {
    local new=0 d parent bad owner mode
    if [ "$1" = --new ]; then new=1; shift; fi
    d=$1
    parent=$(realpath -e -- "$(dirname -- "$d")" 2>/dev/null) || {
        echo "output directory '$d': the directory above it does not exist" >&2
        return 1
    }
    bad=$(sc_others_may_write "$parent")
    if [ -n "$bad" ]; then
        echo "output directory '$d': others may change $bad above it: they could swap it mid-job for a link to your files; write it in a directory only you can write (a group directory without the sticky bit will not do)" >&2
        return 1
    fi
    d=${parent%/}/$(basename -- "$d")
    if ! mkdir -m 700 -- "$d" 2>/dev/null && [ $new = 1 ]; then
        echo "output directory '$d' exists already (or cannot be made): not used" >&2
        return 1
    fi
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
    echo "$d"
}
