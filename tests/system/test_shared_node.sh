#!/usr/bin/env bash
# A node shared with another user: two unprivileged users of one group,
# made here as root (removed at the end), the attacker's moves made as
# that user.  The cache's directory is refused where the attacker could
# swap it, held open by descriptor where it is accepted, and a name the
# attacker made first is fallen back from (the job runs cold).
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to make two users (useradd) and act as each (runuser)"
command -v useradd >/dev/null && command -v runuser >/dev/null || skip "no useradd or runuser"
"$SC_BIN" --version | grep -q "fault hooks: compiled in" || skip "needs a testing build (SC_TEST_SOURCE_MBPS)"
sc=$SC_BIN
grp=scg$$ alice=sca$$ bob=scb$$
groupadd "$grp" || skip "groupadd failed"
useradd -M -N -g "$grp" -s /bin/sh "$alice" && useradd -M -N -g "$grp" -s /bin/sh "$bob" \
    || { groupdel "$grp"; skip "useradd failed"; }
trap 'userdel "$alice" 2>/dev/null; userdel "$bob" 2>/dev/null; groupdel "$grp" 2>/dev/null; rm -rf "$SC_T_TMP"' EXIT
d=$SC_T_TMP
chmod 755 "$d"
mkdir -m 1777 "$d/tmp"
for u in "$alice" "$bob"; do mkdir -m 700 "$d/home-$u" && chown "$u:$grp" "$d/home-$u"; done
# as USER CMD...: runs CMD as that user, with a home and the node's /tmp.
as() {
    local u=$1
    shift
    runuser -u "$u" -- env HOME="$d/home-$u" TMPDIR="$d/tmp" OMPI_MCA_plm=isolated "$@"
}
"$sc" make-dataset --out "$d/a.h5" --samples 3000 --shape 3x16x16 --labels 10 --seed 5 >/dev/null 2>&1
chmod 644 "$d/a.h5"
stage=("$sc" stage --source "$d/a.h5" --shard-size 50 --epochs 1)

# Item 1: a private cache inside a directory the group (or everyone) may
# write without the sticky bit: refused at open, naming it.  TMPDIR too.
mkdir -m 2770 "$d/proj" && chown "root:$grp" "$d/proj"
mkdir -m 700 "$d/proj/alice" && chown "$alice:$grp" "$d/proj/alice"
expect_fail "a private cache under a group-writable, non-sticky parent is refused" \
    "'$d/proj' \(owner root, group $grp, mode 2770\) may be written by the members of its group without the sticky bit" \
    as "$alice" "${stage[@]}" --cache-dir "$d/proj/alice"
expect_fail "so is a default root under such a TMPDIR" "'$d/proj' .* may be written by the members" \
    runuser -u "$alice" -- env -u SC_CACHE_DIR -u SLURM_TMPDIR HOME="$d/home-$alice" TMPDIR="$d/proj" \
    OMPI_MCA_plm=isolated "${stage[@]}"
[ -z "$(ls -A "$d/proj/alice")" ] && pass "nothing was written there" || failed "wrote: $(ls "$d/proj/alice")"

# ...a swap after the open (group mode accepts the group's directory, which
# its members can rename): the job keeps its held directory.  Bob renames
# Alice's cache away mid-job and puts a symlink to his own in its place.
mkdir -m 777 "$d/forged"
out=$d/swap.log
(as "$alice" env SC_CACHE_SHARE=group SC_TEST_SOURCE_MBPS=1 "${stage[@]}" --cache-dir "$d/proj" --check \
    >"$out" 2>&1; echo $? >"$d/swap.rc") &
job=$!
for _ in $(seq 200); do compgen -G "$d/proj/shardcache-*-l0/s*.h5" >/dev/null && break; sleep 0.05; done
cdir=$(echo "$d"/proj/shardcache-*-l0)
as "$bob" sh -c "mv '$cdir' '$d/proj/stolen' && ln -s '$d/forged' '$cdir'" \
    && pass "bob swapped alice's cache directory for a symlink mid-job" || failed "the swap: $(ls -la "$d/proj")"
wait $job
[ "$(cat "$d/swap.rc")" = 0 ] && grep -q "^cache check: ok" "$out" && grep -q "repairs 0" "$out" \
    && pass "after the swap: every byte right, nothing repaired" || { failed "swap run"; cat "$out"; }
[ -z "$(ls -A "$d/forged")" ] && [ "$(ls "$d/proj/stolen" | grep -c '^s.*\.h5$')" -ge 60 ] \
    && pass "every entry went to the held directory, none through the symlink" \
    || failed "forged: $(ls "$d/forged" | head -3); held: $(ls "$d/proj/stolen" | wc -l)"
grep -q "SC_CACHE_SHARE=group: every member of group '$grp' (gid [0-9]*) can write the entries" "$out" \
    && pass "group mode warns, naming the group" || failed "no group warning: $(head -5 "$out")"

