#!/usr/bin/env bash
# How closely the scheduler's estimate (with each kernel's launch and last put latency)
# follows the timed emulator on the kernels of the nine light models, from the JSON reports
# of scripts/bench-light.sh: per target, the median of estimate / modelled time, the share of
# kernels within 10 %, the mean of |ln(estimate / modelled)| weighted by modelled time, the
# same for the estimate's DMA queue time against the emulator's (kernels whose queue works at
# least 5 us), and the kernels the estimate misses by the most time.
#   bash scripts/estimate-accuracy.sh [REPORTS_DIR]   (default .cache/bench-light)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="${1:-$root/.cache/bench-light}"
python3 - "$dir" <<'PY'
import glob, json, math, os, statistics, sys
for target in ("sw26010", "sw26010pro"):
    rows = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], target, "*.json"))):
        model = os.path.basename(path)[:-5]
        for k in json.load(open(path))["kernels"]:
            if k["modelled_seconds"] > 0 and k["scheduler_estimate_seconds"] > 0:
                rows.append((model, k, k["scheduler_estimate_seconds"] / k["modelled_seconds"]))
    if not rows:
        continue
    seconds = sum(k["modelled_seconds"] for _, k, _ in rows)
    median = statistics.median(r for _, _, r in rows)
    within = sum(abs(r - 1) <= 0.1 for _, _, r in rows) / len(rows)
    weighted = sum(abs(math.log(r)) * k["modelled_seconds"] for _, k, r in rows) / seconds
    print(f"{target}: {len(rows)} kernels; estimate / modelled: median {median:.3f}, "
          f"within 10 % for {100 * within:.1f} %, time-weighted mean |ln| {weighted:.3f}")
    queued = [(k, k["scheduler_dma_estimate_seconds"] / k["dma_queue_seconds"])
              for _, k, _ in rows if k["dma_queue_seconds"] >= 5e-6 and k["scheduler_dma_estimate_seconds"] > 0]
    if queued:
        busy = sum(k["dma_queue_seconds"] for k, _ in queued)
        print(f"  DMA queue, {len(queued)} kernels: median {statistics.median(r for _, r in queued):.3f}, "
              f"within 10 % for {100 * sum(abs(r - 1) <= 0.1 for _, r in queued) / len(queued):.1f} %, "
              f"time-weighted mean |ln| "
              f"{sum(abs(math.log(r)) * k['dma_queue_seconds'] for k, r in queued) / busy:.3f}")
    missed = sorted(rows, key=lambda x: -abs(x[1]["scheduler_estimate_seconds"] - x[1]["modelled_seconds"]))
    for model, k, r in missed[:5]:
        print(f"  {model[:14]:<14} {k['kernel'][:16]:<16} {k['op'][:28]:<28} "
              f"modelled {1e6 * k['modelled_seconds']:9.1f} us, estimate x{r:.2f}")
PY
