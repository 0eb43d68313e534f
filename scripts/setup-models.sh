#!/usr/bin/env bash
# Builds the benchmark models of the swTVM evaluation (scripts/models/build.py) with their
# onnxruntime reference outputs into .cache/models (ignored by git), in the conformance venv
# (same pinned onnx and onnxruntime). Models already built by the current script are kept.
#   bash scripts/setup-models.sh                   all eight models
#   bash scripts/setup-models.sh dcgan mobilenet   only these
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup-conformance.sh"
python="$root/.cache/venv/bin/python"
out="$root/.cache/models"
stamp=$(cat "$root/scripts/conformance/requirements.txt" "$root/scripts/models/build.py" | sha256sum | cut -d' ' -f1)
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=(resnet18 resnet50 vgg16 mobilenet shufflenet yolov3 dcgan bert_base)
fi
mkdir -p "$out"
for m in "${models[@]}"; do
    if [ -f "$out/$m/STAMP" ] && [ "$(cat "$out/$m/STAMP")" = "$stamp" ]; then
        continue
    fi
    rm -rf "$out/$m.tmp"
    "$python" "$root/scripts/models/build.py" "$out/$m.tmp" --models "$m" --repeat 1
    rm -rf "$out/$m"
    mv "$out/$m.tmp/$m" "$out/$m"
    mv "$out/$m.tmp/INDEX.tsv" "$out/$m/INDEX.tsv"
    rm -rf "$out/$m.tmp"
    echo "$stamp" > "$out/$m/STAMP"
done
