#!/usr/bin/env python3
"""Samples dropped and repeated per epoch with SC_SHARD_SIZE=auto, beside
PyTorch's DistributedSampler + DataLoader, as the markdown table of
docs/plan.md.

    bench/remainder.py build/release/bin/shardcache [--sample-bytes 3080] [--epochs 8]

For every N samples x R ranks x batch B (R <= N) it runs `shardcache plan
--samples N --sample-bytes S` in drop and pad mode, global and sticky, and
takes the most any of the first E epochs dropped (drop) or repeated (pad),
and the most cuts (sample ranges served away from their shard's home) any
epoch of any of the four made; "refused" is the open's refusal (fewer
samples than one global batch R x B with drop).  Torch:
DistributedSampler(drop_last=True) keeps floor(N/R) a rank and the
DataLoader(drop_last=True) drops each rank's last partial batch, so
N mod R + R (floor(N/R) mod B) are dropped; with drop_last=False the sampler
repeats R ceil(N/R) - N and the last batches are short.
"""
import argparse
import re
import subprocess

NS = [1, 7, 100, 615, 1000, 6000, 100000]
RANKS = [1, 2, 4, 8]
BATCHES = [1, 32, 64]


def plan(binary, n, r, b, mode, remainder, sample_bytes, epochs):
    """The most samples one of the epochs drops or pads, the most cuts, the shard size,
    and the shards."""
    cmd = [binary, "plan", "--samples", str(n), "--sample-bytes", str(sample_bytes),
           "--ranks", str(r), "--batch", str(b), "--mode", mode, "--remainder", remainder,
           "--epochs", str(epochs), "--seed", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    size = re.search(r"shards of (\d+)", out.stdout)
    shards = re.search(r"plan: (\d+) shards", out.stdout)
    if out.returncode != 0:
        if "cannot give each" not in out.stderr and "more ranks" not in out.stderr:
            raise SystemExit(f"{' '.join(cmd)}: {out.stderr}")
        return None, 0, int(size.group(1)), int(shards.group(1))
    key = "dropped" if remainder == "drop" else "padded"
    worst = max(int(m) for m in re.findall(key + r" (\d+)", out.stdout))
    cuts = max(int(m) for m in re.findall(r"cuts (\d+)", out.stdout))
    return worst, cuts, int(size.group(1)), int(shards.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shardcache")
    ap.add_argument("--sample-bytes", type=int, default=3080)
    ap.add_argument("--epochs", type=int, default=8)
    a = ap.parse_args()
    print("| N | R | B | shard | shards | drop global | drop sticky | pad global | pad sticky "
          "| cuts | torch drop | torch pad | R x B |")
    print("|" + " ---: |" * 13)
    over = []
    for n in NS:
        for r in RANKS:
            if r > n:
                continue
            for b in BATCHES:
                cells, size, shards, most_cuts = [], 0, 0, 0
                for remainder in ("drop", "pad"):
                    for mode in ("global", "sticky"):
                        w, cuts, size, shards = plan(a.shardcache, n, r, b, mode, remainder,
                                                     a.sample_bytes, a.epochs)
                        cells.append("refused" if w is None else str(w))
                        most_cuts = max(most_cuts, cuts)
                        if w is not None and w >= r * b:
                            over.append((n, r, b, mode, remainder, w))
                        if cuts > 2 * (r - 1):
                            over.append((n, r, b, mode, remainder, f"{cuts} cuts"))
                torch_drop = n % r + r * ((n // r) % b)
                torch_pad = r * -(-n // r) - n
                print(f"| {n:,} | {r} | {b} | {size} | {shards} | " + " | ".join(cells) +
                      f" | {most_cuts} | {torch_drop} | {torch_pad} | {r * b} |")
    print()
    for n, r, b, mode, remainder, w in over:
        print(f"over the bound: N {n}, R {r}, B {b}, {mode} {remainder}: {w} "
              f"(bounds: {r * b} samples, {2 * (r - 1)} cuts)")


if __name__ == "__main__":
    main()
