//===- emit_cuda_kernels.cpp - The CUDA kernels of a kiln-dialect file ----===//
//
//   emit_cuda_kernels IN.mlir OUT.cu
//
// Test-only: emits the CUDA kernel of every kiln op in every function of a
// kiln-dialect file (one op per kernel, as KernelGroup::forOp) and writes the
// CUDA prelude and the distinct kernel sources as one translation unit, for
// `nvrtc_check --cu`. It covers kernel variants no model file reaches yet
// (bf16 attention: the language has no bf16 tensors). Prints each kernel's
// function, op, entry and launch (grid, threads, dynamic shared bytes).
//
//===----------------------------------------------------------------------===//

#include "codegen/Codegen.h"
#include "codegen/CudaKernelEmitter.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstdio>
#include <fstream>
#include <set>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: emit_cuda_kernels IN.mlir OUT.cu\n");
    return 2;
  }
  mlir::MLIRContext context;
  context.loadDialect<mlir::kiln::KilnDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1; // the parser reported the error
  std::string text = kiln::kernelPrelude("cuda");
  std::set<std::string> seen;
  bool ok = true;
  module->walk([&](mlir::Operation *op) {
    if (op->getDialect()->getNamespace() != "kiln" ||
        !kiln::CudaKernelEmitter::supports(op))
      return;
    mlir::FailureOr<kiln::CudaKernel> kernel =
        kiln::CudaKernelEmitter::emit(kiln::KernelGroup::forOp(op));
    if (mlir::failed(kernel)) {
      ok = false; // the emitter reported the error on the op
      return;
    }
    if (!seen.insert(kernel->entry).second)
      return;
    auto func = op->getParentOfType<mlir::func::FuncOp>();
    std::printf("@%s %s %s: grid %u, %u threads, %u shared bytes\n",
                func ? func.getName().str().c_str() : "?",
                op->getName().getStringRef().str().c_str(),
                kernel->entry.c_str(), kernel->launch.grid,
                kernel->launch.block, kernel->launch.sharedBytes);
    text += "\n" + kernel->source;
  });
  if (!ok)
    return 1;
  std::ofstream out(argv[2]);
  out << text;
  return out ? 0 : 1;
}
