#!/usr/bin/env bash
# tiny_gpt training throughput on the CPU: kiln-run against PyTorch (Debian's
# python3-torch, float32, eager, same model and batch size, same thread count),
# plus kilnc's compile time of models/gpt2.kiln. Run after tools/setup.sh.
#   tools/bench/tiny_gpt_cpu.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-100}
threads=$(nproc)
out=$(mktemp -d)
data=/usr/share/common-licenses/GPL-3
export KILN_CACHE_DIR=$out/cache

echo "== kilnc models/gpt2.kiln (5 runs, wall seconds) =="
for i in 1 2 3 4 5; do /usr/bin/time -f "%e s" build/bin/kilnc models/gpt2.kiln -o "$out/gpt2.kart"; done
build/bin/kilnc models/gpt2.kiln -o "$out/gpt2.kart" --mlir-timing 2>&1 | sed -n '/Wall Time/,$p'

echo "== kiln-run tiny_gpt, $steps steps (cold JIT, then warm) =="
build/bin/kilnc models/tiny_gpt.kiln -o "$out/tiny.kart"
build/bin/kiln-run "$out/tiny.kart" --data $data --steps 5 > "$out/cold.txt" 2>&1
head -1 "$out/cold.txt"
build/bin/kiln-run "$out/tiny.kart" --data $data --steps "$steps" --quiet

echo "== PyTorch tiny_gpt, $steps steps =="
/usr/bin/python3 tools/bench/torch_tiny_gpt.py $data "$steps" "$threads"
rm -rf "$out"
