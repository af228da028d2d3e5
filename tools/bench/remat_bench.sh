#!/usr/bin/env bash
# Step time under activation recompute (issue 15): models/llama3_1b.kiln bf16
# compiled once per CASE, each trained by kiln-run for WARMUP + STEPS steps on
# the same random tokens; prints kilnc's planned peak and remat plan (kept
# beside the artifact, the GPU machine has no kilnc), the median timed step,
# tokens/s, and the GPU memory nvidia-smi saw while it trained. Then
# PyTorch (tools/bench/torch_llama.py) at each of TORCH_BATCHES in each of
# TORCH_MODES: plain (no checkpointing) and checkpoint (every block
# recomputed, torch.utils.checkpoint), for torch's own overhead; TORCH_MODES
# empty: no PyTorch.
#
#   tools/bench/remat_bench.sh                   # GPU
#   ARTIFACTS=DIR COMPILE_ONLY=1 tools/bench/remat_bench.sh   # pack (bench_lib.sh)
#
# CASES: BATCH:REMAT pairs; REMAT is none, pointwise, selective or full (--remat) or a
# byte budget such as 78GiB (--memory-budget, remat auto).
# Default: [16, 2048] with none, pointwise, full and a 40 GiB budget; [64, 2048] with
# full and the 78 GiB budget that fits an 80 GB H100.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CASES:=16:none 16:pointwise 16:full 16:40GiB 64:78GiB 64:full}" "${SEQ:=2048}" "${STEPS:=3}"
: "${WARMUP:=1}" "${VOCAB:=131072}" "${LLAMA_DEFINES:=}" "${TORCH_BATCHES:=16}"
: "${TORCH_MODES=plain checkpoint}" "${TORCH_ARGS:=}" "${PYTHON:=python3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

max_batch=0
for c in $CASES; do b=${c%%:*}; [ "$b" -gt "$max_batch" ] && max_batch=$b; done
shard="$ARTIFACTS/random_tokens_llama3_$VOCAB.b$max_batch.bin"
random_token_shard "$shard" "$VOCAB" $(( (STEPS + WARMUP + 1) * max_batch * SEQ + 1 ))

for c in $CASES; do
  batch=${c%%:*} remat=${c#*:}
  case $remat in
    none|pointwise|selective|full) flag=--remat=$remat ;;
    *) flag=--memory-budget=$remat ;;
  esac
  name="llama3_1b-remat-b$batch-t$SEQ-$remat"
  # shellcheck disable=SC2086  # LLAMA_DEFINES is a list of flags
  art=$(kiln_artifact "$name" "$work/kilnc.log" models/llama3_1b.kiln --target=cuda \
    -D precision=bf16 -D batch="$batch" -D seq="$SEQ" $LLAMA_DEFINES "$flag") ||
    { cat "$work/kilnc.log" >&2; exit 1; }
  if [ -s "$work/kilnc.log" ]; then
    grep -m1 "^memory plan: peak" "$work/kilnc.log" > "$art.plan.txt"
    grep -m1 "^remat: " "$work/kilnc.log" >> "$art.plan.txt"
  fi
  : > "$work/kilnc.log"
  [ "$COMPILE_ONLY" = 1 ] && continue
  echo "== kiln: batch $batch x seq $SEQ, $flag =="
  cat "$art.plan.txt"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$work/mem.txt" &
  sampler=$!
  status=0
  started=$SECONDS
  "$KILN_RUN" "$art" --data "$shard" --steps $(( WARMUP + STEPS )) --quiet \
    --metrics "$work/kiln.jsonl" || status=$?
  echo "kiln-run took $(( SECONDS - started )) s in all (start-up, JIT, attention timing, steps)"
  kill $sampler 2> /dev/null || true; wait $sampler 2> /dev/null || true
  echo "GPU memory: $(head -1 "$work/mem.txt") MiB before, $(sort -n "$work/mem.txt" | tail -1) MiB at most while training"
  if [ $status -ne 0 ]; then echo "kiln-run failed (status $status)"; continue; fi
  median_step "$work/kiln.jsonl" "$WARMUP"
done
[ "$COMPILE_ONLY" = 1 ] && exit 0
for b in $TORCH_BATCHES; do
  for mode in $TORCH_MODES; do
    ckpt=""
    [ "$mode" = checkpoint ] && ckpt=--checkpoint
    echo "== PyTorch: torch_llama.py, batch $b x seq $SEQ, $mode =="
    # shellcheck disable=SC2086  # TORCH_ARGS is a list of flags
    "$PYTHON" tools/bench/torch_llama.py --batch "$b" --seq "$SEQ" --steps "$STEPS" \
      --warmup "$WARMUP" $ckpt $TORCH_ARGS || echo "torch_llama.py failed"
  done
done
