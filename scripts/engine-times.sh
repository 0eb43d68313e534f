#!/usr/bin/env bash
# Wall times of the nine light models through each engine that runs scheduled kernels, side
# by side on one target: the loop-IR executor (`swflow run --engine loops`), the JIT
# (`--engine jit`: compile and run apart) and the generated C (`swflow compile`, `make`, and
# the program's run). The executors' times are their own reports (`-v`), so model import and
# scheduling are left out of both; the C columns are whole commands. The last column is the
# loop-IR executor's time over the JIT's run. With --repeat N every run is made N times and
# the least time kept (the compile and make once). Needs the conformance data
# (bash scripts/setup-conformance.sh) and a release build.
#   bash scripts/engine-times.sh [--target T] [--repeat N] [model ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swflow="$root/target/release/swflow"
light="$root/.cache/conformance/light"
work="$root/.cache/engine-times"
target=sw26010
repeat=1
while [ $# -gt 0 ]; do
    case "$1" in
        --target) target=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        *) break ;;
    esac
done
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=(bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512)
fi
mkdir -p "$work"

# Seconds in a duration as Rust's Debug prints it (`1.23s`, `456.7ms`, `89µs`).
seconds() {
    python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)(s|ms|µs|us|ns)", sys.argv[1])
if not m:
    sys.exit(f"not a duration: {sys.argv[1]}")
print(float(m[1]) * {"s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}[m[2]])' "$1"
}

# The least of its arguments.
least() {
    printf '%s\n' "$@" | sort -g | head -1
}

# Wall seconds of a command (its output goes to $work/last.log; a failure stops the script).
timed() {
    local start end
    start=$(date +%s.%N)
    "$@" > "$work/last.log" 2>&1 || { cat "$work/last.log" >&2; exit 1; }
    end=$(date +%s.%N)
    python3 -c "print(f'{$end - $start:.2f}')"
}

printf '%-13s %9s | %9s %9s | %9s %9s %9s | %8s\n' \
    "$target" "loops run" "jit comp" "jit run" "c compile" "c make" "c run" "loops/jit"
for m in "${models[@]}"; do
    model="$light/$m/model.onnx"
    log="$work/$m.$target"
    loops=() jit_compile=() jit_run=() c_run=()
    # One engine's runs follow each other: the first run after another program's may pay for
    # the OS handing its memory back.
    for _ in $(seq "$repeat"); do
        "$swflow" run "$model" --engine loops --target "$target" -v > "$log.loops" 2>&1
        loops+=("$(seconds "$(sed -n 's/.* CPEs in \([^,]*\), .*/\1/p' "$log.loops")")")
    done
    for _ in $(seq "$repeat"); do
        "$swflow" run "$model" --engine jit --target "$target" -v > "$log.jit" 2>&1
        jit_compile+=("$(seconds "$(sed -n 's/.* compiled in \([^ ]*\) and ran .*/\1/p' "$log.jit")")")
        jit_run+=("$(seconds "$(sed -n 's/.* and ran on the emulated [^ ]* in \([^:]*\):.*/\1/p' "$log.jit")")")
    done
    out="$work/$m.$target.c"
    rm -rf "$out"
    c_compile=$(timed "$swflow" compile "$model" --target "$target" -o "$out")
    c_make=$(timed make -C "$out" -j"$(nproc)")
    for _ in $(seq "$repeat"); do
        c_run+=("$(timed "$out/model")")
    done
    loops_s=$(least "${loops[@]}")
    jit_run_s=$(least "${jit_run[@]}")
    python3 -c "
print(f'{\"$m\":<13} {$loops_s:9.2f} | {$(least "${jit_compile[@]}"):9.2f} {$jit_run_s:9.2f} | '
      f'{$c_compile:9.2f} {$c_make:9.2f} {$(least "${c_run[@]}"):9.2f} | {$loops_s / $jit_run_s:7.1f}x')"
done
