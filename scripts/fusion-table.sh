#!/usr/bin/env bash
# What fusion changes, per light model and target: kernels, DMA bytes and DMA transfers of the
# schedule (`swflow schedule --json`) and the modelled time of a run through the JIT on the
# timed emulator (`swflow bench --json`), side by side for `--fuse none` (the graph as
# imported), `--fuse simplify` (simplified, one kernel per primitive) and the default
# (simplified and fused), with the ratios none / default and simplify / default (the part
# fusion alone gives). Then, for resnet50, the kernels the timed emulator finds
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
        for fuse in none simplify default; do
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
    print(f"\n{target}: none / simplify / default (ratios none / default, simplify / default)")
    print(f"| model | kernels | DMA MB | DMA transfers | modelled ms |")
    print(f"|---|---|---|---|---|")
    for m in models:
        a, s, b = (figures(m, target, f) for f in ("none", "simplify", "default"))
        def cell(i, fmt):
            return f"{a[i]:{fmt}} / {s[i]:{fmt}} / {b[i]:{fmt}} ({a[i] / b[i]:.2f}x, {s[i] / b[i]:.2f}x)"
        cells = [cell(0, "d"), cell(1, ".1f"), cell(2, "d"), cell(3, ".2f")]
        print(f"| {m} | " + " | ".join(cells) + " |")

if "resnet50" in models:
    print("\nresnet50, memory-bound kernels (bound = dma): DMA against compulsory traffic")
    print("| target | fuse | memory-bound kernels | their modelled ms | DMA MB | compulsory MB | DMA / compulsory |")
    print("|---|---|---|---|---|---|---|")
    for target in targets:
        for fuse in ("none", "simplify", "default"):
            bench = json.load(open(f"{work}/resnet50.{target}.{fuse}.bench.json"))
            rows = [k for k in bench["kernels"] if k["bound"] == "dma"]
            dma = sum(k["dma_bytes"] for k in rows) / 1e6
            need = sum(k["compulsory_bytes"] for k in rows) / 1e6
            ms = sum(k["modelled_seconds"] for k in rows) * 1e3
            ratio = f"{dma / need:.2f}" if need else "-"
            print(f"| {target} | {fuse} | {len(rows)} of {len(bench['kernels'])} | {ms:.2f} | {dma:.1f} | {need:.1f} | {ratio} |")
EOF
