#!/usr/bin/env bash
# Each node's own copy of the dataset at one path (sbcast, a prolog's
# staging, a node-local disk): every rank in a mount namespace of its own
# (unshare -m) with its copy bound over the path.  Same bytes, another
# inode: shardcache failed at the first plan (fingerprints differ) or read
# ("changed since the dataset was opened"); it refuses at open on every
# rank, naming the source and the way out, in both layouts.  One copy
# bound for every rank opens and checks.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root for mount namespaces (unshare -m)"
unshare -m true 2>/dev/null || skip "unshare -m is not allowed here"
d=$SC_T_TMP
sc=$SC_BIN
for r in 0 1; do mkdir -p "$d/r$r/dir"; done
"$sc" make-dataset --out "$d/r0/data.h5" --samples 400 --shape 3x4x4 --seed 3 >/dev/null
"$sc" make-dataset --out "$d/r0/dir" --layout B --shard-size 100 --samples 400 --shape 3x4x4 \
    --seed 3 >/dev/null
cp -p "$d/r0/data.h5" "$d/r1/data.h5" && cp -p "$d/r0/dir/"* "$d/r1/dir/"
mkdir -p "$d/at/dir" && touch "$d/at/data.h5"
# wrap.sh COPY TARGET CMD...: CMD with rank r's copy (COPY's rN) bound over TARGET.
cat >"$d/wrap.sh" <<'WRAP'
#!/bin/sh
src=$(echo "$1" | sed "s/rN/r${OMPI_COMM_WORLD_RANK:-0}/")
dst=$2
shift 2
exec unshare -m sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$src" "$dst" "$@"
WRAP
chmod +x "$d/wrap.sh"
run() { # run COPY TARGET: stage TARGET on 2 ranks, each with its COPY bound
    "$MPIEXEC" -n 2 --oversubscribe "$d/wrap.sh" "$1" "$2" \
        "$sc" stage --source "$2" --shard-size 50 --epochs 1 --cache-dir "$d/cache" --check
}
for layout in A B; do
    [ $layout = A ] && f=data.h5 || f=dir
    expect_fail "layout $layout: a copy a rank at one path is refused at open, on every rank" \
        "rank 1: source '$d/at/$f' is not the same files? on every rank .* give every rank one shared copy" \
        run "$d/rN/$f" "$d/at/$f"
    out=$(run "$d/rN/$f" "$d/at/$f" 2>&1)
    [ "$(grep -c "is not the same" <<<"$out")" -ge 2 ] && ! grep -q "fingerprint\|changed since" <<<"$out" \
        && pass "layout $layout: both ranks say why, neither at a plan or read" || failed "layout $layout: $out"
    expect_ok "layout $layout: one copy bound for both ranks opens and checks" "cache check: ok" \
        run "$d/r0/$f" "$d/at/$f"
done
finish
