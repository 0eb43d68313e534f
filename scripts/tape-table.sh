#!/usr/bin/env bash
# Prints, for the training models of scripts/setup-training.sh and the Tapeflow benchmark
# models of scripts/tapeflow/models.py, on both targets and in each --tape mode (with the
# default --tape-travel timed, and `stream:rule`: --tape stream --tape-travel rule, every value
# streamed that can be), what the gradient step's tape costs:
# - saved: bytes of the forward values the backward reads; tape-only: those only the backward
#   reads; records: tape-only bytes stored as per-CPE records (every reader mirrors); streamed:
#   tape-only bytes streamed through the tape arena, and the most layers one CPE pushes;
# - tape KB, transfers, mean transfer and modelled tape DMA time (the emulator counts the
#   transfers that carry tape apart: backward reads of saved tensors, forward writes of
#   tape-only ones);
# - the tape's share of all DMA bytes, and the gradient step's DMA bytes over the forward's;
# - the LDM high-water mark (largest per-CPE use of any kernel, from the emulator), split into
#   the tape arena and the largest working buffers (from the schedule), and the modelled step
#   time.
# Runs the JIT engine, which reports the same counts and times as the generated C.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gradient-models.sh
source scripts/gradient-models.sh

printf '%-20s %-10s %-11s %9s %9s %9s %9s %6s %9s %8s %8s %8s %8s %7s %6s %6s %6s %8s\n' \
    model target mode saved_B tape_only records streamed layers tape_KB xfers mean_B tape_us tape/dma bwd/fwd \
    ldm_KB arena work step_ms
for target in sw26010 sw26010pro; do
    for entry in "${models[@]}"; do
        IFS='|' read -r name model loss <<< "$entry"
        fwd_dma=$("$swflow" bench "$model" --target "$target" --engine jit --json | json "d['total']['dma_bytes']")
        for row in per-tensor regions stream stream:rule; do
            mode=${row%%:*}
            travel=()
            [[ $row == *:rule ]] && travel=(--tape-travel rule)
            # shellcheck disable=SC2086
            s=$("$swflow" schedule "$model" --target "$target" --grad $loss --tape "$mode" "${travel[@]}" --json)
            # shellcheck disable=SC2086
            b=$("$swflow" bench "$model" --target "$target" --engine jit --grad $loss --tape "$mode" "${travel[@]}" --json)
            read -r saved only records streamed layers arena < <(echo "$s" | json "' '.join(str(d['tape'][k]) for k in ['saved_bytes','tape_only_bytes','record_bytes','streamed_bytes','layers_per_cpe','tape_arena_bytes'])")
            work=$(echo "$s" | json "max(k['ldm_bytes'] for k in d['kernels'])")
            read -r tbytes xfers mean tsec < <(echo "$b" | json "' '.join(str(d['tape'][k]) for k in ['bytes','transfers','mean_transfer_bytes','modelled_seconds'])")
            read -r dma ldm step < <(echo "$b" | json "' '.join(str(x) for x in [d['total']['dma_bytes'], max(k['ldm_high_water'] for k in d['kernels']), d['total_modelled_seconds']])")
            printf '%-20s %-10s %-11s %9d %9d %9d %9d %6d %9.1f %8d %8.0f %8.2f %8.3f %7.2f %6.1f %6.1f %6.1f %8.4f\n' \
                "$name" "$target" "$row" "$saved" "$only" "$records" "$streamed" "$layers" \
                "$(python3 -c "print($tbytes/1024)")" "$xfers" "$mean" "$(python3 -c "print($tsec*1e6)")" \
                "$(python3 -c "print($tbytes/$dma)")" "$(python3 -c "print($dma/$fwd_dma if $fwd_dma else float('nan'))")" \
                "$(python3 -c "print($ldm/1024)")" "$(python3 -c "print($arena/1024)")" \
                "$(python3 -c "print($work/1024)")" "$(python3 -c "print($step*1e3)")"
        done
    done
done
