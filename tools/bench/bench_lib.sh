# Sourced by the bench scripts (tools/bench/*.sh): where their artifacts live,
# so that a bundle compiled on a machine with kilnc (tools/bench/gpu_bundle.sh
# pack) runs on a GPU machine without it (gpu_bundle.sh run).
#   ARTIFACTS     directory of the compiled artifacts; default: the script's
#                 own temporary directory. An artifact already there is used
#                 as it is (kilnc is not run).
#   COMPILE_ONLY  1: compile every artifact into ARTIFACTS and run nothing.
#   KILNC, KILN_RUN   the binaries (default build/bin/kilnc, build/bin/kiln-run).
# Needs $work (the caller's temporary directory) set before it is sourced.
: "${KILNC:=build/bin/kilnc}" "${KILN_RUN:=build/bin/kiln-run}" "${COMPILE_ONLY:=0}"
: "${ARTIFACTS:=$work}"
mkdir -p "$ARTIFACTS"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$work/cache}

# kiln_artifact NAME LOG KILNC-ARGS...: the path of $ARTIFACTS/NAME.kart,
# compiled by `kilnc KILNC-ARGS... -o it` (output in LOG) unless it is
# already there. Fails (status 1, LOG says why) when kilnc fails, and when the
# artifact is missing on a machine without kilnc.
kiln_artifact() {
  local name=$1 log=$2 art="$ARTIFACTS/$1.kart"
  shift 2
  if [ ! -s "$art" ]; then
    if ! command -v "$KILNC" > /dev/null; then
      echo "error: $art is not in the bundle and there is no kilnc ($KILNC)" > "$log"
      return 1
    fi
    "$KILNC" "$@" -o "$art" > "$log" 2>&1 || return 1
  fi
  echo "$art"
}

# attention_shape D T: sets `heads` and `batch` of an attention benchmark point
# so that batch x heads fills the GPU at every length, the rule
# torch_attention.py also uses (heads = MODEL_DIM / D, batch = TOKENS / T,
# each at least 1).
attention_shape() {
  heads=$(( MODEL_DIM / $1 > 0 ? MODEL_DIM / $1 : 1 ))
  batch=$(( TOKENS / $2 > 0 ? TOKENS / $2 : 1 ))
}

# median_step METRICS.jsonl WARMUP: kiln-run's median step_ms over the steps
# after the first WARMUP, the tokens/s it gives and the last step's loss; on
# a GPU also the median device_ms (the step's CUDA graph from its first
# node to its last, by event record nodes) and what the host adds to it.
median_step() {
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
timed = [r for r in rows if "step_ms" in r][int(sys.argv[2]):]
ms = statistics.median(r["step_ms"] for r in timed)
print(f"timed: median step {ms:.2f} ms over {len(timed)} steps after {sys.argv[2]} warm-up steps, "
      f"{timed[-1]['tokens'] / (ms * 1e-3):.0f} tokens/s, loss {timed[-1]['loss']:.4f}")
device = [r["device_ms"] for r in timed if "device_ms" in r]
if device:
    dms = statistics.median(device)
    host = statistics.median(r["step_ms"] - r["device_ms"] for r in timed if "device_ms" in r)
    print(f"device: median {dms:.2f} ms of the step on the GPU over {len(device)} steps, "
          f"the host's median share {host:.2f} ms (batch, staging, launch, synchronization, scalars)")
PY
}

# kiln_against_torch MODEL ART SHARD TORCH_SCRIPT: the training benchmarks'
# two sides on the same batch: kiln-run trains ART on SHARD for WARMUP +
# STEPS steps, its final line (all steps) followed by the median step_ms of
# the steps after WARMUP (kernel loading and the first steps' cuDNN planning
# excluded, as the PyTorch baselines exclude torch.compile's warm-up) and
# the tokens/s it gives; then TORCH_SCRIPT (tools/bench/torch_*.py) trains
# the same model with BATCH, SEQ, STEPS, WARMUP and TORCH_ARGS and prints
# its JSON line.
kiln_against_torch() {
  local model=$1 art=$2 shard=$3 script=$4
  echo "== kiln: $model, $PRECISION, batch $BATCH x seq $SEQ, $STEPS steps =="
  [ -s "$art.plan.txt" ] && cat "$art.plan.txt"
  "$KILN_RUN" "$art" --data "$shard" --steps $(( WARMUP + STEPS )) --quiet \
    --metrics "$work/kiln.jsonl"
  median_step "$work/kiln.jsonl" "$WARMUP"
  echo "== PyTorch: $script, same model and batch =="
  # shellcheck disable=SC2086  # TORCH_ARGS is a list of flags
  "$PYTHON" "$script" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup "$WARMUP" $TORCH_ARGS
}

# random_token_shard PATH VOCAB COUNT: writes (unless PATH exists) an llm.c
# token shard of COUNT random tokens below VOCAB (Python's random, seed 1):
# 256 int32 of header (magic, version, token count), then the tokens;
# GPT-2's format (20240520, version 1, uint16) when VOCAB fits 16 bits, else
# Llama-3's (20240801, version 7, uint32).
random_token_shard() {
  [ -s "$1" ] && return 0
  python3 - "$1" "$2" "$3" <<'PY'
import random, struct, sys
path, vocab, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1)
magic, version, fmt = (20240520, 1, "H") if vocab <= 65536 else (20240801, 7, "I")
with open(path, "wb") as f:
    f.write(struct.pack("<256i", magic, version, count, *[0] * 253))
    f.write(struct.pack(f"<{count}{fmt}", *(rng.randrange(vocab) for _ in range(count))))
PY
}
