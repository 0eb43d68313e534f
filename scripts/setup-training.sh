#!/usr/bin/env bash
# Installs the pinned training references (jax, scikit-learn) into .cache/venv and regenerates
# the training models with their jax gradients and the digits example with jax's training run
# into .cache/training (both ignored by git).
# Needs the venv of scripts/setup-conformance.sh, which it runs first. Each step is skipped
# when its stamp is current.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup-conformance.sh"
venv="$root/.cache/venv"
data="$root/.cache/training"
requirements="$root/scripts/training/requirements.txt"
venv_stamp=$(sha256sum < "$requirements" | cut -d' ' -f1)
if [ ! -f "$venv/TRAINING_STAMP" ] || [ "$(cat "$venv/TRAINING_STAMP")" != "$venv_stamp" ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    echo "$venv_stamp" > "$venv/TRAINING_STAMP"
fi
stamp=$(cat "$requirements" "$root/scripts/training/models.py" "$root/scripts/training/digits.py" | sha256sum | cut -d' ' -f1)
if [ -f "$data/STAMP" ] && [ "$(cat "$data/STAMP")" = "$stamp" ]; then
    exit 0
fi
rm -rf "$data.tmp"
"$venv/bin/python" "$root/scripts/training/models.py" "$data.tmp"
"$venv/bin/python" "$root/scripts/training/digits.py" make "$data.tmp/digits"
rm -rf "$data"
mv "$data.tmp" "$data"
echo "$stamp" > "$data/STAMP"
