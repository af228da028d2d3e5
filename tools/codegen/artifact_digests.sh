#!/usr/bin/env bash
# Compiles a fixed matrix of models and options with kilnc and prints one
# line per artifact: "<sha256>  <configuration>". A change to the compiler
# that should not change what it emits (a refactoring) must leave every line
# as it was: test/e2e/artifact_digests.test compares them with
# test/e2e/Inputs/artifact-digests.txt. A deliberate change to the emitted
# artifacts updates that file in the same commit:
#   tools/codegen/artifact_digests.sh > test/e2e/Inputs/artifact-digests.txt
# Run from the repository root (model paths are part of kernel names).
# KILNC: the compiler (default build/bin/kilnc).
set -euo pipefail
KILNC=${KILNC:-build/bin/kilnc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# configuration name, then kilnc's arguments
configs=(
  "tiny_gpt-cpu|models/tiny_gpt.kiln"
  "tiny_gpt-cuda|models/tiny_gpt.kiln --target=cuda"
  "tiny_gpt-bf16-cuda|models/tiny_gpt.kiln --target=cuda -D precision=bf16"
  "tiny_gpt-accum-clip|models/tiny_gpt.kiln -D grad_accum=2 -D clip=1.0"
  "tiny_gpt-nofusion|models/tiny_gpt.kiln --no-fusion"
  "tiny_gpt-remat-full|models/tiny_gpt.kiln --remat=full"
  "tiny_gpt-budget|models/tiny_gpt.kiln --memory-budget=38MiB"
  "tiny_gpt-data2-zero3|models/tiny_gpt.kiln -D mesh=[data=2] -D zero=3"
  "tiny_gpt-data2-cuda|models/tiny_gpt.kiln --target=cuda -D mesh=[data=2]"
  "tiny_gpt-model2|models/tiny_gpt.kiln -D mesh=[data=2,model=2]"
  "gpt2-cpu|models/gpt2.kiln"
  "gpt2-cuda|models/gpt2.kiln --target=cuda"
  "llama3_1b-cuda|models/llama3_1b.kiln --target=cuda"
  "llama3_1b-cpu-small|models/llama3_1b.kiln -D batch=2 -D seq=64 -D n_layer=2"
  "post_ln-cpu|models/post_ln.kiln"
  "tsp-cpu|models/tsp.kiln"
  "tsp-cuda|models/tsp.kiln --target=cuda"
)
for entry in "${configs[@]}"; do
  name=${entry%%|*}
  read -r -a args <<< "${entry#*|}"
  if ! "$KILNC" "${args[@]}" -o "$work/$name.kart" > "$work/$name.log" 2>&1; then
    echo "error: kilnc ${args[*]} failed:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  echo "$(sha256sum < "$work/$name.kart" | cut -d' ' -f1)  $name"
done
