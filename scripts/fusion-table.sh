#!/usr/bin/env bash
# What fusion changes, per light model and target: kernels, DMA bytes and DMA transfers of the
# schedule (`swflow schedule --json`) and the modelled time of a run through the JIT on the
# timed emulator (`swflow bench --json`), with `--fuse none` and with the default fusion side
# by side, and their ratios. Then, for resnet50, the kernels the timed emulator finds
# memory-bound: their DMA bytes against their compulsory traffic (each result written once,
# each tensor read read once). Needs the conformance data (bash scripts/setup-conformance.sh)
# and a release build.
#   bash scripts/fusion-table.sh [--target T ...] [model ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swflow="$root/target/release/swflow"
light="$root/.cache/conformance/light"
work="$root/.cache/fusion-table"
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --target) targets+=("$2"); shift 2 ;;
        *) break ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(sw26010 sw26010pro)
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=(bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512)
fi
mkdir -p "$work"

for target in "${targets[@]}"; do
    for m in "${models[@]}"; do
        for fuse in none default; do
            base="$work/$m.$target.$fuse"
            "$swflow" schedule "$light/$m/model.onnx" --target "$target" --fuse "$fuse" --json > "$base.schedule.json"
            "$swflow" bench "$light/$m/model.onnx" --target "$target" --fuse "$fuse" --json > "$base.bench.json"
        done
    done
done

python3 - "$work" "${targets[*]}" "${models[*]}" <<'EOF'
import json, sys
work, targets, models = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def figures(model, target, fuse):
    base = f"{work}/{model}.{target}.{fuse}"
    schedule = json.load(open(base + ".schedule.json"))
    bench = json.load(open(base + ".bench.json"))
    kernels = schedule["kernels"]
    return (
        len(kernels),
        sum(k["dma_bytes"] for k in kernels) / 1e6,
        sum(k["dma_transfers"] for k in kernels),
        bench["total_modelled_seconds"] * 1e3,
    )

for target in targets:
    print(f"\n{target}: unfused -> fused (ratio unfused / fused)")
    print(f"| model | kernels | DMA MB | DMA transfers | modelled ms |")
    print(f"|---|---|---|---|---|")
    for m in models:
        a, b = figures(m, target, "none"), figures(m, target, "default")
        cells = [
            f"{a[0]} -> {b[0]}",
            f"{a[1]:.1f} -> {b[1]:.1f} ({a[1] / b[1]:.2f}x)",
            f"{a[2]} -> {b[2]} ({a[2] / b[2]:.2f}x)",
            f"{a[3]:.2f} -> {b[3]:.2f} ({a[3] / b[3]:.2f}x)",
        ]
        print(f"| {m} | " + " | ".join(cells) + " |")

if "resnet50" in models:
    print("\nresnet50, memory-bound kernels (bound = dma): DMA against compulsory traffic")
    print("| target | fuse | memory-bound kernels | their modelled ms | DMA MB | compulsory MB | DMA / compulsory |")
    print("|---|---|---|---|---|---|---|")
    for target in targets:
        for fuse in ("none", "default"):
            bench = json.load(open(f"{work}/resnet50.{target}.{fuse}.bench.json"))
            rows = [k for k in bench["kernels"] if k["bound"] == "dma"]
            dma = sum(k["dma_bytes"] for k in rows) / 1e6
            need = sum(k["compulsory_bytes"] for k in rows) / 1e6
            ms = sum(k["modelled_seconds"] for k in rows) * 1e3
            ratio = f"{dma / need:.2f}" if need else "-"
            print(f"| {target} | {fuse} | {len(rows)} of {len(bench['kernels'])} | {ms:.2f} | {dma:.1f} | {need:.1f} | {ratio} |")
EOF