# Item 2: entries another member wrote are read into memory and checked on
# every read; one replaced with a forged copy (a flipped byte) is repaired.
rm -f "$cdir" && as "$bob" mv "$d/proj/stolen" "$cdir"
as "$bob" env SC_CACHE_SHARE=group "${stage[@]}" --cache-dir "$d/proj" >/dev/null 2>&1 # bob's now
e=$(ls "$cdir"/s*.h5 | head -1)
as "$bob" sh -c "cp '$e' '$e.x' && printf '\377' | dd of='$e.x' bs=1 seek=\$((\$(stat -c %s '$e.x') - 100)) conv=notrunc status=none && mv '$e.x' '$e'"
out=$(as "$alice" env SC_CACHE_SHARE=group "${stage[@]}" --cache-dir "$d/proj" --check 2>&1)
grep -q "checksum does not match" <<<"$out" && grep -q "^cache check: ok" <<<"$out" \
    && pass "a member's rewritten entry is caught; the bytes are the source's" || failed "rewrite: $out"

# Item 6: a squatted default root, and a squatted cache directory in a
# shared sticky root: the job runs cold in a fresh private directory and
# names the squatter.
as "$bob" mkdir -m 777 "$d/tmp/shardcache-$(id -u "$alice")"
out=$(as "$alice" env -u SC_CACHE_DIR -u SLURM_TMPDIR "${stage[@]}" --check 2>&1)
grep -q "cache root '$d/tmp/shardcache-$(id -u "$alice")' is a directory owned by $bob" <<<"$out" \
    && grep -q "^cache check: ok" <<<"$out" && pass "squatted default root: fallen back from, bob named" \
    || failed "squatted root: $out"
[ -z "$(ls -A "$d/tmp/shardcache-$(id -u "$alice")")" ] && pass "nothing written into the squatted root" \
    || failed "wrote into bob's root"
mkdir -m 1777 "$d/shared"
fp=$(basename "$cdir" | sed 's/-l0$//')
as "$bob" mkdir -m 777 "$d/shared/$fp-l0"
out=$(as "$alice" "${stage[@]}" --cache-dir "$d/shared" --check 2>&1)
grep -Eq "cache '$d/shared/$fp-l0' is a directory owned by $bob .*private \(cold\) cache '$d/shared/$fp-l0-p[0-9]+\.[A-Za-z0-9]{6}'" <<<"$out" \
    && grep -q "^cache check: ok" <<<"$out" && pass "squatted cache directory: fallen back from, bob named" \
    || failed "squatted directory: $out"
[ -z "$(compgen -G "$d/shared/$fp-l0-p*")" ] && pass "the private directory is gone at the end" \
    || failed "left: $(ls "$d/shared")"

# Item 3: the job's own removals never reach outside the cache.  (a) Bob
# holds the group's lock, so Alice's job falls back to a private directory;
# Bob renames it away mid-job and puts a symlink to her precious files in
# its place: her job's close removes nothing there.
as "$alice" mkdir -m 700 "$d/home-$alice/precious"
for f in a b c; do as "$alice" touch "$d/home-$alice/precious/$f"; done
precious() { [ "$(ls "$d/home-$alice/precious" | wc -l)" = 3 ]; }
(as "$bob" flock "$cdir/lock" sleep 6) &
holder=$!
sleep 0.3
(as "$alice" env SC_CACHE_SHARE=group SC_TEST_SOURCE_MBPS=1 "${stage[@]}" --cache-dir "$d/proj" \
    >"$d/priv.log" 2>&1; echo $? >"$d/priv.rc") &
job=$!
for _ in $(seq 200); do compgen -G "$cdir-p*/s*.h5" >/dev/null && break; sleep 0.05; done
priv=$(echo "$cdir"-p*)
as "$bob" sh -c "mv '$priv' '$d/proj/moved' && ln -s '$d/home-$alice/precious' '$priv'"
wait $job
kill $holder 2>/dev/null; wait $holder 2>/dev/null
grep -q "is in use by another loader on this node (another process.s, or one this process has not closed); using the private (cold) cache" "$d/priv.log" \
    && [ "$(cat "$d/priv.rc")" = 0 ] && pass "a held group lock: the job ran in a private directory" \
    || { failed "private fallback"; cat "$d/priv.log"; }
precious && pass "its close removed nothing through the swapped name" \
    || failed "precious files removed: $(ls "$d/home-$alice/precious")"
[ -z "$(ls -A "$d/proj/moved")" ] && pass "and emptied its own directory where Bob moved it" \
    || failed "moved: $(ls "$d/proj/moved")"

# (b) clear and gc with Alice's idle cache swapped by Bob (who may write
# the group's root) for a symlink to her precious files.
mkdir -m 2770 "$d/mine" && chown "$alice:$grp" "$d/mine"
as "$alice" env SC_CACHE_SHARE=group "${stage[@]}" --cache-dir "$d/mine" >/dev/null 2>&1
victim=$(echo "$d"/mine/shardcache-*-l0)
for action in clear gc; do
    as "$bob" sh -c "mv '$victim' '$victim.old' && ln -s '$d/home-$alice/precious' '$victim'"
    as "$alice" "$sc" cache $action --cache-dir "$d/mine" >/dev/null 2>&1
    precious && pass "cache $action: nothing outside removed" \
        || failed "cache $action removed: $(ls "$d/home-$alice/precious")"
    as "$bob" sh -c "rm '$victim' && mv '$victim.old' '$victim'"
