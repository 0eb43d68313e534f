#!/usr/bin/env bash
# Per-kernel modelled speed of one model on one target, through `swflow bench --json` (JIT
# kernels on the timed emulator): every convolution and matrix-product kernel with its
# GFLOPS and fraction of the target's peak and the shares of its time the DMA queue was busy
# and spent on per-block costs, then the distribution over them (weighted by
# flops, and plain); every other kernel that moves data with the fraction of the DMA roof
# it reaches at its arithmetic intensity. SWFLOW names the binary (default: this checkout's
# release build), so two builds can be compared on one model.
#   bash scripts/kernel-table.sh MODEL.onnx [--target T] [bench options ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swflow="${SWFLOW:-$root/target/release/swflow}"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
"$swflow" bench "$@" --json > "$report"
python3 - "$report" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
peak = r["peak_gflops"]
products = [k for k in r["kernels"] if k["flops"] > 0 and any(o in k["op"] for o in ("conv", "matmul", "gemm"))]
others = [k for k in r["kernels"] if k not in products and k["dma_bytes"] > 0]
print(f"{r['model']} on {r['target']}: modelled {r['total_modelled_seconds']:.6f} s, "
      f"{r['total']['gflops']:.3f} GFLOPS ({100 * r['total']['gflops'] / peak:.2f}% of {peak} peak)")
print(f"{'kernel':<24} {'op':<40} {'ms':>9} {'GFLOPS':>9} {'of peak':>8} {'queue':>7} {'blocks':>7}")
for k in sorted(products, key=lambda k: -k["modelled_seconds"]):
    print(f"{k['kernel']:<24} {k['op'][:40]:<40} {1e3 * k['modelled_seconds']:9.4f} {k['gflops']:9.3f} "
          f"{100 * k['gflops'] / peak:7.2f}% {100 * k['dma_queue_seconds'] / k['modelled_seconds']:6.1f}% "
          f"{100 * k['dma_block_seconds'] / k['modelled_seconds']:6.1f}%")
if products:
    fr = sorted(100 * k["gflops"] / peak for k in products)
    flops = sum(k["flops"] for k in products)
    secs = sum(k["modelled_seconds"] for k in products)
    print(f"{len(products)} product kernels: of peak min {fr[0]:.2f}%, median {statistics.median(fr):.2f}%, "
          f"max {fr[-1]:.2f}%; all together {100 * flops / secs / 1e9 / peak:.2f}% "
          f"({1e3 * secs:.3f} ms of {1e3 * r['total_modelled_seconds']:.3f})")
if others:
    rf = sorted(100 * k["roofline_fraction"] for k in others)
    secs = sum(k["modelled_seconds"] for k in others)
    moved = sum(k["dma_bytes"] for k in others)
    print(f"{len(others)} other kernels: of their roof min {rf[0]:.1f}%, median {statistics.median(rf):.1f}%, "
          f"max {rf[-1]:.1f}%; {moved / secs / 1e9:.2f} GB/s together over {1e3 * secs:.3f} ms")
PY
