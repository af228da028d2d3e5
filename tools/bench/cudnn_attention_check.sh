#!/usr/bin/env bash
# GPU check of cuDNN's fused attention against Kiln's generated kernels
# (kiln-run --attention, runtime/cuda/Cudnn.h). Needs an NVIDIA GPU, libcuda
# and libcudnn.so.9; prints figures, claims none. For each mask kind
#   causal   mask = j <= i                (q, k, v parameters)
#   padding  mask = j < lengths[b]        (lengths from --data tsp:N/2-N, so
#                                          every sample keeps >= N/2 keys)
# each head dim and each sequence length it compiles one bf16 model whose
# loss is sum(attention(q, k, v) * w), then runs it three times with the
# same seed and data, --lr 0 (the parameters never change):
#   --attention=kiln    the generated kernels only;
#   --attention=cudnn   cuDNN's forward and backward (and the empty-key
#                       fix-up after each, for padding);
#   --attention=auto    kiln-run's own first-step timing and choice (its
#                       "kiln-run: attention:" lines are printed as they are).
# Printed per point: the first step's loss under kiln and cudnn and their
# difference against the tolerance 2^-7 * sqrt(B*H*T*D): each of the
# B*H*T*D output elements is rounded to bf16 (relative 2^-8) on both paths,
# w ~ N(0, 1), so the sum's rounding error grows like 2^-8 * sqrt(count);
# 2x margin. A wrong mask, scale or softmax moves the loss by far more.
# Backward parity: the first step's grad_norm (over dq, dk, dv and w's
# gradient) under kiln and cudnn, relative tolerance 2^-6: each gradient
# element is rounded to bf16 (relative 2^-8) and accumulated in f32 on both
# paths, so the norm moves by at most about 2^-8 relative; 4x margin. A
# missing scale or a wrong dS moves it by far more. Then the median step_ms
# (after WARMUP steps) of each run.
#
#   tools/bench/cudnn_attention_check.sh
#   KINDS=causal SEQS="512 1024" HEAD_DIMS=64 tools/bench/cudnn_attention_check.sh
# ARTIFACTS / COMPILE_ONLY: see bench_lib.sh (compile here, run on a GPU; the
# kernel dumps' cuDNN verdicts travel next to the artifacts).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KINDS:=causal padding}" "${SEQS:=512 1024 2048 4096 8192 16384}" "${HEAD_DIMS:=64 128}"
: "${MODEL_DIM:=2048}" "${TOKENS:=32768}" "${STEPS:=10}" "${WARMUP:=3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

# model KIND: the .kiln text (shapes from -D t, d, heads, batch).
model() {
  local head="" mask="j <= i" extra=""
  if [ "$1" = padding ]; then
    # The TSP loader fills lengths; coords and targets only have to exist.
    head=$'input coords [batch, t, 2] : f32\ninput lengths [batch] : i32\ninput targets [batch, t] : i32\nparam wc [2, 1] = normal(0.5)'
    mask="j < lengths[b]"
    extra=" + 0.0 * sum(coords @ wc)"
  fi
  cat <<EOF
model cudnn_check_$1
config t = 512
config d = 64
config heads = 32
$head
param q [batch, heads, t, d] = normal(1.0)
param k [batch, heads, t, d] = normal(1.0)
param v [batch, heads, t, d] = normal(1.0)
param w [batch, heads, t, d] = normal(1.0)
a = attention(q, k, v, mask = $mask)
loss = sum(a * w)$extra
train {
  batch = 1
  seq = t
  optimizer = sgd
  precision = bf16
}
EOF
}

for kind in $KINDS; do
  model "$kind" > "$work/$kind.kiln"
  for d in $HEAD_DIMS; do
    for t in $SEQS; do
      attention_shape "$d" "$t"
      name="cudnn-check-$kind-$t-$d"
      echo "== $kind seq $t head_dim $d (batch $batch, heads $heads)"
      art=$(kiln_artifact "$name" "$work/kilnc.log" "$work/$kind.kiln" --target=cuda \
        -D t="$t" -D d="$d" -D heads="$heads" -D batch="$batch" \
        --dump-phases-to="$ARTIFACTS/$name.dump") ||
        { echo "   kilnc failed:"; grep -m3 error "$work/kilnc.log"; continue; }
      # Only the verdicts are kept next to the artifact (a bundle stays small).
      if [ -d "$ARTIFACTS/$name.dump" ]; then
        grep -h "^// cudnn:" "$ARTIFACTS/$name.dump"/kernels/k_attention_*.cu | sort -u \
          > "$ARTIFACTS/$name.cudnn.txt"
        rm -rf "$ARTIFACTS/$name.dump"
      fi
      sed 's/^/   codegen /' "$ARTIFACTS/$name.cudnn.txt" 2> /dev/null || true
      [ "$COMPILE_ONLY" = 1 ] && continue
      data=()
      if [ "$kind" = padding ]; then data=(--data "tsp:$(( t / 2 ))-$t"); fi
      for mode in kiln cudnn auto; do
        if ! "$KILN_RUN" "$art" "${data[@]}" --steps $(( WARMUP + STEPS )) --lr 0 --seed 1 \
             --quiet --attention=$mode --metrics "$work/$mode.jsonl" > "$work/$mode.log" 2>&1; then
          echo "   --attention=$mode failed:"; grep -m3 error "$work/$mode.log" || true
          rm -f "$work/$mode.jsonl"
        fi
        if [ "$mode" = auto ]; then grep "kiln-run: attention:" "$work/auto.log" | sed 's/^/   /' || true; fi
      done
      python3 - "$work" "$WARMUP" "$(( batch * heads * t * d ))" <<'PY'
import json, math, os, statistics, sys
work, warmup, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for mode in ("kiln", "cudnn", "auto"):
    path = os.path.join(work, mode + ".jsonl")
    if os.path.exists(path):
        runs[mode] = [json.loads(l) for l in open(path) if l.strip()]
if "kiln" in runs and "cudnn" in runs:
    a, b = runs["kiln"][0]["loss"], runs["cudnn"][0]["loss"]
    tol = 2 ** -7 * math.sqrt(count)
    verdict = "ok" if abs(a - b) <= tol else "MISMATCH"
    print(f"   parity: loss kiln {a:.6g} cudnn {b:.6g} |diff| {abs(a - b):.3g} tol {tol:.3g} {verdict}")
    ga, gb = runs["kiln"][0].get("grad_norm"), runs["cudnn"][0].get("grad_norm")
    if ga is not None and gb is not None:
        rel = abs(ga - gb) / max(abs(ga), 1e-30)
        verdict = "ok" if rel <= 2 ** -6 else "MISMATCH"
        print(f"   backward parity: grad_norm kiln {ga:.6g} cudnn {gb:.6g} rel {rel:.3g} tol {2 ** -6:.3g} {verdict}")
for mode, rows in runs.items():
    ms = statistics.median(r["step_ms"] for r in rows[warmup:]) if len(rows) > warmup else float("nan")
    print(f"   step_ms --attention={mode}: {ms:.3f}")
PY
      rm -f "$work"/*.jsonl
    done
  done
done
