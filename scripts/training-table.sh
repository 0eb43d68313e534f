#!/usr/bin/env bash
# Prints, for each training model of scripts/setup-training.sh: the saved-value plan (tape,
# recomputed values, all forward values and the forward's peak, from `swflow inspect --grad`),
# and the modelled time of the forward alone, of the gradient step (`bench --grad`) and of the
# training step with SGD (`bench --train`), on both targets, with the step/forward ratio; then
# the same for ResNet-18 at batch 1 (built by `bash scripts/setup-models.sh resnet18`), whose
# kernels are large enough to be bound by compute rather than by launches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-training.sh > /dev/null
cargo build --release --quiet
swflow=target/release/swflow
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
printf '%-20s %10s %10s %12s %10s %10s\n' model tape_B recomp_B forward_B peak_B tape/fwd
for m in mlp lenet residual_bn depthwise_separable transformer_block; do
    loss=$(python3 -c "import json; print(json.load(open('.cache/training/$m/case.json'))['loss'])")
    g=$("$swflow" inspect ".cache/training/$m/model.onnx" --grad --loss "$loss" --json)
    read -r tape recomp fwd peak < <(echo "$g" | field "' '.join(str(d['gradient'][k]) for k in ['tape_bytes','recomputed_bytes','forward_intermediate_bytes','forward_peak_bytes'])")
    printf '%-20s %10d %10d %12d %10d %10.2f\n' "$m" "$tape" "$recomp" "$fwd" "$peak" "$(python3 -c "print($tape/$fwd)")"
done
echo
printf '%-20s %-11s %12s %12s %12s %9s %9s\n' model target forward_ms grad_ms train_ms grad/fwd train/fwd
for target in sw26010 sw26010pro; do
    for m in mlp lenet residual_bn depthwise_separable transformer_block; do
        loss=$(python3 -c "import json; print(json.load(open('.cache/training/$m/case.json'))['loss'])")
        model=".cache/training/$m/model.onnx"
        f=$("$swflow" bench "$model" --target "$target" --json | field "d['total_modelled_seconds']*1e3")
        g=$("$swflow" bench "$model" --target "$target" --grad --loss "$loss" --json | field "d['total_modelled_seconds']*1e3")
        t=$("$swflow" bench "$model" --target "$target" --train --loss "$loss" --optimizer sgd --lr 0.01 --json | field "d['total_modelled_seconds']*1e3")
        printf '%-20s %-11s %12.4f %12.4f %12.4f %9.2f %9.2f\n' "$m" "$target" "$f" "$g" "$t" \
            "$(python3 -c "print($g/$f)")" "$(python3 -c "print($t/$f)")"
    done
done
bash scripts/setup-models.sh resnet18 > /dev/null
model=.cache/models/resnet18/model.onnx
for target in sw26010 sw26010pro; do
    f=$("$swflow" bench "$model" --dim N=1 --target "$target" --json | field "d['total_modelled_seconds']*1e3")
    g=$("$swflow" bench "$model" --dim N=1 --target "$target" --grad --loss cross-entropy --json | field "d['total_modelled_seconds']*1e3")
    t=$("$swflow" bench "$model" --dim N=1 --target "$target" --train --loss cross-entropy --optimizer sgd --lr 0.01 --json | field "d['total_modelled_seconds']*1e3")
    printf '%-20s %-11s %12.4f %12.4f %12.4f %9.2f %9.2f\n' resnet18_n1 "$target" "$f" "$g" "$t" \
        "$(python3 -c "print($g/$f)")" "$(python3 -c "print($t/$f)")"
done
