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
