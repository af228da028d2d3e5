#!/usr/bin/env bash
# kill_rank.sh CKDIR KILN_RUN ARGS...: one rank of an `mpirun -np N` run.
# Rank 1 runs kiln-run in the background and, once the first checkpoint in
# CKDIR is complete, kills it with SIGKILL (a crashed or OOM-killed rank);
# every other rank runs kiln-run as usual. The run as a whole must end
# (mpirun takes the others down) instead of leaving them blocked in the
# all-reduce that rank 1 never joins.
set -u
ckdir=$1
shift
if [ "${OMPI_COMM_WORLD_RANK:-0}" != 1 ]; then
  exec "$@"
fi
"$@" &
pid=$!
for _ in $(seq 1200); do
  ls "$ckdir" 2> /dev/null | grep -q '^step-' && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
kill -9 "$pid"
wait "$pid"
