#!/usr/bin/env bash
# signal_during_compile.sh SIGNAL CACHE_DIR COMMAND...: starts COMMAND (a
# kiln-run on the CPU whose kernel cache CACHE_DIR is empty), waits until a
# host compiler reading that cache runs, sends SIGNAL to kiln-run alone (as a
# scheduler's kill does), and prints kiln-run's exit status and how many
# processes still work in CACHE_DIR a second later. Fails when no compiler
# was seen within 60 s.
set -u
signal=$1 cache=$2
shift 2
rm -rf "$cache"
KILN_CACHE_DIR="$cache" "$@" > /dev/null 2>&1 &
pid=$!
seen=0
for _ in $(seq 1200); do
  if pgrep -f "$cache/.*\.part" > /dev/null; then seen=1; break; fi
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.05
done
[ "$seen" = 1 ] || { echo "no compiler seen"; kill -9 "$pid" 2> /dev/null; exit 1; }
kill -s "$signal" "$pid"
wait "$pid"
echo "exit status $?"
sleep 1
echo "compilers left: $(pgrep -f "$cache/" | wc -l)"
pkill -9 -f "$cache/" 2> /dev/null
exit 0
