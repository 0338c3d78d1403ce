#!/usr/bin/env bash
# make-dataset and stage as a user runs them, and the cache's repairs after
# a writer killed mid-entry, a truncated entry and a flipped byte.
. "$(dirname "$0")/lib.sh"
sc=$SC_BIN
d=$SC_T_TMP
cache=$d/cache

expect_ok "make-dataset layout A" "wrote $d/a.h5: 6000 samples of uint8, 10 labels, layout A" \
    "$sc" make-dataset --out "$d/a.h5" --samples 6000 --shape 3x16x16 --labels 10 --seed 3
expect_ok "layout A has the fields" "images +Dataset \{6000, 3, 16, 16\}" h5ls "$d/a.h5"
expect_ok "labels are int64" "Type: +(native long|64-bit little-endian integer)" h5ls -v "$d/a.h5/labels"
# --sorted stores the classes in contiguous, equal blocks (as image packs
# often are); --noise widens the noise (a harder set) and is said.
expect_ok "make-dataset --sorted --noise" "10 labels \\(class-sorted\\), noise 200, layout A" \
    "$sc" make-dataset --out "$d/sorted.h5" --samples 1000 --shape 4 --labels 10 --sorted --noise 200
h5dump -d /labels -y -w 0 "$d/sorted.h5" | sed -n '/DATA {/,/}/p' | tr -cs '0-9' '\n' | grep -v '^$' \
    | awk 'NR > 1 && $1 < prev { bad = 1 } { prev = $1; n[$1]++ }
           END { for (k = 0; k < 10; k++) if (n[k] != 100) bad = 1; exit bad || NR != 1000 }' \
    && pass "--sorted: labels non-decreasing, 100 of each class" || failed "--sorted labels"
expect_fail "--noise out of range" "--noise '300' is not an integer in \[1, 255\]" \
    "$sc" make-dataset --out "$d/x.h5" --noise 300
# --dtype float16 and bool write what h5py reads as numpy's float16 and bool:
# the same samples as uint8, scaled to [0, 1] and thresholded.
for t in uint8 float16 bool; do
    "$sc" make-dataset --out "$d/t-$t.h5" --samples 300 --shape 2x5 --dtype $t --seed 9 \
        --compress gzip --chunk 64 >/dev/null 2>&1 || failed "make-dataset --dtype $t"
done
/usr/bin/python3 - "$d" <<'PY' && pass "--dtype float16 and bool: h5py reads them as such" || failed "--dtype float16/bool"
import sys, h5py, numpy as np
d = sys.argv[1]
u8, f16, b = (h5py.File(f"{d}/t-{t}.h5", "r")["images"][...] for t in ("uint8", "float16", "bool"))
assert f16.dtype == np.float16 and b.dtype == bool, (f16.dtype, b.dtype)
np.testing.assert_array_equal(f16, (u8.astype(np.float32) / np.float32(255)).astype(np.float16))
np.testing.assert_array_equal(b, u8 > 127)
PY
expect_ok "stage --check on float16 and bool" "cache check: ok" \
    "$sc" stage --fields /images --source "$d/t-float16.h5" --shard-size 100 --cache-dir "$d/tcache" --check
# stage reads what the job will: a rank's own shards and those of the sample
# ranges cut to it (1,000 samples in 10 shards of 100 on 3 ranks, batch 10:
# each rank serves 330, so shards are cut), each cut shard on both ranks.
"$sc" make-dataset --out "$d/cut.h5" --samples 1000 --shape 4 >/dev/null 2>&1 || failed "make-dataset cut.h5"
cuts=$("$sc" plan --shards 10 --shard-size 100 --ranks 3 --batch 10 --mode global --epochs 1 \
       --list-cuts | awk '/^  cut / { print $4, $12 }' | sort -u | wc -l)
out=$("$MPIEXEC" -n 3 --oversubscribe "$sc" stage --source "$d/cut.h5" --shard-size 100 \
      --batch 10 --mode global --cache-dir "$d/cutcache" --cache-bytes unbounded 2>&1)
