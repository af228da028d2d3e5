#!/usr/bin/env bash
# tiny_gpt training throughput on the CPU: kiln-run against PyTorch (Debian's
# python3-torch, float32, eager; tools/bench/torch_tiny_gpt.py, the same model
# written with nn.Linear / F.layer_norm / AdamW, same batch and thread count),
# plus kilnc's compile time of models/gpt2.kiln. Run after tools/setup.sh.
#   tools/bench/tiny_gpt_cpu.sh [STEPS]
# Smoke mode (CI, test/e2e/bench_smoke.test): COMPILE_RUNS=0 skips the GPT-2
# compile timings; DEFINES (-D flags for tiny_gpt.kiln) and TORCH_ARGS
# (torch_tiny_gpt.py's --layers/--dim/--heads/--batch/--seq) shrink the model
# on both sides. KILNC, KILN_RUN, PYTHON: the binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-100}
: "${KILNC:=build/bin/kilnc}" "${KILN_RUN:=build/bin/kiln-run}" "${PYTHON:=/usr/bin/python3}"
: "${COMPILE_RUNS:=5}" "${DEFINES:=}" "${TORCH_ARGS:=}"
threads=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
data=/usr/share/common-licenses/GPL-3
export KILN_CACHE_DIR=$out/cache

if [ "$COMPILE_RUNS" -gt 0 ]; then
  echo "== kilnc models/gpt2.kiln ($COMPILE_RUNS runs, wall seconds) =="
  for _ in $(seq "$COMPILE_RUNS"); do
    /usr/bin/time -f "%e s" "$KILNC" models/gpt2.kiln -o "$out/gpt2.kart" > /dev/null
  done
  "$KILNC" models/gpt2.kiln -o "$out/gpt2.kart" --mlir-timing 2>&1 | sed -n '/Wall Time/,$p'
fi

echo "== kiln-run tiny_gpt, $steps steps (cold JIT, then warm) =="
# shellcheck disable=SC2086  # DEFINES is a list of flags
"$KILNC" models/tiny_gpt.kiln $DEFINES -o "$out/tiny.kart" > /dev/null
"$KILN_RUN" "$out/tiny.kart" --data $data --steps 5 > "$out/cold.txt" 2>&1
head -1 "$out/cold.txt"
"$KILN_RUN" "$out/tiny.kart" --data $data --steps "$steps" --quiet

echo "== PyTorch tiny_gpt, $steps steps =="
# shellcheck disable=SC2086  # TORCH_ARGS is a list of flags
"$PYTHON" tools/bench/torch_tiny_gpt.py $data "$steps" "$threads" $TORCH_ARGS
