#!/usr/bin/env bash
# Kiln side of the attention benchmark of issue 5, at the shapes of
# tools/bench/torch_attention.py (heads = MODEL_DIM / head dim, batch = TOKENS /
# seq): for each kind (causal, alibi, tsp), seq and head dim it writes a model
# whose loss is sum(attention(q, k, v, ...) * w) with q, k, v parameters,
# compiles it (kilnc --target=$TARGET, -D precision=$PRECISION), runs
# `kiln-run --steps WARMUP+STEPS --lr 0`, and prints one JSON line per point in
# torch_attention.py's schema with backend "kiln":
#   step_ms          median wall time of a step after WARMUP steps (kiln-run's
#                    JSONL step_ms): attention forward + backward, plus the
#                    loss and the SGD update of q, k, v (memory-bound,
#                    O(B H T D), small next to attention's O(B H T^2 D) at
#                    seq >= 512);
#   fwd_bwd_tflops   unmasked FLOPs of forward + backward (the same count as
#                    torch_attention.py: 4 D per kept pair forward, 2.5x that
#                    backward) / step_ms: a lower bound on the attention's
#                    rate. kiln-run times whole steps only (--profile times
#                    kernels on the CPU backend only), so forward and backward
#                    are not separated here; run under nsys for that.
# The tsp kind learns its slope AND the city coordinates (both are
# parameters here: kiln-run has no data source for 16k-city instances), so
# kiln also computes the coordinates' gradient, which the torch side does not;
# its lengths follow torch_attention.py's tsp_length rule.
#
#   tools/bench/attention_bench.sh                          # the GPU grid
#   TARGET=cpu PRECISION=fp32 SEQS=64 HEAD_DIMS=16 MODEL_DIM=64 TOKENS=256 \
#     STEPS=2 WARMUP=1 tools/bench/attention_bench.sh       # CPU smoke
# ARTIFACTS / COMPILE_ONLY: see bench_lib.sh (compile here, run on a GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TARGET:=cuda}" "${PRECISION:=bf16}" "${KINDS:=causal alibi tsp}"
: "${SEQS:=512 1024 2048 4096 8192 16384}" "${HEAD_DIMS:=64 128}"
: "${MODEL_DIM:=2048}" "${TOKENS:=32768}" "${STEPS:=10}" "${WARMUP:=3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source tools/bench/bench_lib.sh

# model KIND: the .kiln text of one benchmark point (shapes come from -D).
model() {
  local score mask extra=""
  case $1 in
    causal) score="s"; mask="j <= i" ;;
    alibi)  # slope 2^(-8 (h + 1) / H), as torch_attention.py's alibi
            score="s - exp(-0.6931471805599453 * 8 * (h + 1) / heads) * (i - j)"; mask="j <= i" ;;
    tsp)    extra=$'param slope [heads] = ones\nparam xy [batch, t, 2] = normal(0.3)'
            score="s - slope[h] * sqrt((xy[b, i, 0] - xy[b, j, 0]) ** 2 + (xy[b, i, 1] - xy[b, j, 1]) ** 2 + 0.000001)"
            mask="j < t - b * len_step" ;;
    *) echo "unknown kind $1" >&2; exit 2 ;;
  esac
  cat <<EOF
model attention_bench_$1
config t = 512
config d = 64
config heads = 32
config len_step = 0     # tsp: sample b keeps j < t - b * len_step
param q [batch, heads, t, d] = normal(1.0)
param k [batch, heads, t, d] = normal(1.0)
param v [batch, heads, t, d] = normal(1.0)
param w [batch, heads, t, d] = normal(1.0)
$extra
a = attention(q, k, v, score = $score, mask = $mask)
loss = sum(a * w)
train {
  batch = 1
  seq = 1
  optimizer = sgd
}
EOF
}

for kind in $KINDS; do
  model "$kind" > "$work/$kind.kiln"
  for d in $HEAD_DIMS; do
    for t in $SEQS; do
      attention_shape "$d" "$t"
      step=$(( t / (2 * batch) ))
      # Kept (b, h, i, j) pairs: causal T (T + 1) / 2, tsp T * lengths[b].
      if [ "$kind" = tsp ]; then
        pairs=0
        for ((b = 0; b < batch; ++b)); do pairs=$(( pairs + t * (t - b * step) )); done
        pairs=$(( pairs * heads ))
      else
        pairs=$(( batch * heads * t * (t + 1) / 2 ))
      fi
      point="\"kind\": \"$kind\", \"seq\": $t, \"head_dim\": $d, \"batch\": $batch, \"heads\": $heads, \"backend\": \"kiln\""
      if ! art=$(kiln_artifact "attention-$TARGET-$PRECISION-$kind-$t-$d" "$work/kilnc.log" \
           "$work/$kind.kiln" --target="$TARGET" -D precision="$PRECISION" \
           -D t="$t" -D d="$d" -D heads="$heads" -D batch="$batch" -D len_step="$step"); then
        echo "{$point, \"skipped\": \"kilnc failed: $(grep -m1 error "$work/kilnc.log" | tr -d '"\\')\"}"
        continue
      fi
      [ "$COMPILE_ONLY" = 1 ] && continue
      if ! "$KILN_RUN" "$art" --steps $(( WARMUP + STEPS )) --lr 0 --quiet \
           --metrics "$work/m.jsonl" > "$work/run.log" 2>&1; then
        echo "{$point, \"skipped\": \"kiln-run failed: $(grep -m1 error "$work/run.log" | tr -d '"\\')\"}"
        continue
      fi
      python3 - "$work/m.jsonl" "$WARMUP" "$pairs" "$d" "$point" <<'EOF'
import json, statistics, sys
path, warmup, pairs, d, point = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = [json.loads(l) for l in open(path) if l.strip()]
ms = statistics.median(r["step_ms"] for r in rows[warmup:])
flops = 4 * d * pairs * 3.5   # forward 4 D per kept pair, backward 2.5x
print("{" + point + f', "step_ms": {ms:.4f}, "fwd_bwd_tflops": {flops / (ms * 1e-3) / 1e12:.4f}' + "}")
EOF
    done
  done
done
