#!/usr/bin/env bash
# Runs every swflow test: prepares the conformance data, the training models with their jax
# gradients and the benchmark models CI uses (cached in .cache/), then builds once and runs
# the whole workspace's tests in release mode.
# One build makes the binaries, the libraries and the tests together: built apart, the tests'
# development dependencies change the features of shared dependencies and half the
# workspace builds twice.
# Ends with the total count.
# The release build comes first: tests of generated C link the emulator library it makes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-conformance.sh
bash scripts/setup-training.sh
bash scripts/setup-tapeflow.sh
# The benchmark models CI builds (tests/tests/benchmark_models.rs); the rest are built on
# demand by their ignored test's instructions.
bash scripts/setup-models.sh dcgan mobilenet shufflenet
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo build --release --workspace --lib --bins --tests
cargo test --release --workspace 2>&1 | tee "$log"
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