staged=$(awk '/^rank [0-9]+: [0-9]+ shards staged/ { n += $3 } END { print n + 0 }' <<<"$out")
[ "$cuts" -gt 0 ] && [ "$staged" -eq $((10 + cuts)) ] &&
    pass "stage: the shards of the cuts to a rank too ($cuts cut shards)" ||
    { failed "stage: $staged shards staged, want 10 + $cuts cut shards"; echo "$out" | tail; }
# --encode jpeg: each image a JPEG (h5py's vlen uint8) that PIL decodes back to
# the pixels make-dataset writes raw from the same seed, in both layouts;
# the loader does not carry variable-length fields yet and says so.
for c in 3 1; do
    "$sc" make-dataset --out "$d/j$c.h5" --samples 120 --shape ${c}x32x32 --smooth --noise 2 \
        --encode jpeg --quality 95 --seed 4 >/dev/null 2>&1 || failed "make-dataset --encode jpeg ($c)"
    "$sc" make-dataset --out "$d/r$c.h5" --samples 120 --shape ${c}x32x32 --smooth --noise 2 \
        --seed 4 >/dev/null 2>&1
done
expect_ok "make-dataset --encode jpeg, layout B" "JPEG quality 90, layout B" \
    "$sc" make-dataset --out "$d/jb" --samples 50 --shape 3x16x16 --encode jpeg --layout B --shard-size 20
if /usr/bin/python3 -c "import PIL" 2>/dev/null; then
    /usr/bin/python3 - "$d" <<'PY' && pass "--encode jpeg: PIL decodes the pixels (colour within 10 levels, gray 3)" || failed "--encode jpeg decoding"
import io, sys, h5py, numpy as np
from PIL import Image
d = sys.argv[1]
for c, most in ((3, 10.0), (1, 3.0)):
    j, r = h5py.File(f"{d}/j{c}.h5", "r"), h5py.File(f"{d}/r{c}.h5", "r")
    assert h5py.check_vlen_dtype(j["images"].dtype) == np.uint8 and j["images"].shape == (120,)
    assert (j["labels"][...] == r["labels"][...]).all()
    for i in range(120):
        im = np.asarray(Image.open(io.BytesIO(j["images"][i].tobytes())))
        im = im.transpose(2, 0, 1) if c == 3 else im[None]
        diff = np.abs(im.astype(int) - r["images"][i].astype(int)).mean()
        assert im.shape == (c, 32, 32) and diff < most, (c, i, diff)
b = h5py.File(f"{d}/jb/shard-000002.h5", "r")
assert b["images"].shape == (10,) and Image.open(io.BytesIO(b["images"][9].tobytes())).size == (16, 16)
PY
else
    failed "python3-pil missing (scripts/test installs it)"
fi
expect_fail "--quality alone is refused" "--quality is JPEG's: give --encode jpeg too" \
    "$sc" make-dataset --out "$d/x.h5" --quality 50
expect_fail "--encode jpeg needs 1 or 3 channels" "needs uint8 images of 1 or 3 channels" \
    "$sc" make-dataset --out "$d/x.h5" --encode jpeg --shape 4x8x8
expect_ok "a JPEG field is staged and checked, layout A" "cache check: ok" \
    env SC_FIELDS=/images "$sc" stage --source "$d/j3.h5" --cache-dir "$d/jcache" --batch 8 --check
expect_ok "a JPEG field is staged and checked, layout B" "cache check: ok" \
    "$sc" stage --source "$d/jb" --cache-dir "$d/jcache-b" --batch 8 --check
expect_ok "decoded once into the cache, and checked" "cache check: ok" \
    env SC_DECODE=jpeg-once SC_DECODE_SIZE=8 "$sc" stage --source "$d/j3.h5" \
    --cache-dir "$d/jcache-once" --batch 8 --check
# --compress writes chunked, filtered fields that h5py and HDF5's tools read;
# stage warns when the shards split the compressed chunks, naming a size.
expect_ok "make-dataset --compress gzip" "gzip, layout A" \
    "$sc" make-dataset --out "$d/gz.h5" --samples 1000 --shape 4 --compress gzip --chunk 100