done

# A group cache's entry is never writable by the group before it is
# published (HDF5 made it 0666 less the umask: under umask 002 a member
# could open it for writing and forge it after its checksum): a writer
# killed mid-entry leaves its temporary, which must be 0600.
mkdir -m 2770 "$d/umask" && chown "$alice:$grp" "$d/umask"
as "$alice" sh -c "umask 002; SC_FAULT=cache-writer-dies SC_CACHE_SHARE=group $(printf '%q ' "${stage[@]}") --cache-dir '$d/umask'" >/dev/null 2>&1
tmpf=$(compgen -G "$d/umask/shardcache-*-l0/*.tmp.*" | head -1)
[ -n "$tmpf" ] && [ "$(stat -c %a "$tmpf")" = 600 ] \
    && pass "an entry being written under umask 002 is 0600 until it is published" \
    || failed "the temporary: ${tmpf:-none} $(stat -c %a "$tmpf" 2>/dev/null)"

# Output directories the job writes into for a whole run (the audit trail,
# traces): refused under a parent others may write without the sticky bit,
# where Bob could rename it away mid-job and put a link in its place.  And
# verify reads no trail another user could have written.
train=$(dirname "$sc")/train
mkdir -m 2770 "$d/grpout" && chown "root:$grp" "$d/grpout"
expect_fail "an audit trail under a group-writable parent is refused" \
    "output directory '$d/grpout/audit': '$d/grpout' .* may be written by other users" \
    as "$alice" env SC_SOURCE="$d/a.h5" SC_CACHE_DIR="$d/home-$alice/c3" SC_AUDIT_DIR="$d/grpout/audit" \
    SC_SHARD_SIZE=50 "$train" --epochs 1
as "$bob" mkdir -m 1777 "$d/tmp/bobs"
expect_fail "...and under a sticky directory another user owns (who may rename in it)" \
    "output directory '$d/tmp/bobs/audit': '$d/tmp/bobs' .* may be written by other users" \
    as "$alice" env SC_SOURCE="$d/a.h5" SC_CACHE_DIR="$d/home-$alice/c3" SC_AUDIT_DIR="$d/tmp/bobs/audit" \
    SC_SHARD_SIZE=50 "$train" --epochs 1
as "$alice" mkdir -m 700 "$d/home-$alice/audit"
echo forged >"$d/home-$alice/audit/audit-r0.bin" && chown "$bob" "$d/home-$alice/audit/audit-r0.bin"
expect_fail "verify refuses a trail file another user owns" "audit-r0.bin' belongs to uid $(id -u "$bob")" \
    as "$alice" "$sc" verify --audit-dir "$d/home-$alice/audit" --plan-seed 7 --shards 60 --shard-size 50

# What held before and must keep holding: a layout-B manifest Bob could
# have written (his own file, or a link to one) is not taken; and a job
# leaves nothing in /dev/shm but Open MPI's own 0600 segments.
mkdir -m 755 "$d/setb" && chown "$alice:$grp" "$d/setb"
as "$alice" "$sc" make-dataset --out "$d/setb/data" --layout B --shard-size 100 --samples 300 \
    --shape 3x8x8 >/dev/null 2>&1
as "$alice" cp "$d/setb/data/.shardcache-manifest" "$d/home-$alice/manifest.copy"
m=$d/setb/data/.shardcache-manifest
for how in file link; do
    # Planted as where Bob may write (made here by root, then given to him).
    rm -f "$m"
    if [ $how = file ]; then cp "$d/home-$alice/manifest.copy" "$m" && chown "$bob" "$m"
        why="another user could have written it"
    else ln -s "$d/home-$alice/manifest.copy" "$m" && chown -h "$bob" "$m"
        why="it is a symbolic link"
    fi
    expect_ok "a manifest bob planted ($how) is not taken" "not using its saved manifest \\($why\\)" \
        as "$alice" "$sc" stage --source "$d/setb/data" --epochs 1 --cache-dir "$d/home-$alice/c"
done
(as "$alice" env SC_TEST_SOURCE_MBPS=1 "$MPIEXEC" -n 2 --oversubscribe "${stage[@]}" \
    --cache-dir "$d/home-$alice/c2" >"$d/shm.log" 2>&1) &
job=$!
seen=""
for _ in $(seq 60); do
    seen=$(find /dev/shm -maxdepth 2 -user "$alice" 2>/dev/null)
    [ -n "$seen" ] && break
    sleep 0.05
done
bad=$(find /dev/shm -maxdepth 2 -user "$alice" \( -perm /077 -type f -o -type d -perm /022 \) 2>/dev/null)
wait $job
[ -z "$bad" ] && ! grep -v vader <<<"$seen" | grep -qv "^$" \
    && pass "in /dev/shm during the job: only Open MPI's segments, none open to others" \
    || failed "/dev/shm held: $seen; open to others: $bad"
finish
