#!/usr/bin/env bash
# A sweep: 3 learning rates x 2 optimizers on models/tiny_gpt.kiln, then the final
# losses read back from each run's JSONL.
#   tools/sweep.sh [STEPS] [OUT_DIR]        (defaults: 200 steps, out/sweep in the current directory)
# The optimizer is compiled into the artifact (-D optimizer=...), the learning rate
# and its schedule are kiln-run flags, so the sweep compiles 2 artifacts and runs 6.
set -euo pipefail
steps=${1:-200}
out=${2:-out/sweep}
case $steps in
  ''|*[!0-9]*|0) echo "sweep.sh: STEPS must be a positive whole number, got '$steps'" >&2; exit 2 ;;
esac
# OUT_DIR is the caller's (relative to where sweep.sh was started), made absolute
# before moving to the repository root.
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
bin=${KILN_BIN:-build/bin}
data=/usr/share/common-licenses/GPL-3

declare -A optimizers=(
  [adamw]="adamw(beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1)"
  [sgd]="sgd(momentum = 0.9, nesterov = true)"
)
declare -A rates=([adamw]="3e-4 1e-3 3e-3" [sgd]="0.03 0.1 0.3")
for opt in adamw sgd; do
  "$bin/kilnc" models/tiny_gpt.kiln -D "optimizer=${optimizers[$opt]}" -D clip=1.0 \
    -o "$out/tiny_gpt_$opt.kart"
  for lr in ${rates[$opt]}; do
    "$bin/kiln-run" "$out/tiny_gpt_$opt.kart" --data "$data" --steps "$steps" --seed 1 \
      --lr "$lr" --schedule cosine --warmup $((steps / 10)) --min-lr-ratio 0.1 \
      --metrics "$out/$opt-lr$lr.jsonl" --quiet > /dev/null
  done
done

# Final loss of each run: the mean over its last 10 steps (one batch is noisy).
# The runs are named here (a glob would take any other *.jsonl in OUT_DIR, and
# treat a '[' in its path as a pattern).
runs=()
for opt in adamw sgd; do
  for lr in ${rates[$opt]}; do runs+=("$out/$opt-lr$lr.jsonl"); done
done
python3 - "${runs[@]}" <<'PY'
import json, os, sys
print(f"{'run':<18} {'final loss':>10}")
for path in sorted(sys.argv[1:], key=os.path.basename):
    losses = [json.loads(line)["loss"] for line in open(path)]
    tail = [x for x in losses[-10:] if x is not None]
    final = sum(tail) / len(tail) if tail else float("nan")
    print(f"{os.path.basename(path)[:-6]:<18} {final:>10.4f}")
PY
