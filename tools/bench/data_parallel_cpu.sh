#!/usr/bin/env bash
# Data parallelism on the CPU (issue 16): one process of batch B*N against
# `mpirun -np N` processes of batch B (the same global batch, the same
# windows), against the same N ranks started as torchrun starts them (over
# Gloo), with 1 MiB buckets overlapped with the backward or not, and
# against ZeRO-1, ZeRO-2 and ZeRO-3 under mpirun, on this machine's
# cores. Prints each artifact's per-rank memory plan (the gradients and
# optimizer state rows) and kiln-run's summaries: tokens/s of the global
# batch, and the bytes each rank hands to the collectives per step (for
# plain data parallelism the gradients and the loss; MPI's own traffic is
# about 2(N-1)/N of that per rank for a ring). Run after tools/setup.sh.
#   tools/bench/data_parallel_cpu.sh [STEPS] [RANKS] [MODEL] [BATCH] [SEQ] [-D ...]
# KILNC, KILN_RUN: the binaries (default build/bin/).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KILNC:=build/bin/kilnc}" "${KILN_RUN:=build/bin/kiln-run}"
steps=${1:-40}
ranks=${2:-2}
model=${3:-models/tiny_gpt.kiln}
batch=${4:-8}
seq=${5:-128}
shift $(( $# < 5 ? $# : 5 ))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
data=/usr/share/common-licenses/GPL-3
export KILN_CACHE_DIR=$out/cache
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cores=$(nproc)
# Each process gets its share of the cores, so both runs use the machine.
per_rank=$(( cores / ranks > 0 ? cores / ranks : 1 ))

echo "== $model, global batch $((batch * ranks)) x seq $seq, $steps steps, $cores cores =="
"$KILNC" "$model" -D batch=$((batch * ranks)) -D seq="$seq" "$@" -o "$out/one.kart" > "$out/one.txt"
head -2 "$out/one.txt"
"$KILNC" "$model" -D batch="$batch" -D seq="$seq" -D "mesh=[data = $ranks]" "$@" \
  -o "$out/dp.kart" > "$out/dp.txt"
grep -E "^(memory plan|  parameters|  gradients|  optimizer state|data parallel)" "$out/dp.txt"
echo "-- 1 process, batch $((batch * ranks)), OMP_NUM_THREADS=$cores"
OMP_NUM_THREADS=$cores "$KILN_RUN" "$out/one.kart" --data $data --steps 3 --quiet > /dev/null
OMP_NUM_THREADS=$cores "$KILN_RUN" "$out/one.kart" --data $data --steps "$steps" --quiet
echo "-- mpirun -np $ranks, batch $batch each, OMP_NUM_THREADS=$per_rank"
OMP_NUM_THREADS=$per_rank mpirun -np "$ranks" "$KILN_RUN" "$out/dp.kart" --data $data --steps 3 --quiet > /dev/null
OMP_NUM_THREADS=$per_rank mpirun -np "$ranks" "$KILN_RUN" "$out/dp.kart" --data $data --steps "$steps" --quiet
# The same ranks started as torchrun starts them (WORLD_SIZE, RANK,
# MASTER_ADDR, MASTER_PORT; test/e2e/Inputs/launch_ranks.sh), over Gloo.
echo "-- $ranks ranks as torchrun starts them (Gloo), batch $batch each, OMP_NUM_THREADS=$per_rank"
export OMP_NUM_THREADS=$per_rank
test/e2e/Inputs/launch_ranks.sh torchrun "$ranks" "$out/warm" "$KILN_RUN" "$out/dp.kart" --data $data \
  --steps 3 --quiet
test/e2e/Inputs/launch_ranks.sh torchrun "$ranks" "$out/gloo" "$KILN_RUN" "$out/dp.kart" --data $data \
  --steps "$steps" --quiet
cat "$out/gloo.0"
# Overlap: 1 MiB buckets, each all-reduced on the communication thread
# beside the rest of the backward, against the same buckets in place.
"$KILNC" "$model" -D batch="$batch" -D seq="$seq" -D "mesh=[data = $ranks]" --bucket-mib=1 "$@" \
  -o "$out/buckets.kart" > "$out/buckets.txt"
grep -E "^data parallel" "$out/buckets.txt"
for flag in "" --no-comm-overlap; do
  echo "-- mpirun -np $ranks, 1 MiB buckets${flag:+, $flag}, OMP_NUM_THREADS=$per_rank"
  # shellcheck disable=SC2086  # the flag, or nothing
  OMP_NUM_THREADS=$per_rank mpirun -np "$ranks" "$KILN_RUN" "$out/buckets.kart" --data $data --steps "$steps" --quiet $flag
done
# ZeRO-1 (optimizer state sharded), ZeRO-2 (gradients too) and ZeRO-3
# (parameters too), mpirun.
unset OMP_NUM_THREADS
for zero in 1 2 3; do
  "$KILNC" "$model" -D batch="$batch" -D seq="$seq" -D "mesh=[data = $ranks]" -D zero=$zero "$@" \
    -o "$out/z$zero.kart" > "$out/z$zero.txt"
  echo "-- ZeRO-$zero: mpirun -np $ranks, batch $batch each, OMP_NUM_THREADS=$per_rank"
  grep -E "^(memory plan|  parameters|  gradients|  optimizer state|data parallel)" "$out/z$zero.txt"
  OMP_NUM_THREADS=$per_rank mpirun -np "$ranks" "$KILN_RUN" "$out/z$zero.kart" --data $data --steps 3 --quiet > /dev/null
  OMP_NUM_THREADS=$per_rank mpirun -np "$ranks" "$KILN_RUN" "$out/z$zero.kart" --data $data --steps "$steps" --quiet
done
