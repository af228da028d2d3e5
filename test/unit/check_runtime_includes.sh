#!/bin/sh
# Fails if the runtime (or kiln-run) includes MLIR/LLVM headers or anything
# from a compiler folder: a machine that runs artifacts must not need the
# compiler (see shared/ARCHITECTURE.md, "Layout").
#   usage: check_runtime_includes.sh REPO_ROOT
root="${1:?usage: $0 REPO_ROOT}"
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](mlir|llvm|llvm-c|frontend|ir|passes|codegen)/'
hits=$(grep -rnE "$pattern" "$root/runtime" "$root/tools/kiln-run" 2>/dev/null)
if [ -n "$hits" ]; then
  echo "error: the runtime must not include compiler headers:" >&2
  echo "$hits" >&2
  exit 1
fi
# Linking is checked too: the runtime's CMakeLists must not name MLIR/LLVM
# or a compiler library target.
link=$(grep -nE '\b(MLIR[A-Za-z]*|LLVM[A-Za-z]*|KilnIR|KilnFrontend|KilnPasses|KilnCodegen)\b' \
  "$root/runtime/CMakeLists.txt" "$root/tools/kiln-run/CMakeLists.txt" |
  grep -vE '^[^:]*:[0-9]+:[[:space:]]*#')
if [ -n "$link" ]; then
  echo "error: the runtime must not link compiler libraries:" >&2
  echo "$link" >&2
  exit 1
fi
echo "runtime includes: ok"
