#!/usr/bin/env bash
# Installs what is missing, builds Kiln, compiles models/tiny_gpt.kiln and trains it
# for 300 steps on byte-level text every Debian machine carries (the GPL), printing
# progress and the final loss. On a machine with an NVIDIA GPU (nvidia-smi lists
# one) the model is compiled for CUDA and trains there; otherwise on the CPU.
#   STEPS=N tools/demo.sh      to train longer
#   TARGET=cpu tools/demo.sh   to stay on the CPU when there is a GPU
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
mkdir -p out
target=${TARGET:-}
if [ -z "$target" ]; then
  target=cpu
  if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
    target=cuda
  fi
fi
echo "demo: training on $( [ "$target" = cuda ] && nvidia-smi -L | head -1 || echo "the CPU" )"
build/bin/kilnc models/tiny_gpt.kiln --target="$target" -o "out/tiny_gpt_$target.kart"
build/bin/kiln-run "out/tiny_gpt_$target.kart" --data /usr/share/common-licenses/GPL-3 \
  --steps "${STEPS:-300}" --lr 1e-3 --seed 1 --metrics out/tiny_gpt.jsonl
echo "metrics: out/tiny_gpt.jsonl (one JSON object per step)"
