#!/bin/bash
# launch_ranks.sh STYLE N OUT CMD...: starts N copies of CMD the way a
# launcher other than mpirun would, each with its rank in the launcher's
# variables (STYLE torchrun: WORLD_SIZE, RANK, LOCAL_RANK; slurm:
# SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID) and the rendezvous MASTER_ADDR
# (127.0.0.1) and MASTER_PORT (a free port, or $MASTER_PORT). Rank r's
# output goes to OUT.r; OMP_NUM_THREADS defaults to 1. Waits for all; exits
# with the largest exit status.
set -u
style=$1 n=$2 out=$3
shift 3
port=${MASTER_PORT:-$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
pids=()
for ((r = 0; r < n; r++)); do
  case $style in
    torchrun) vars=(WORLD_SIZE=$n RANK=$r LOCAL_RANK=$r) ;;
    slurm) vars=(SLURM_NTASKS=$n SLURM_PROCID=$r SLURM_LOCALID=$r) ;;
    *) echo "launch_ranks.sh: unknown style '$style'" >&2; exit 2 ;;
  esac
  env "${vars[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$@" > "$out.$r" 2>&1 &
  pids+=($!)
done
worst=0
for pid in "${pids[@]}"; do
  wait "$pid"
  status=$?
  [ "$status" -gt "$worst" ] && worst=$status
done
exit "$worst"
