#!/usr/bin/env bash
# kill_rank.sh SIGNAL CKDIR KILN_RUN ARGS...: one rank of an `mpirun -np N`
# run (or of one that launch_ranks.sh starts). Rank 1 runs kiln-run in the background and, once the first
# checkpoint in CKDIR is complete, sends it SIGNAL: KILL (a crashed or
# OOM-killed rank) or STOP (a hung one); every other rank runs kiln-run as
# usual. The run as a whole must end -- mpirun takes the others down after a
# death, the others' --comm-timeout after a hang -- instead of leaving them
# blocked in the all-reduce that rank 1 never joins. A stopped kiln-run is
# killed when mpirun ends this script (or after 120 s), never left behind.
set -u
signal=$1 ckdir=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-${RANK:-${SLURM_PROCID:-0}}}" != 1 ]; then
  exec "$@"
fi
"$@" &
pid=$!
trap 'kill -9 "$pid" 2> /dev/null; exit 1' TERM INT
for _ in $(seq 1200); do
  ls "$ckdir" 2> /dev/null | grep -q '^step-' && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
kill -"$signal" "$pid"
if [ "$signal" = STOP ]; then
  sleep 120 &
  wait $!
  kill -9 "$pid"
fi
wait "$pid"
