#!/usr/bin/env bash
# kill9_resume.sh ROUNDS WORKDIR KILN_RUN ARTIFACT: ROUNDS times, starts a run that
# checkpoints every step into WORKDIR/ck (keeping 2), SIGKILLs it at a random moment
# (most of its time is spent writing checkpoints, so most kills land mid-write), then
# resumes from the newest complete checkpoint for one more step. Every resume must
# succeed and continue exactly after its checkpoint; prints one summary line.
set -u
rounds=$1 dir=$2 run=$3 artifact=$4
data=/usr/share/common-licenses/GPL-3
mkdir -p "$dir"
RANDOM=7
resumed=0
for round in $(seq "$rounds"); do
  "$run" "$artifact" --data "$data" --steps 100000 --checkpoint-dir "$dir/ck" \
    --checkpoint-every 1 --keep-checkpoints 2 --resume --quiet > /dev/null 2>&1 &
  pid=$!
  # The first round starts from nothing: wait (up to 2 min, on a loaded
  # machine the JIT alone takes seconds) for its first checkpoint, so the
  # random kill lands among checkpoint writes rather than before any.
  for _ in $(seq 1200); do
    ls "$dir/ck" 2> /dev/null | grep -q '^step-' && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  sleep "0.$(( 100 + RANDOM % 400 ))"
  kill -9 "$pid"
  wait "$pid" 2> /dev/null
  latest=$(ls "$dir/ck" | grep '^step-' | sort | tail -1)
  [ -n "$latest" ] || continue
  step=$((10#${latest#step-}))
  if ! "$run" "$artifact" --data "$data" --steps $((step + 1)) --checkpoint-dir "$dir/ck" \
      --keep-checkpoints 2 --resume > "$dir/resume.log" 2>&1; then
    echo "round $round: resume after kill -9 at checkpoint $latest failed:"
    cat "$dir/resume.log"
    exit 1
  fi
  grep -q "resumed from .*$latest (step $step" "$dir/resume.log" || {
    echo "round $round: did not resume from $latest"; cat "$dir/resume.log"; exit 1; }
  resumed=$((resumed + 1))
done
echo "kill -9: $resumed of $rounds rounds resumed from the newest complete checkpoint"
