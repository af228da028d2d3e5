#!/usr/bin/env bash
# Installs what is missing, builds Kiln, compiles models/tiny_gpt.kiln and trains it
# for 300 steps on text found on any Debian machine (the GPL and friends), on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
mkdir -p out
# Byte-level training text: the licence texts every Debian system carries.
cat /usr/share/common-licenses/* > out/demo.txt
build/bin/kilnc models/tiny_gpt.kiln -o out/tiny_gpt.kart
build/bin/kiln-run out/tiny_gpt.kart --data out/demo.txt --steps "${STEPS:-300}" \
  --lr 1e-3 --metrics out/tiny_gpt.jsonl
echo "metrics: out/tiny_gpt.jsonl"
