#!/usr/bin/env bash
# Installs what is missing, builds Kiln, compiles models/tiny_gpt.kiln and trains it
# for 300 steps on byte-level text every Debian machine carries (the GPL), on the
# CPU (the CUDA backend is a later issue), printing progress and the final loss.
#   STEPS=N tools/demo.sh      to train longer
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
mkdir -p out
build/bin/kilnc models/tiny_gpt.kiln -o out/tiny_gpt.kart
build/bin/kiln-run out/tiny_gpt.kart --data /usr/share/common-licenses/GPL-3 \
  --steps "${STEPS:-300}" --lr 1e-3 --seed 1 --metrics out/tiny_gpt.jsonl
echo "metrics: out/tiny_gpt.jsonl (one JSON object per step)"
