#!/bin/sh
# Tests that kiln-run built with AddressSanitizer trains tiny_gpt (small -D
# overrides, a few steps, validation, a checkpoint and a resume from it)
# without one ASan report: the arena of the static memory plan, the data
# loader, checkpoints and metrics are exercised under ASan.
#
#   asan_train.sh SOURCE_DIR KILNC WORK_DIR
#
# kiln-run is built in WORK_DIR/build-asan with -DKILN_ENABLE_ASAN=ON and
# neither the compiler nor the tests; ccache is used when present, so a rerun
# rebuilds in seconds. The generated kernels are compiled by the host
# compiler at run time and are not instrumented.
set -eu
src=$1
kilnc=$2
work=$3
mkdir -p "$work"
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
# shellcheck disable=SC2086
if ! { cmake -G Ninja -S "$src" -B "$work/build-asan" -DKILN_ENABLE_ASAN=ON \
         -DKILN_BUILD_COMPILER=OFF -DKILN_BUILD_TESTS=OFF $launcher &&
       ninja -C "$work/build-asan" kiln-run; } > "$work/build-asan.log" 2>&1; then
  tail -30 "$work/build-asan.log"
  exit 1
fi
run="$work/build-asan/bin/kiln-run"
"$kilnc" "$src/models/tiny_gpt.kiln" -D batch=2 -D seq=32 -D n_layer=2 \
  -o "$work/tiny.kart" > "$work/kilnc.out"
rm -rf "$work/ckpt"
data=/usr/share/common-licenses/GPL-3
# Kernels compiled for this test stay with it (a rerun loads them).
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$work/kernel-cache}"
# Any ASan report makes the process exit non-zero (exitcode 23) and prints it.
export ASAN_OPTIONS="exitcode=23:detect_leaks=1:abort_on_error=0"
"$run" "$work/tiny.kart" --data "$data" --steps 3 --val-every 2 --val-fraction 0.1 \
  --checkpoint-dir "$work/ckpt" --metrics "$work/m.jsonl" > "$work/run1.out" 2>&1 ||
  { cat "$work/run1.out"; exit 1; }
"$run" "$work/tiny.kart" --data "$data" --steps 5 --checkpoint-dir "$work/ckpt" \
  --resume > "$work/run2.out" 2>&1 || { cat "$work/run2.out"; exit 1; }
if grep -q "AddressSanitizer\|LeakSanitizer" "$work/run1.out" "$work/run2.out"; then
  cat "$work/run1.out" "$work/run2.out"
  exit 1
fi
grep "final loss" "$work/run2.out"
