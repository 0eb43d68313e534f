#!/usr/bin/env bash
# Installs the pinned onnx package into .cache/venv and regenerates the conformance data into
# .cache/conformance (both ignored by git). Does nothing when the data is already current.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.cache/venv"
data="$root/.cache/conformance"
stamp=$(cat "$root/scripts/conformance/requirements.txt" "$root/scripts/conformance/generate.py" | sha256sum | cut -d' ' -f1)
if [ -f "$data/STAMP" ] && [ "$(cat "$data/STAMP")" = "$stamp" ]; then
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/conformance/requirements.txt"
"$venv/bin/python" "$root/scripts/conformance/generate.py" "$data.tmp"
rm -rf "$data"
mv "$data.tmp" "$data"
echo "$stamp" > "$data/STAMP"
