#!/bin/bash
# Kills a process that saves checkpoints in a loop with SIGKILL at random
# moments, many times, and after each kill checks that every committed
# checkpoint (above all the newest) loads and holds exactly the values of its
# step, that no step-* directory lacks its marker, and that the newest step
# never goes backwards. Each round resumes from the newest checkpoint, as a
# restarted training job would.
#
# usage: checkpoint_kill_test.sh CHECKPOINT_STRESS WORK_DIR [ROUNDS]
set -u
driver=$1
work=$2
rounds=${3:-40}

rm -rf "$work"
mkdir -p "$work"
dir="$work/ckpt"
previous=0
mid_save=0

for round in $(seq 1 "$rounds"); do
  "$driver" save "$dir" > "$work/save.log" 2>&1 &
  pid=$!
  # 0-399 ms: covers start-up, resume and every phase of several saves.
  delay_ms=$((RANDOM % 400))
  sleep "$(printf '0.%03d' "$delay_ms")"
  kill -9 "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
  status=$?
  if [ "$status" -ne 137 ]; then
    echo "round $round: the saver exited by itself with status $status:"
    cat "$work/save.log"
    exit 1
  fi
  if ls -A "$dir" 2>/dev/null | grep -q '^\.tmp-'; then
    mid_save=$((mid_save + 1))
  fi

  if ! newest=$("$driver" verify "$dir" 2> "$work/verify.log"); then
    echo "round $round (killed after ${delay_ms} ms): verification failed:"
    cat "$work/verify.log"
    ls -la "$dir"
    exit 1
  fi
  if [ "$newest" = none ]; then
    newest=0
  fi
  if [ "$newest" -lt "$previous" ]; then
    echo "round $round: newest checkpoint went back from step $previous to $newest"
    exit 1
  fi
  echo "round $round: killed after ${delay_ms} ms, newest committed step $newest"
  previous=$newest
done

if [ "$previous" -eq 0 ]; then
  echo "no checkpoint was ever committed: the test proved nothing"
  exit 1
fi
echo "PASS: $rounds kills, $mid_save of them left a save in progress (.tmp-*), newest step $previous"
rm -rf "$work"
