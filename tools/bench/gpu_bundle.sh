#!/usr/bin/env bash
# Everything a GPU session needs to run Kiln's GPU checks and benchmarks, in
# one folder to carry: the GPU machine has CUDA and PyTorch but no MLIR, so
# kilnc cannot run there. `pack` runs here, `run` there.
#
#   tools/bench/gpu_bundle.sh pack DIR [BENCH...]
#       compiles every artifact of the benches (COMPILE_ONLY=1, ARTIFACTS=
#       DIR/artifacts; see bench_lib.sh) and copies kiln-run with the shared
#       libraries it links that a machine without Debian's packages lacks
#       (OpenBLAS, gfortran, libstdc++...) into DIR/bin and DIR/lib; CUDA's
#       libraries (driver, NVRTC, cuBLASLt, cuDNN, NCCL) are dlopen'ed from
#       the GPU machine's own installation. Fails when DIR is over 64 MiB
#       (what the device tool carries).
#   tools/bench/gpu_bundle.sh run DIR [OUTDIR] [BENCH...]
#       runs the benches from DIR with DIR/bin/kiln-run and no kilnc; each
#       writes OUTDIR/BENCH.txt (default OUTDIR: $OUT, else DIR/results)
#       beginning with its exact command, the date and the GPU, so the raw
#       output can go into tools/bench/RESULTS.md as it is.
# BENCH: cudnn (cudnn_attention_check.sh), attention (attention_bench.sh, then
# torch_attention.py on the same grid), tsp (tsp_bench.sh), gpt2
# (gpt2_bench.sh), llama (llama_bench.sh), remat (remat_bench.sh); default:
# the first five, in that order. Shapes come from the
# scripts' own variables (SEQS, HEAD_DIMS, BATCH, ...), which must be the same
# for pack and run: an artifact missing from the bundle is reported by name.
# Run the benches in several `run` calls when one would pass the device
# tool's 10-minute limit.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
usage() { sed -n '2,27p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
mode=$1 dir=$2
shift 2
: "${KILN_RUN:=build/bin/kiln-run}" "${PYTHON:=python3}"

bench_script() {
  case $1 in
    cudnn) echo tools/bench/cudnn_attention_check.sh ;;
    attention) echo tools/bench/attention_bench.sh ;;
    tsp) echo tools/bench/tsp_bench.sh ;;
    gpt2) echo tools/bench/gpt2_bench.sh ;;
    llama) echo tools/bench/llama_bench.sh ;;
    remat) echo tools/bench/remat_bench.sh ;;
    *) echo "gpu_bundle.sh: unknown bench '$1' (cudnn, attention, tsp, gpt2, llama, remat)" >&2; exit 2 ;;
  esac
}

case $mode in
pack)
  benches=("$@")
  [ ${#benches[@]} -gt 0 ] || benches=(cudnn attention tsp gpt2 llama)
  mkdir -p "$dir/bin" "$dir/lib" "$dir/artifacts"
  for b in "${benches[@]}"; do
    script=$(bench_script "$b")
    echo "pack: $b ($script)"
    COMPILE_ONLY=1 ARTIFACTS="$dir/artifacts" "$script"
  done
  tools/bench/pack_kiln_run.sh "$KILN_RUN" "$dir"
  bytes=$(du -sb "$dir" | cut -f1)
  echo "pack: $dir is $(( bytes / 1024 / 1024 )) MiB ($(ls "$dir/artifacts" | grep -c '\.kart$') artifacts)"
  if [ "$bytes" -gt $(( 64 * 1024 * 1024 )) ]; then
    echo "gpu_bundle.sh: $dir is over the 64 MiB the device tool carries" >&2
    exit 1
  fi
  ;;
run)
  out=${OUT:-$dir/results}
  if [ $# -gt 0 ] && ! (bench_script "$1") > /dev/null 2>&1; then out=$1; shift; fi
  benches=("$@")
  [ ${#benches[@]} -gt 0 ] || benches=(cudnn attention tsp gpt2 llama)
  mkdir -p "$out"
  dir=$(cd "$dir" && pwd)
  for b in "${benches[@]}"; do
    script=$(bench_script "$b")
    log="$out/$b.txt"
    {
      echo "\$ ARTIFACTS=$dir/artifacts KILN_RUN=$dir/bin/kiln-run KILNC=none $script"
      echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
      echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null || echo 'no GPU (nvidia-smi failed)')"
    } > "$log"
    echo "run: $b -> $log"
    status=0
    ARTIFACTS="$dir/artifacts" KILN_RUN="$dir/bin/kiln-run" KILNC=none "$script" >> "$log" 2>&1 ||
      status=$?
    if [ "$b" = attention ] && [ "${TORCH_ATTENTION:-1}" = 1 ]; then
      # The PyTorch side of the same grid (its own defaults match the script's).
      echo "\$ $PYTHON tools/bench/torch_attention.py ${TORCH_ATTENTION_ARGS:-}" >> "$log"
      # shellcheck disable=SC2086  # a list of flags
      "$PYTHON" tools/bench/torch_attention.py ${TORCH_ATTENTION_ARGS:-} >> "$log" 2>&1 || status=$?
    fi
    echo "exit status: $status" >> "$log"
    tail -n 4 "$log" | sed 's/^/  /'
  done
  ;;
*) usage ;;
esac
