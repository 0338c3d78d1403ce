#!/usr/bin/env bash
# bench/cluster.sh BUILD [NODES] [REPEATS] - shards that move between nodes,
# measured side by side on the virtual cluster (tests/cluster, as root):
# the example trainer on NODES nodes (4) of 2 ranks, over a source slowed
# to what a busy shared filesystem gives each process (SC_TEST_SOURCE_MBPS,
# a testing build's hook: BUILD must be configured with SC_TESTING=ON),
# in three ways from cold caches, interleaved REPEATS (3) times:
#   sticky               the default: owners kept, 10% exchanged an epoch
#   global, SC_PEERS=off a fresh assignment each epoch; moved shards re-read
#   global               the same, moved shards from their old owner's cache
# Prints per-epoch source and peer MiB, hit rates and epoch times (median
# over the repeats), and each way's epochs 1.. against sticky's.
# Settings: BENCH_SAMPLES (65536), BENCH_SHAPE (3x32x32), BENCH_MBPS (10),
# BENCH_EPOCHS (4).  docs/benchmarks.md, "Between nodes".
set -euo pipefail
build=$(cd "${1:?usage: bench/cluster.sh BUILD [NODES] [REPEATS]}" && pwd -P)
nodes=${2:-4} reps=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd -P)
cluster=$here/tests/cluster
. "$cluster/lib.sh"
samples=${BENCH_SAMPLES:-65536} shape=${BENCH_SHAPE:-3x32x32} mbps=${BENCH_MBPS:-10}
epochs=${BENCH_EPOCHS:-4}
grep -q '^SC_TESTING:BOOL=ON' "$build/CMakeCache.txt" \
    || vc_die "$build is not a testing build (SC_TESTING=ON): the slow source is a test hook"
why=$(vc_cannot)
[ -z "$why" ] || vc_die "$why"
vc_up && vc_die "a virtual cluster is up already: tests/cluster/down.sh stops it"
case $build/ in /tmp/*) export VC_KEEP=$build ;; esac

work=$(mktemp -d /var/tmp/sc-bench-cluster.XXXXXX)
chmod 755 "$work"
trap '"$cluster/down.sh" >/dev/null 2>&1; rm -rf "$work"' EXIT
VC_TMPFS=${VC_TMPFS:-1g} "$cluster/up.sh" "$nodes" >/dev/null
vc_env
. "$here/launch/ompi-env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$build/bin/shardcache" make-dataset --out "$work/data.h5" --samples "$samples" \
    --shape "$shape" --labels 10 --seed 3 >/dev/null 2>&1
export SC_SOURCE=$work/data.h5 SC_SHARD_SIZE=256 SC_BATCH_SIZE=64 SC_SEED=11 \
    SC_CACHE_DIR=/tmp/sc-bench SC_TEST_SOURCE_MBPS=$mbps
np=$((nodes * VC_SLOTS))
echo "# $nodes nodes x $VC_SLOTS ranks, $samples samples of $shape uint8" \
     "($(du -m "$work/data.h5" | cut -f1) MiB), shard 256, batch 64, source $mbps MB/s a process," \
     "$(nproc) cores; $(date -u +%F)"

# one WAY: a job from cold caches; its epoch lines into $work/WAY.REP
one() {
    local way=$1 rep=$2 nd
    for nd in $(vc_workers); do "$VC_BIN/vcx" "$nd" rm -rf /tmp/sc-bench; done
    case $way in
        sticky) export SC_SHUFFLE=sticky SC_PEERS=on ;;
        global-off) export SC_SHUFFLE=global SC_PEERS=off ;;
        global) export SC_SHUFFLE=global SC_PEERS=on ;;
    esac
    vc_mpirun -np "$np" -x SC_SOURCE -x SC_SHARD_SIZE -x SC_BATCH_SIZE -x SC_SEED -x SC_CACHE_DIR \
        -x SC_TEST_SOURCE_MBPS -x SC_SHUFFLE -x SC_PEERS "$build/bin/train" --epochs "$epochs" \
        >"$work/$way.$rep" 2>&1 || { cat "$work/$way.$rep" >&2; vc_die "$way: the job failed"; }
    grep -q "^exactly-once: ok" "$work/$way.$rep" || vc_die "$way: not exactly-once"
}
for rep in $(seq "$reps"); do
    for way in sticky global-off global; do one "$way" "$rep"; done
done

# The table: per way and epoch, medians over the repeats.
files=()
for way in sticky global-off global; do files+=("$work/$way".*); done
awk -v samples="$samples" -v reps="$reps" '
    function median(s,   n, v, i, j, t) {
        n = split(s, v, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    FNR == 1 { job++; way = job <= reps ? "sticky" : job <= 2 * reps ? "global, SC_PEERS=off" : "global" }
    /^epoch [0-9]+:/ {
        e = $2 + 0
        match($0, /[0-9.]+ samples\/s/); rate = substr($0, RSTART, RLENGTH) + 0
        match($0, /hit rate [0-9.]+/); hit = substr($0, RSTART + 9, RLENGTH - 9)
        match($0, /from source [0-9.]+/); src = substr($0, RSTART + 12, RLENGTH - 12)
        match($0, /from other nodes [0-9.]+/); peer = substr($0, RSTART + 17, RLENGTH - 17)
        k = way SUBSEP e
        secs[k] = secs[k] " " samples / rate; hits[k] = hits[k] " " hit
        srcs[k] = srcs[k] " " src; peers[k] = peers[k] " " peer
        if (!(way in seen)) { seen[way] = 1; order[++nw] = way }
        if (e > last) last = e
    }
    END {
        printf "%-22s %5s %9s %13s %15s %9s\n", "way", "epoch", "hit rate", "source MiB", "other nodes MiB", "seconds"
        for (w = 1; w <= nw; w++) {
            tot[w] = 0
            for (e = 0; e <= last; e++) {
                k = order[w] SUBSEP e
                s = median(secs[k]); if (e > 0) tot[w] += s
                printf "%-22s %5d %8.1f%% %13.1f %15.1f %9.3f\n", order[w], e, median(hits[k]), median(srcs[k]), median(peers[k]), s
            }
        }
        for (w = 1; w <= nw; w++)
            printf "epochs 1-%d: %-22s %.3f s, %.2fx sticky\n", last, order[w], tot[w], tot[w] / tot[1]
    }' "${files[@]}"
