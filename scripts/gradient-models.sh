# Sourced by the scripts that measure gradient programs: prepares the training models of
# scripts/setup-training.sh and the Tapeflow benchmark models of scripts/tapeflow/models.py,
# builds swflow, and defines
# - `swflow`: the binary;
# - `json EXPR`: evaluates the Python expression EXPR on the JSON document `d` read from stdin;
# - `models`: one `name|model file|loss options` entry per model.
bash scripts/setup-training.sh > /dev/null
bash scripts/setup-tapeflow.sh > /dev/null
cargo build --release --quiet
swflow=target/release/swflow
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

models=()
for m in mlp lenet residual_bn depthwise_separable transformer_block; do
    loss=$(python3 -c "import json; print(json.load(open('.cache/training/$m/case.json'))['loss'])")
    models+=("$m|.cache/training/$m/model.onnx|--loss $loss")
done
for m in logsum matd nn lenet5 mttkrp gravity pathfinder massspring; do
    models+=("$m|.cache/tapeflow/$m/model.onnx|--loss-output loss")
done
