#!/bin/sh
# Fails if the runtime (or kiln-run) includes MLIR/LLVM headers or anything
# from a compiler folder: a machine that runs artifacts must not need the
# compiler (see shared/ARCHITECTURE.md, "Layout"); and if the step program
# (codegen/program) includes or links MLIR/LLVM.
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
# The step program (codegen/program) is what a pass queries and what the
# serializer writes: it must stay free of MLIR/LLVM and of the rest of the
# compiler too (it may include runtime/schema and itself).
hits=$(grep -rnE "$pattern" "$root/codegen/program" 2>/dev/null |
  grep -vE '#[[:space:]]*include[[:space:]]*"codegen/program/')
if [ -n "$hits" ]; then
  echo "error: codegen/program must not include MLIR, LLVM or compiler headers:" >&2
  echo "$hits" >&2
  exit 1
fi
link=$(grep -nHE '\b(MLIR[A-Za-z]*|LLVM[A-Za-z]*|KilnIR|KilnFrontend|KilnPasses|KilnCodegen)\b' \
  "$root/codegen/program/CMakeLists.txt" | grep -vE '^[^:]*:[0-9]+:[[:space:]]*#')
if [ -n "$link" ]; then
  echo "error: codegen/program must not link compiler libraries:" >&2
  echo "$link" >&2
  exit 1
fi
echo "runtime includes: ok"