expect_ok "gzip: shuffle then deflate 4, chunks of 100" "SHUFFLE.*DEFLATE.*LEVEL 4" \
    bash -c "h5dump -p -H -d /images '$d/gz.h5' | tr -d '\n'"
expect_ok "make-dataset --compress lzf" "lzf, layout B" \
    "$sc" make-dataset --out "$d/lzf" --samples 1000 --shape 4 --compress lzf --layout B --shard-size 300
expect_ok "lzf: h5py's filter 32000" "FILTER_ID 32000" \
    bash -c "h5dump -p -H -d /images '$d/lzf/shard-000000.h5' | tr -d '\n'"
expect_fail "an unknown codec" "--compress must be none, gzip or lzf, not .zstd." \
    "$sc" make-dataset --out "$d/x.h5" --compress zstd
expect_ok "stage: split chunks are named, with a size that aligns" \
    "field '/images' is compressed in chunks of 100 rows, and shards of 250 samples cut through them.*SC_SHARD_SIZE=200 \(any multiple of 100\)" \
    "$MPIEXEC" -n 2 --oversubscribe "$sc" stage --source "$d/gz.h5" --shard-size 250 \
    --cache-dir "$d/gzcache" --check
# --smooth: prototypes in flat bands, which with a noise of 2 levels gzip
# halves (random prototypes do not compress at all).
expect_ok "make-dataset --smooth" "1000 smooth samples of uint8, 10 labels, noise 2, gzip" \
    "$sc" make-dataset --out "$d/sm.h5" --samples 1000 --shape 3x32x32 --smooth --noise 2 --compress gzip
"$sc" make-dataset --out "$d/smraw.h5" --samples 1000 --shape 3x32x32 --smooth --noise 2 >/dev/null 2>&1
"$sc" make-dataset --out "$d/rnd.h5" --samples 1000 --shape 3x32x32 --noise 2 --compress gzip >/dev/null 2>&1
sm=$(stat -c %s "$d/sm.h5") smraw=$(stat -c %s "$d/smraw.h5") rnd=$(stat -c %s "$d/rnd.h5")
[ $((sm * 10)) -lt $((smraw * 6)) ] && [ $((rnd * 10)) -gt $((smraw * 9)) ] \
    && pass "--smooth compresses (gzip $sm of $smraw bytes; random prototypes $rnd)" \
    || failed "--smooth sizes: gzip $sm, raw $smraw, random prototypes $rnd"
# A compressed field HDF5 must decode itself (chunks that split samples,
# written by h5py) is named at open, with why, in both layouts.
mkdir -p "$d/splitb"
/usr/bin/python3 - "$d/split.h5" "$d/splitb/part-0.h5" <<'PY'
import sys, h5py, numpy as np
for path in sys.argv[1:]:
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=np.arange(4000).astype(np.uint8).reshape(1000, 4),
                         chunks=(100, 2), compression="gzip")
        f.create_dataset("labels", data=np.arange(1000, dtype=np.int64))
PY
expect_ok "stage: chunks that split samples are noted (layout A)" \
    "split.h5': field '/images' is compressed, but its chunks split samples: its chunks decompress inside HDF5" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/split.h5" --shard-size 100 --cache-dir "$d/splitcache"
expect_ok "stage: chunks that split samples are noted (layout B)" \
    "part-0.h5': field '/images' is compressed, but its chunks split samples" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/splitb" --cache-dir "$d/splitcache-b"
# An optional filter this HDF5 cannot load (Blosc, no plugin): refused at
# open by name, not mid-epoch by the plugins HDF5 tried instead; and h5py's
# LZF in chunks that split samples (h5py's automatic chunking), which only
# HDF5 could decode and cannot, says what to rewrite.
/usr/bin/python3 - "$d/blosc.h5" <<'PY'
import sys, h5py, numpy as np
from h5py import h5p, h5z, h5d, h5s, h5t
with h5py.File(sys.argv[1], "w") as f:
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_chunk((100, 4))
    dcpl.set_filter(32001, h5z.FLAG_OPTIONAL, (2, 2, 1, 400, 5, 1, 0))
    d = h5d.create(f.id, b"images", h5t.NATIVE_UINT8, h5s.create_simple((1000, 4)), dcpl=dcpl)
    for c in range(10):
        d.write_direct_chunk((c * 100, 0), bytes(64), filter_mask=0)
    f.create_dataset("labels", data=np.arange(1000, dtype=np.int64))
