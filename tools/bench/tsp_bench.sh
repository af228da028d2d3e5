#!/usr/bin/env bash
# End-to-end TSP training throughput of issue 5: models/tsp.kiln in kiln-run
# against the same model in PyTorch (tools/bench/torch_tsp.py: FlexAttention,
# torch.compile, bf16 autocast, fused AdamW), same batch, cities and sizes.
# Prints kiln-run's final line (samples/s over the timed steps, kernel
# compilation excluded) and torch_tsp.py's JSON line.
#
#   tools/bench/tsp_bench.sh                                  # GPU, defaults below
#   TARGET=cpu PRECISION=fp32 STEPS=5 TORCH_ARGS="--device cpu --precision fp32 --no-compile" \
#     tools/bench/tsp_bench.sh                                # CPU smoke
# ARTIFACTS / COMPILE_ONLY: see bench_lib.sh (compile here, run on a GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TARGET:=cuda}" "${PRECISION:=bf16}" "${CITIES:=10-20}" "${N_MAX:=20}"
: "${BATCH:=256}" "${DIM:=64}" "${LAYERS:=2}" "${HEADS:=4}" "${STEPS:=50}"
: "${TORCH_ARGS:=}" "${PYTHON:=python3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

art=$(kiln_artifact "tsp-$TARGET-$PRECISION-b$BATCH-n$N_MAX" "$work/kilnc.log" models/tsp.kiln \
  --target="$TARGET" -D precision="$PRECISION" -D batch="$BATCH" -D n_max="$N_MAX" \
  -D dim="$DIM" -D n_layer="$LAYERS" -D n_head="$HEADS" -D seq="$N_MAX") ||
  { cat "$work/kilnc.log" >&2; exit 1; }
[ "$COMPILE_ONLY" = 1 ] && exit 0
echo "== kiln: models/tsp.kiln, batch $BATCH, $CITIES cities, $STEPS steps =="
"$KILN_RUN" "$art" --data "tsp:$CITIES" --steps "$STEPS" --quiet

echo "== PyTorch: tools/bench/torch_tsp.py, same model and batch =="
# shellcheck disable=SC2086  # TORCH_ARGS is a list of flags
"$PYTHON" tools/bench/torch_tsp.py --n-min "${CITIES%-*}" --n-max "${CITIES#*-}" --batch "$BATCH" \
  --dim "$DIM" --layers "$LAYERS" --heads "$HEADS" --steps "$STEPS" $TORCH_ARGS
