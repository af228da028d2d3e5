#!/bin/sh
# The CUDA path against the CPU backend, under the device simulator (test/sim).
#   parity.sh DIR MODEL.kiln "KILNC ARGS" "KILN-RUN ARGS" LOSS_RTOL GRAD_RTOL [graph-checks]
# Compiles MODEL for the CPU and for CUDA with the same -D arguments, trains
# each for the same steps, seed and data (kiln-run through %sim-run's
# environment for CUDA), and checks:
#  1. the initial parameters (--save-init, downloaded from the device on CUDA)
#     are the same bytes;
#  2. loss, grad_norm and val_loss agree within LOSS_RTOL / GRAD_RTOL / LOSS_RTOL;
#  3. with `graph-checks`: eager launches (KILN_CUDA_EAGER=1) and another
#     block order (KILN_SIM_SEED=7) give bit-identical metrics to the graph
#     run, so no kernel depends on the order its blocks run in.
# Environment: KILNC, KILN_RUN (the CPU run), SIM_RUN (the simulated run,
# "env KILN_CUDA_LIB_DIR=... kiln-run"), PYTHON, COMPARE (compare_metrics.py).
set -eu
dir=$1 model=$2 kilnc_args=$3 run_args=$4 loss_rtol=$5 grad_rtol=$6 graph=${7:-}
mkdir -p "$dir"
for target in cpu cuda; do
  $KILNC "$model" $kilnc_args --target=$target -o "$dir/$target.kart" > "$dir/$target.kilnc.log"
done
$KILN_RUN "$dir/cpu.kart" $run_args --save-init "$dir/cpu.init.safetensors" \
  --metrics "$dir/cpu.jsonl" --quiet
$SIM_RUN "$dir/cuda.kart" $run_args --save-init "$dir/cuda.init.safetensors" \
  --metrics "$dir/cuda.jsonl" --quiet
cmp "$dir/cpu.init.safetensors" "$dir/cuda.init.safetensors"
echo "init: same bytes"
$PYTHON "$COMPARE" "$dir/cpu.jsonl" "$dir/cuda.jsonl" loss=$loss_rtol grad_norm=$grad_rtol \
  $(grep -q val_loss "$dir/cpu.jsonl" && echo val_loss=$loss_rtol)
if [ "$graph" = graph-checks ]; then
  KILN_CUDA_EAGER=1 $SIM_RUN "$dir/cuda.kart" $run_args --metrics "$dir/eager.jsonl" --quiet
  $PYTHON "$COMPARE" "$dir/cuda.jsonl" "$dir/eager.jsonl" loss=0 grad_norm=0 update_norm=0
  echo "eager: identical to the graph"
  KILN_SIM_SEED=7 $SIM_RUN "$dir/cuda.kart" $run_args --metrics "$dir/order.jsonl" --quiet
  $PYTHON "$COMPARE" "$dir/cuda.jsonl" "$dir/order.jsonl" loss=0 grad_norm=0 update_norm=0
  echo "block order: identical"
fi