with h5py.File(sys.argv[1].replace("blosc", "lzfauto"), "w") as f:
    f.create_dataset("images", data=np.zeros((300, 3, 64, 64), np.uint8), compression="lzf")
    f.create_dataset("labels", data=np.arange(300, dtype=np.int64))
PY
expect_fail "an optional filter HDF5 cannot load: refused at open by name" \
    "SC_ENOTSUP: .*field '/images' needs HDF5 filter 32001 \(Blosc\).*HDF5_PLUGIN_PATH" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/blosc.h5" --shard-size 100 --cache-dir "$d/bl"
expect_fail "h5py's LZF in chunks that split samples: refused at open, saying what to do" \
    "SC_ENOTSUP: .*h5py's LZF.*its chunks split samples.*rewrite it with gzip, or with chunks of whole samples" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/lzfauto.h5" --shard-size 100 --cache-dir "$d/bl"
expect_ok "make-dataset layout B" "layout B" \
    "$sc" make-dataset --out "$d/b" --samples 2500 --shape 8 --dtype float32 --layout B --shard-size 1000
[ "$(ls "$d/b" | wc -l)" = 3 ] && pass "layout B: one file per shard" || failed "layout B files: $(ls "$d/b")"
# ...and its manifest, which jobs and stage take instead of opening every file.
[ -f "$d/b/.shardcache-manifest" ] && pass "make-dataset saves layout B's manifest" \
    || failed "no manifest in $d/b: $(ls -a "$d/b")"
expect_ok "stage: layout B's manifest is taken" \
    "manifest: $d/b/.shardcache-manifest is up to date \(3 files\)" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/b" --cache-dir "$d/bcache"
# A file rewritten or added since: the manifest is not taken, and the note
# names the file (then stage saves a new one).
"$sc" make-dataset --out "$d/b2" --samples 30 --shape 8 --layout B --shard-size 10 >/dev/null 2>&1
touch -d '2001-01-01' "$d/b2/shard-000001.h5"
expect_ok "a rewritten file is named" \
    "not using its saved manifest \('[^']*/shard-000001.h5' was rewritten since it was saved\)" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/b2" --cache-dir "$d/b2cache" --shard-size 10 --batch 5
# What a save killed before its rename left is swept by the next save after an hour.
echo x >"$d/b2/.shardcache-manifest.AAAAAA"; echo y >"$d/b2/.shardcache-manifest.BBBBBB"
touch -d '3 hours ago' "$d/b2/.shardcache-manifest.AAAAAA"
cp "$d/b2/shard-000002.h5" "$d/b2/shard-000003.h5"
touch -d '2001-01-01' "$d/b2/shard-000000.h5"
expect_ok "an added file is named, and how many changed" \
    "\('[^']*/shard-000000.h5' was rewritten since it was saved; 2 of the files changed\)" \
    "$MPIEXEC" -n 1 "$sc" stage --source "$d/b2" --cache-dir "$d/b2cache" --shard-size 10 --batch 5
[ ! -e "$d/b2/.shardcache-manifest.AAAAAA" ] && [ -e "$d/b2/.shardcache-manifest.BBBBBB" ] \
    && pass "a save sweeps a crashed save's old temporary file, not a young one" \
    || failed "manifest temporaries: $(ls -a "$d/b2")"
expect_ok "plain progress lines off a terminal" "make-dataset: 100%" \
    "$sc" make-dataset --out "$d/c.h5" --samples 3000 --shape 4
