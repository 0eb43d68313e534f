#!/usr/bin/env bash
# Runs every swflow test: prepares the conformance data (cached in .cache/), then builds once
# and runs the whole workspace's tests in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-conformance.sh
cargo test --release --workspace
