#!/usr/bin/env bash
# Installs the pinned onnx package into .cache/venv and regenerates the conformance data into
# .cache/conformance (both ignored by git). Each step is skipped when its stamp is current, so
# a venv that lost its packages is repaired even when the data is still current.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.cache/venv"
data="$root/.cache/conformance"
requirements="$root/scripts/conformance/requirements.txt"
venv_stamp=$(sha256sum < "$requirements" | cut -d' ' -f1)
if [ ! -f "$venv/STAMP" ] || [ "$(cat "$venv/STAMP")" != "$venv_stamp" ]; then
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    echo "$venv_stamp" > "$venv/STAMP"
fi
stamp=$(cat "$requirements" "$root/scripts/conformance/generate.py" | sha256sum | cut -d' ' -f1)
if [ -f "$data/STAMP" ] && [ "$(cat "$data/STAMP")" = "$stamp" ]; then
    exit 0
fi
"$venv/bin/python" "$root/scripts/conformance/generate.py" "$data.tmp"
rm -rf "$data"
mv "$data.tmp" "$data"
echo "$stamp" > "$data/STAMP"
