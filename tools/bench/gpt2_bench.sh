#!/usr/bin/env bash
# GPT-2 124M training throughput of issues 3 and 5: models/gpt2.kiln in
# kiln-run against the same model in PyTorch (tools/bench/torch_gpt2.py: SDPA,
# torch.compile, bf16 autocast, fused AdamW), same batch and sequence, both
# on random tokens (an llm.c shard written here: 256 int32 of header, magic
# 20240520, version 1, token count; then uint16 tokens below VOCAB). Prints
# kiln-run's final line (tokens/s over all its steps, the first steps'
# kernel loading and cuDNN planning included), the median step of the timed steps (kiln_against_torch, bench_lib.sh),
# then torch_gpt2.py's JSON line.
#
#   tools/bench/gpt2_bench.sh                                  # GPU, GPT-2 124M
#   TARGET=cpu PRECISION=fp32 BATCH=2 SEQ=32 STEPS=3 \
#     GPT2_DEFINES="-D vocab=300 -D dim=64 -D n_layer=2 -D n_head=2" \
#     TORCH_ARGS="--device cpu --precision fp32 --no-compile --vocab 300 --dim 64 --layers 2 --heads 2" \
#     tools/bench/gpt2_bench.sh                                # CPU smoke
# ARTIFACTS / COMPILE_ONLY: see bench_lib.sh (compile here, run on a GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TARGET:=cuda}" "${PRECISION:=bf16}" "${BATCH:=16}" "${SEQ:=1024}" "${STEPS:=30}"
: "${WARMUP:=5}" "${VOCAB:=50257}" "${GPT2_DEFINES:=}" "${TORCH_ARGS:=}" "${PYTHON:=python3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

# shellcheck disable=SC2086  # GPT2_DEFINES is a list of flags
art=$(kiln_artifact "gpt2-$TARGET-$PRECISION-b$BATCH-t$SEQ" "$work/kilnc.log" models/gpt2.kiln \
  --target="$TARGET" -D precision="$PRECISION" -D batch="$BATCH" -D seq="$SEQ" $GPT2_DEFINES) ||
  { cat "$work/kilnc.log" >&2; exit 1; }
shard="$ARTIFACTS/random_tokens_$VOCAB.bin"
# Enough tokens for every step's batch, so no step rereads data.
random_token_shard "$shard" "$VOCAB" $(( (STEPS + WARMUP + 1) * BATCH * SEQ + 1 ))
[ "$COMPILE_ONLY" = 1 ] && exit 0
kiln_against_torch models/gpt2.kiln "$art" "$shard" tools/bench/torch_gpt2.py