out=$(script -qec "$sc make-dataset --out $d/t.h5 --samples 3000 --shape 4" /dev/null 2>&1)
grep -q $'\r''make-dataset \[#' <<<"$out" && pass "a bar on a terminal" || failed "no bar on a tty: $out"
expect_fail "unknown dtype" "unknown dtype 'int3'" "$sc" make-dataset --out "$d/x.h5" --dtype int3
expect_fail "bad shape" "--shape '3x0' is not like" "$sc" make-dataset --out "$d/x.h5" --shape 3x0
expect_fail "no --out" "--out is required" "$sc" make-dataset
expect_fail "unwritable output" "cannot create '/nonexistent/x.h5'" \
    "$sc" make-dataset --out /nonexistent/x.h5 --samples 10

stage=("$MPIEXEC" -n 4 --oversubscribe "$sc" stage --source "$d/a.h5" --shard-size 100
       --epochs 3 --cache-dir "$cache")
out=$("${stage[@]}" --check 2>&1)
grep -Eq "^cache check: ok \([0-9]+ shards\)$" <<<"$out" && pass "cold stage checks out" \
    || failed "cold stage: $out"
grep -Eq "^rank 3: .* misses [1-9]" <<<"$out" && pass "cold stage reads the source" \
    || failed "cold stage misses: $out"
expect_ok "second stage is all hits" "hit rate 100.0%" "${stage[@]}"
# Shards that move to a rank after the first epoch are the job's to take
# from the rank holding them then; with SC_PEERS=off they are staged.
expect_ok "later moves are left to the job" "^not staged: [1-9][0-9]* first reads by a rank after epoch 0" \
    "${stage[@]}" --mode global
out=$(SC_PEERS=off "${stage[@]}" --mode global 2>&1)
grep -q "^staged: " <<<"$out" && ! grep -q "^not staged" <<<"$out" \
    && pass "SC_PEERS=off stages every epoch's shards" || failed "SC_PEERS=off stage: $out"
expect_ok "layout B stages" "^cache check: ok" \
    "$MPIEXEC" -n 2 --oversubscribe "$sc" stage --source "$d/b" --epochs 2 --cache-dir "$cache" --check
expect_ok "capacity bound holds" "rank 0: .* cached [0-9]+ entries \(0\.[0-9] MiB\)" \
    "$MPIEXEC" -n 2 --oversubscribe "$sc" stage --source "$d/a.h5" --shard-size 100 \
    --epochs 2 --cache-dir "$d/small" --cache-bytes 700K
expect_fail "wrong world size" "--ranks 3 but running on 4 MPI ranks" \
    "$MPIEXEC" -n 4 --oversubscribe "$sc" stage --source "$d/a.h5" --ranks 3
expect_fail "missing source" "source '$d/none.h5': No such file" \
    "$sc" stage --source "$d/none.h5"
expect_fail "bad cache size" "SC_CACHE_BYTES='12Q'" "$sc" stage --source "$d/a.h5" --cache-bytes 12Q

# The default root (no --cache-dir): $TMPDIR/shardcache-<uid>, made 0700; a
# root someone else could write into, or a symlink, is refused, never used:
# the job caches in a fresh private root beside it (cold) and says whose it is.
root=$d/tmp/shardcache-$(id -u)
mkdir -p "$d/tmp" "$d/elsewhere"
def=(env -u SC_CACHE_DIR -u SLURM_TMPDIR TMPDIR="$d/tmp" "$sc" stage --source "$d/a.h5"
     --shard-size 100 --epochs 1)
expect_ok "default root: made and used" "hit rate" "${def[@]}"
[ "$(stat -c %a "$root")" = 700 ] && compgen -G "$root/shardcache-*-l0/s*.h5" >/dev/null \
    && pass "default root is 0700 and holds the entries" || failed "default root: $(ls -la "$root")"
chmod 0777 "$root"
fresh="this job caches in the fresh private root '$root\.[A-Za-z0-9]{6}' \(cold\)"
expect_ok "a world-writable default root is refused, fallen back from" \
    "cache root '$root' is a directory .* mode 777: not this user's private directory .*$fresh" \
    "${def[@]}"
chmod 0700 "$root" && chown nobody "$root"
expect_ok "another user's default root is refused, fallen back from" \
    "owned by nobody \(uid $(id -u nobody)\).*$fresh" "${def[@]}"
