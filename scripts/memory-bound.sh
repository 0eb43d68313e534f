#!/usr/bin/env bash
# How close the memory-bound kernels of the nine light models come to the DMA roof, from the
# JSON reports of scripts/bench-light.sh: per target, the kernels that move data and are not
# convolutions or matrix products with flops (as scripts/kernel-table.sh sorts them), with
# the median of their `roofline_fraction` and its mean weighted by modelled time, the share
# of their time the DMA queue spent on per-block costs (which the roof leaves out), then the
# ops that lose the most time below the roof.
#   bash scripts/memory-bound.sh [REPORTS_DIR]   (default .cache/bench-light)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="${1:-$root/.cache/bench-light}"
python3 - "$dir" <<'PY'
import collections, glob, json, os, statistics, sys
for target in ("sw26010", "sw26010pro"):
    kernels = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], target, "*.json"))):
        for k in json.load(open(path))["kernels"]:
            product = k["flops"] > 0 and any(o in k["op"] for o in ("conv", "matmul", "gemm"))
            if not product and k["dma_bytes"] > 0:
                kernels.append(k)
    if not kernels:
        continue
    seconds = sum(k["modelled_seconds"] for k in kernels)
    median = statistics.median(k["roofline_fraction"] for k in kernels)
    weighted = sum(k["roofline_fraction"] * k["modelled_seconds"] for k in kernels) / seconds
    blocks = sum(k["dma_block_seconds"] for k in kernels)
    print(f"{target}: {len(kernels)} memory-bound kernels, {1e3 * seconds:.3f} ms; "
          f"DMA roof reached: median {100 * median:.1f}%, weighted by time {100 * weighted:.1f}%; "
          f"per-block costs {1e3 * blocks:.3f} ms of the queue ({100 * blocks / seconds:.1f}% of their time)")
    lost = collections.defaultdict(lambda: [0, 0.0])
    for k in kernels:
        lost[k["op"]][0] += 1
        lost[k["op"]][1] += k["modelled_seconds"] * (1 - k["roofline_fraction"])
    for op, (n, s) in sorted(lost.items(), key=lambda x: -x[1][1])[:8]:
        print(f"  {op[:40]:<40} {n:4d} kernels, {1e3 * s:8.3f} ms below the roof")
PY
