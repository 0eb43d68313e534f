#!/usr/bin/env bash
# Writes the Tapeflow benchmark models (scripts/tapeflow/models.py) into .cache/tapeflow (ignored
# by git), with the venv of scripts/setup-conformance.sh, which it runs first. Skipped when the
# stamp is current.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup-conformance.sh"
out="$root/.cache/tapeflow"
stamp=$(sha256sum < "$root/scripts/tapeflow/models.py" | cut -d' ' -f1)
if [ -f "$out/STAMP" ] && [ "$(cat "$out/STAMP")" = "$stamp" ]; then
    exit 0
fi
rm -rf "$out.tmp"
"$root/.cache/venv/bin/python" "$root/scripts/tapeflow/models.py" "$out.tmp" > /dev/null
echo "$stamp" > "$out.tmp/STAMP"
rm -rf "$out"
mv "$out.tmp" "$out"