rm -rf "$root" && ln -s "$d/elsewhere" "$root"
expect_ok "a symlinked default root is refused, fallen back from" "is a symbolic link.*$fresh" \
    "${def[@]}"
[ -z "$(compgen -G "$root.*")" ] && pass "the fresh roots are removed at the jobs' ends" \
    || failed "fresh roots left: $(ls -d "$root".*)"
[ -z "$(ls -A "$d/elsewhere")" ] && pass "nothing written through the symlink" \
    || failed "wrote into the symlink's target: $(ls "$d/elsewhere")"
rm -f "$root"

# SC_CACHE_DIR's cache directory: another user's, or one others may write, is refused.
one=("$sc" stage --source "$d/a.h5" --shard-size 100 --epochs 1 --cache-dir "$d/own")
expect_ok "own cache directory" "hit rate" "${one[@]}"
cdir=$(echo "$d"/own/shardcache-*-l0)
modes=$(stat -c %a "$cdir" "$cdir"/s*.h5 "$cdir"/lock | sort -u | tr '\n' ' ')
[ "$modes" = "600 700 " ] && pass "cache directory 0700, entries and lock 0600" \
    || failed "modes: $modes"
chmod 0777 "$cdir"
expect_fail "a world-writable cache directory is refused" \
    "cache directory '$cdir' is a directory owned by uid $(id -u) .* mode 777: another user could plant" \
    "${one[@]}"
chmod 0770 "$cdir"
expect_fail "group-writable is refused when private" "SC_CACHE_SHARE=group" "${one[@]}"
expect_ok "group-writable is accepted with SC_CACHE_SHARE=group" "hit rate 100.0%" \
    env SC_CACHE_SHARE=group "${one[@]}"
mkdir -p "$d/openroot" && chmod 0777 "$d/openroot"
expect_fail "a root others may write (no sticky bit) is refused" \
    "'$d/openroot' \(owner [^,]+, group [^,]+, mode 777\) may be written by every user without the sticky bit" \
    "$sc" stage --source "$d/a.h5" --shard-size 100 --epochs 1 --cache-dir "$d/openroot"
chmod 1777 "$d/openroot"
expect_ok "a sticky one, like /tmp, is fine" "hit rate" \
    "$sc" stage --source "$d/a.h5" --shard-size 100 --epochs 1 --cache-dir "$d/openroot"
chmod 0700 "$cdir" && chown nobody "$cdir"
expect_ok "another user's cache directory is refused, fallen back from" \
    "cache '$cdir' is a directory owned by nobody \(uid $(id -u nobody)\).*using the private \(cold\) cache '$cdir-p[0-9]+\.[A-Za-z0-9]{6}'" \
    "${one[@]}"
chown "$(id -u)" "$cdir"

# shardcache cache list|gc|clear: what caches hold; stale ones reclaimed, never
# one a live job holds or another user's.
cc=$d/cc
cp "$d/a.h5" "$d/a2.h5"
"$sc" make-dataset --out "$d/c.h5" --samples 600 --shape 3x8x8 --labels 4 >/dev/null 2>&1
for s in a2 c; do
    "$sc" stage --source "$d/$s.h5" --shard-size 100 --epochs 1 --cache-dir "$cc" >/dev/null 2>&1
done
expect_ok "cache list: each directory, its source and entries" \
    "shardcache-[0-9a-f]{16}-l0 .* [0-9]+ entries .* idle  source $d/c.h5$" "$sc" cache list --cache-dir "$cc"
# A rewrite that keeps the size and mtime (cp -p) is a change all the same.
cp -p "$d/c.h5" "$d/c.copy" && cp -p "$d/c.copy" "$d/c.h5"
expect_ok "cache list: a source rewritten by cp -p is changed" "idle  source $d/c.h5 \(changed\)$" \
    "$sc" cache list --cache-dir "$cc"
