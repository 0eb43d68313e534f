#!/usr/bin/env bash
# Two sweeps of the streamed gradient tape, on both targets, with LeNet-5 of
# scripts/tapeflow/models.py at larger batches (written into .cache/tapeflow-batches):
# - the tape arena's largest size (--tape-arena; a stream takes less when one CPE's share
#   needs less), 1 KiB up to 32 KiB on sw26010 and 128 KiB on sw26010pro, at batch 128, with
#   every value streamed that can be (--tape-travel rule): the bytes streamed, the most layers
#   one CPE pushes, the tape's transfers and the modelled step time (the `per-tensor` row is
#   the reference);
# - the batch, chosen so that the saved tape is about 0.5x, 1x and 4x the core group's LDM
#   (64 CPEs' scratchpads), in each --tape mode (with the default --tape-travel timed): the
#   tape's bytes, transfers, mean transfer, modelled tape DMA time and step time.
# Runs the JIT engine, which reports the same counts and times as the generated C.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-tapeflow.sh > /dev/null
cargo build --release --quiet
swflow=target/release/swflow
dir=.cache/tapeflow-batches
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
model() {
    if [ ! -f "$dir/lenet5_b$1/model.onnx" ]; then
        .cache/venv/bin/python scripts/tapeflow/models.py --batch "$1" "$dir" > /dev/null
    fi
    echo "$dir/lenet5_b$1/model.onnx"
}
# Tape and time of one run: streamed bytes, layers, tape transfers, tape bytes, mean transfer,
# tape seconds, step seconds.
measure() {
    local file=$1 target=$2
    shift 2
    local s b
    s=$("$swflow" schedule "$file" --target "$target" --grad --loss-output loss "$@" --json)
    b=$("$swflow" bench "$file" --target "$target" --engine jit --grad --loss-output loss "$@" --json)
    echo "$(echo "$s" | json "d['tape']['saved_bytes'], d['tape']['streamed_bytes'], d['tape']['layers_per_cpe']" | tr -d '(),') \
$(echo "$b" | json "d['tape']['transfers'], d['tape']['bytes'], d['tape']['mean_transfer_bytes'], d['tape']['modelled_seconds'], d['total_modelled_seconds']" | tr -d '(),')"
}

echo "== tape arena sweep: lenet5 at batch 128 =="
printf '%-10s %-10s %9s %9s %6s %8s %10s %9s %9s\n' target arena_KiB saved_B streamed layers xfers tape_KB tape_us step_ms
file=$(model 128)
for target in sw26010 sw26010pro; do
    arenas="1 2 4 8 16 32"
    [ "$target" = sw26010pro ] && arenas="$arenas 64 128"
    read -r saved streamed layers xfers tbytes _ tsec step < <(measure "$file" "$target" --tape per-tensor)
    printf '%-10s %-10s %9d %9d %6d %8d %10.1f %9.2f %9.4f\n' "$target" per-tensor "$saved" "$streamed" "$layers" \
        "$xfers" "$(python3 -c "print($tbytes/1024)")" "$(python3 -c "print($tsec*1e6)")" "$(python3 -c "print($step*1e3)")"
    for kib in $arenas; do
        read -r saved streamed layers xfers tbytes _ tsec step < <(measure "$file" "$target" --tape stream --tape-travel rule --tape-arena $((kib * 1024)))
        printf '%-10s %-10s %9d %9d %6d %8d %10.1f %9.2f %9.4f\n' "$target" "$kib" "$saved" "$streamed" "$layers" \
            "$xfers" "$(python3 -c "print($tbytes/1024)")" "$(python3 -c "print($tsec*1e6)")" "$(python3 -c "print($step*1e3)")"
    done
done

echo
echo "== batch sweep: lenet5, saved tape about 0.5x, 1x and 4x the core group's LDM =="
printf '%-10s %6s %6s %-10s %10s %6s %9s %8s %8s %9s %9s\n' target batch xLDM mode saved_KB layers tape_KB xfers mean_B tape_us step_ms
# The saved bytes of one image.
one=$("$swflow" schedule .cache/tapeflow/lenet5/model.onnx --grad --loss-output loss --json | json "d['tape']['saved_bytes']")
for target in sw26010 sw26010pro; do
    ldm=$([ "$target" = sw26010 ] && echo $((64 * 64 * 1024)) || echo $((64 * 256 * 1024)))
    for factor in 0.5 1 4; do
        batch=$(python3 -c "print(max(1, round($factor * $ldm / $one)))")
        file=$(model "$batch")
        for mode in per-tensor regions stream; do
            read -r saved _ layers xfers tbytes mean tsec step < <(measure "$file" "$target" --tape "$mode")
            printf '%-10s %6d %6.2f %-10s %10.1f %6d %9.1f %8d %8.0f %9.1f %9.3f\n' "$target" "$batch" \
                "$(python3 -c "print($saved/$ldm)")" "$mode" "$(python3 -c "print($saved/1024)")" "$layers" \
                "$(python3 -c "print($tbytes/1024)")" "$xfers" "$mean" "$(python3 -c "print($tsec*1e6)")" \
                "$(python3 -c "print($step*1e3)")"
        done
    done
done
