#!/usr/bin/env bash
# Prints, for the training models of scripts/setup-training.sh and the Tapeflow benchmark
# models of scripts/tapeflow/models.py, on both targets, what `--recompute timed` chose: the
# number of storable values (those the saved-value rule recomputes and the backward reads)
# and of those it stores, the modelled gradient step with every storable value recomputed
# (`--recompute rule`), with every one stored, and as chosen (the choice's own measurements,
# on the parameters' initial values), and the tape's transfers and bytes with the rule and as
# chosen (from `bench`). Runs the JIT engine with the default tape mode (stream).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gradient-models.sh
source scripts/gradient-models.sh

printf '%-20s %-10s %8s %6s %10s %10s %10s %8s %10s %10s %10s\n' \
    model target storable stored rule_ms all_ms timed_ms timed/rule rule_xfers timed_xfers timed_KB
for target in sw26010 sw26010pro; do
    for entry in "${models[@]}"; do
        IFS='|' read -r name model loss <<< "$entry"
        # shellcheck disable=SC2086
        rule=$("$swflow" bench "$model" --target "$target" --engine jit --grad $loss --recompute rule --json)
        # shellcheck disable=SC2086
        timed=$("$swflow" bench "$model" --target "$target" --engine jit --grad $loss --json)
        rule_x=$(echo "$rule" | json "d['tape']['transfers']")
        read -r timed_x timed_b < <(echo "$timed" | json "d['tape']['transfers'], d['tape']['bytes']" | tr -d '(),')
        # Without storable values there is no choice: the rule's program is measured once.
        read -r storable stored rule_s all_s timed_s < <(echo "$timed" | json "(r['storable'], len(r['stored']), r['rule_seconds'], r['all_stored_seconds'], r['chosen_seconds']) if (r := d['recompute']) else (0, 0) + (d['total_modelled_seconds'],) * 3" | tr -d '(),')
        printf '%-20s %-10s %8d %6d %10.4f %10.4f %10.4f %8.3f %10d %10d %10.1f\n' \
            "$name" "$target" "$storable" "$stored" \
            "$(python3 -c "print($rule_s*1e3)")" "$(python3 -c "print($all_s*1e3)")" "$(python3 -c "print($timed_s*1e3)")" \
            "$(python3 -c "print($timed_s/$rule_s)")" "$rule_x" "$timed_x" "$(python3 -c "print($timed_b/1024)")"
    done
done