touch -d 2001-01-01 "$d/a2.h5" "$d/c.h5" # both sources change
ca=$(grep -l "a2.h5" "$cc"/*/source | xargs dirname)
cdead="$(echo "$cc"/shardcache-*-l0 | cut -d' ' -f1)-p999999999.AbC123" # mkdtemp's suffix
mkdir -m 700 "$cdead" && touch "$cdead/lock" # its process is gone: the lock is free
clive="${cdead%-p*}-p1"
mkdir -m 700 "$clive" && touch "$clive/lock"
(exec 8<"$clive/lock"; flock 8; touch "$d/live.ready"; exec sleep 20) & live=$!
cc_dir=$(grep -l "/c.h5" "$cc"/*/source | xargs dirname)
(exec 9<"$cc_dir/lock"; flock 9; touch "$d/held.ready"; exec sleep 20) & holder=$! # a live job's lock
for i in $(seq 100); do [ -e "$d/held.ready" ] && [ -e "$d/live.ready" ] && break; sleep 0.05; done
out=$("$sc" cache gc --cache-dir "$cc" 2>&1)
[ ! -e "$ca" ] && [ ! -e "$cdead" ] && pass "gc removes a changed source's cache and a dead owner's" \
    || failed "gc: $out"
[ -e "$cc_dir" ] && grep -q "in use" <<<"$out" && pass "gc leaves a directory a live job holds" \
    || failed "gc removed a held directory: $out"
[ -e "$clive" ] && pass "gc leaves a private directory whose process holds its lock" \
    || failed "gc removed a live private directory: $out"
kill $holder $live 2>/dev/null; wait $holder $live 2>/dev/null
chown nobody "$cc_dir"
"$sc" cache clear --cache-dir "$cc" >/dev/null 2>&1
[ -e "$cc_dir" ] && pass "clear leaves another user's directory" || failed "clear removed another user's"
chown "$(id -u)" "$cc_dir"
expect_ok "clear removes the rest" "^1 cache directories under .*, [0-9.]+ MiB freed$" \
    "$sc" cache clear --cache-dir "$cc"
[ -z "$(ls -A "$cc")" ] && pass "nothing left" || failed "left: $(ls "$cc")"
expect_fail "cache needs an action" "usage: shardcache cache" "$sc" cache

# Faults: only builds with the test hooks can kill their own writer.
if "$sc" --version | grep -q "fault hooks: compiled in"; then
    one=("$sc" stage --source "$d/a.h5" --shard-size 100 --cache-dir "$d/crash")
    SC_FAULT=cache-writer-dies "${one[@]}" >"$d/crash.log" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && pass "writer killed mid-entry (rc $rc)" || failed "the fault did not fire"
    ls "$d"/crash/*/ | grep -q '\.tmp\.' && pass "it left a temporary entry" \
        || failed "no temporary entry left: $(ls "$d"/crash/*/)"
    out=$("${one[@]}" --check 2>&1)
    grep -q "removed .*an incomplete entry left by a writer that died" <<<"$out" \
        && pass "the temporary is removed" || failed "temporary: $out"
    grep -q "repairs 1," <<<"$out" && pass "and counted" || failed "repair count: $out"
    grep -q "^cache check: ok" <<<"$out" && pass "after the crash the bytes are right" \
        || failed "check after crash: $out"
    entries=("$d"/crash/*/s*.h5)
    truncate -s 2000 "${entries[0]}"
    size=$(stat -c %s "${entries[1]}")
    printf '\xff' | dd of="${entries[1]}" bs=1 seek=$((size - 300)) conv=notrunc status=none
    out=$("${one[@]}" --check 2>&1)
    grep -Eq "is truncated|damaged header" <<<"$out" && pass "truncated entry detected" || failed "truncation: $out"
    grep -q "checksum does not match" <<<"$out" && pass "flipped byte detected" || failed "flip: $out"
    grep -q "repairs 2" <<<"$out" && pass "both repaired" || failed "repairs: $out"
    grep -q "^cache check: ok" <<<"$out" && pass "bytes right after repair" || failed "check: $out"
else
    echo "fault tests need SC_TESTING=ON (the debug preset)"; failed "fault hooks missing"
fi
finish
