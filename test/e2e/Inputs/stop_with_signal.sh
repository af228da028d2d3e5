#!/usr/bin/env bash
# stop_with_signal.sh SIGNAL WORKDIR COMMAND...: starts COMMAND (a training run that
# writes a JSONL next to WORKDIR), waits until it has finished a few steps, sends
# SIGNAL, and prints the exit status, its stop line and the checkpoints left. Fails
# if the run takes more than 20 s to stop.
set -u
signal=$1 dir=$2
shift 2
mkdir -p "$dir"
"$@" --metrics "$dir/m.jsonl" --quiet > "$dir/out.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  [ -s "$dir/m.jsonl" ] && [ "$(wc -l < "$dir/m.jsonl")" -ge 3 ] && break
  sleep 0.05
done
kill -s "$signal" "$pid"
start=$(date +%s)
wait "$pid"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "exit status $status"
grep -o "stopped by.*" "$dir/out.log"
echo "checkpoints: $(ls "$dir/ck" | tr '\n' ' ')"
[ "$elapsed" -le 20 ] || { echo "took ${elapsed}s to stop"; exit 1; }
