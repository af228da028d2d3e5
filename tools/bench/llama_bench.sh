#!/usr/bin/env bash
# Llama-3 1.2B training throughput of issue 14: models/llama3_1b.kiln in
# kiln-run against the same model in PyTorch (tools/bench/torch_llama.py:
# SDPA with GQA, torch.compile, bf16 autocast, fused AdamW), same batch and
# sequence, both on random tokens (an llm.c Llama-3 shard written here: 256
# int32 of header, magic 20240801, version 7, token count; then uint32 tokens
# below VOCAB). Prints kilnc's planned peak, kiln-run's final line (tokens/s
# over all its steps, the first steps' kernel loading and cuDNN planning
# included), the median step of the timed steps (kiln_against_torch, bench_lib.sh),
# then torch_llama.py's JSON line.
#
#   tools/bench/llama_bench.sh                                 # GPU, [16, 2048] bf16
#   TARGET=cpu PRECISION=fp32 BATCH=2 SEQ=32 STEPS=2 WARMUP=1 \
#     LLAMA_DEFINES="-D vocab=300 -D dim=64 -D n_layer=2 -D n_head=4 -D n_kv_head=2" \
#     TORCH_ARGS="--device cpu --precision fp32 --no-compile --vocab 300 --dim 64 --layers 2 --heads 4 --kv-heads 2" \
#     tools/bench/llama_bench.sh                               # CPU smoke
# ARTIFACTS / COMPILE_ONLY: see bench_lib.sh (compile here, run on a GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TARGET:=cuda}" "${PRECISION:=bf16}" "${BATCH:=16}" "${SEQ:=2048}" "${STEPS:=6}"
: "${WARMUP:=2}" "${VOCAB:=131072}" "${LLAMA_DEFINES:=}" "${TORCH_ARGS:=}" "${PYTHON:=python3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

name="llama3_1b-$TARGET-$PRECISION-b$BATCH-t$SEQ"
# shellcheck disable=SC2086  # LLAMA_DEFINES is a list of flags
art=$(kiln_artifact "$name" "$work/kilnc.log" models/llama3_1b.kiln \
  --target="$TARGET" -D precision="$PRECISION" -D batch="$BATCH" -D seq="$SEQ" $LLAMA_DEFINES) ||
  { cat "$work/kilnc.log" >&2; exit 1; }
# kilnc's report travels with the artifact (the GPU machine has no kilnc).
if [ -s "$work/kilnc.log" ]; then grep -i -m1 "peak" "$work/kilnc.log" > "$art.plan.txt" || true; fi
shard="$ARTIFACTS/random_tokens_llama3_$VOCAB.bin"
# Enough tokens for every step's batch, so no step rereads data.
random_token_shard "$shard" "$VOCAB" $(( (STEPS + WARMUP + 1) * BATCH * SEQ + 1 ))
[ "$COMPILE_ONLY" = 1 ] && exit 0
kiln_against_torch models/llama3_1b.kiln "$art" "$shard" tools/bench/torch_llama.py
