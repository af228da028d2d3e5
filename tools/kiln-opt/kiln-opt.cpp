//===- kiln-opt.cpp - mlir-opt for the kiln dialect -----------------------===//
//
// Parses, verifies, transforms and prints kiln IR: the kiln, func and arith
// dialects, MLIR's generic transforms (canonicalize, cse, ...) and every
// Kiln pass. Used by the lit tests and to inspect IR dumps; a dump's model
// locations survive (keepModelLocations).
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
#include "llvm/Support/MemoryBuffer.h"

namespace {

// Locations in, locations out: when the input spells out locations (a kilnc
// phase dump: `loc("gpt2.kiln":41:9)` on every op), the output does too, in
// the same inline form, so a dump taken through kiln-opt and on to
// `kilnc --compile-from` still leads reports back to the model's lines.
// Input without them prints as mlir-opt does; --mlir-print-debuginfo and
// --mlir-print-local-scope given on the command line win.
void keepModelLocations(const std::string &input) {
  if (input == "-")
    return; // stdin cannot be looked at twice
  auto buffer = llvm::MemoryBuffer::getFile(input);
  if (!buffer || !(*buffer)->getBuffer().contains("loc(\""))
    return;
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  for (llvm::StringRef name : {"mlir-print-debuginfo", "mlir-print-local-scope"}) {
    auto *flag = static_cast<llvm::cl::opt<bool> *>(options.lookup(name));
    if (flag && flag->getNumOccurrences() == 0)
      flag->setValue(true);
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << kiln::rt::versionText("kiln-opt") << "  LLVM / MLIR " LLVM_VERSION_STRING "\n";
  });
  mlir::registerTransformsPasses();
  mlir::kiln::registerKilnPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::kiln::KilnDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();

  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "Kiln optimizer driver\n", registry);
  keepModelLocations(input);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
