#!/usr/bin/env bash
# Installs what Kiln needs on Debian 12 (only what is missing) and builds it.
#   tools/setup.sh [BUILD_DIR]       (default: build)
# Used by tools/demo.sh and tools/test.sh; safe to run again (a no-op when done).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build git pkg-config
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools     # MLIR/LLVM 19, FileCheck, lit
  flatbuffers-compiler libflatbuffers-dev                     # the artifact format
  libopenblas-dev libgtest-dev                                # CPU GEMMs, unit tests
  nlohmann-json3-dev                                          # safetensors headers, trainer_state.json
  libopenmpi-dev openmpi-bin                                  # multi-process CPU runs (MPI)
  libgloo-dev                                                 # torchrun- and Slurm-launched CPU runs (Gloo)
  python3 python3-numpy python3-torch python3-venv python3-pip # the PyTorch oracle test, test readers
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build=${1:-build}

# Python readers the tests use on Kiln's files: Hugging Face's `safetensors`
# and TensorBoard's own event reader, in a venv inside the build folder that
# also sees Debian's torch (--system-site-packages).
pyenv="$build/pyenv"
if [ ! -x "$pyenv/bin/python" ] || ! "$pyenv/bin/python" -c "import safetensors, tensorboard" 2>/dev/null; then
  echo "setup: installing safetensors and tensorboard into $pyenv"
  /usr/bin/python3 -m venv --system-site-packages "$pyenv"
  "$pyenv/bin/python" -m pip install -q --disable-pip-version-check "safetensors==0.8.0" "tensorboard==2.21.0"
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$build" -j"$(nproc)"
