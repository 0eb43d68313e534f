#!/usr/bin/env bash
# Modelled time of the nine light models from the onnx wheel on both targets, through
# `swflow bench` (JIT-compiled kernels on the timed emulator): one line per model and target
# with the modelled seconds, GFLOPS and fraction of the target's peak; the JSON reports are
# kept in .cache/bench-light/<target>/<model>.json. With `--tune N` every kernel's schedule
# is tuned (`swflow bench --tune N`) and the reports go to .cache/bench-tuned instead. Needs
# the conformance data (bash scripts/setup-conformance.sh) and a release build.
#   bash scripts/bench-light.sh [--tune N] [model ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swflow="$root/target/release/swflow"
light="$root/.cache/conformance/light"
out="$root/.cache/bench-light"
tune=()
if [ "${1:-}" = "--tune" ]; then
    tune=(--tune "$2")
    out="$root/.cache/bench-tuned"
    shift 2
fi
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=(bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512)
fi
printf '%-14s %-11s %12s %9s %8s %8s\n' model target "modelled s" GFLOPS "of peak" "wall s"
for target in sw26010 sw26010pro; do
    mkdir -p "$out/$target"
    for m in "${models[@]}"; do
        report="$out/$target/$m.json"
        start=$(date +%s.%N)
        "$swflow" bench "$light/$m/model.onnx" --target "$target" "${tune[@]}" --json > "$report"
        end=$(date +%s.%N)
        python3 - "$report" "$m" "$target" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["total"]
print(f"{sys.argv[2]:<14} {sys.argv[3]:<11} {r['total_modelled_seconds']:12.6f} {t['gflops']:9.3f} "
      f"{100 * t['gflops'] / r['peak_gflops']:7.3f}% {float(sys.argv[5]) - float(sys.argv[4]):8.1f}")
PY
    done
done
