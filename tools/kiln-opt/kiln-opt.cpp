//===- kiln-opt.cpp - mlir-opt for the kiln dialect -----------------------===//
//
// Parses, verifies, transforms and prints kiln IR: the kiln, func and arith
// dialects, MLIR's generic transforms (canonicalize, cse, ...) and every
// Kiln pass. Used by the lit tests and to inspect IR dumps.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "passes/Passes.h"
#include "runtime/Version.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << kiln::rt::versionText("kiln-opt") << "  LLVM / MLIR " LLVM_VERSION_STRING "\n";
  });
  mlir::registerTransformsPasses();
  mlir::kiln::registerKilnPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::kiln::KilnDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
