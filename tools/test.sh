#!/usr/bin/env bash
# Installs what is missing, builds Kiln and runs every test (unit, lit, end to end,
# the PyTorch oracle). The last line is ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
cd build
ctest --output-on-failure -j"$(nproc)"
