//===- Frontend.cpp - Model file to kiln dialect --------------------------===//
//
// Reads the file, then Parser -> Sema -> MLIRGen. Each stage reports its own
// diagnostics; the first failure ends the compilation.
//
//===----------------------------------------------------------------------===//

#include "frontend/Frontend.h"

#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"

#include "llvm/Support/MemoryBuffer.h"

namespace kiln {

std::optional<TensorGraph> checkModelFile(const FrontendOptions &opts,
                                          llvm::raw_ostream &errs) {
  auto buffer = llvm::MemoryBuffer::getFile(opts.path, /*IsText=*/true);
  if (!buffer) {
    errs << opts.path << ": error: cannot read the model file: "
         << buffer.getError().message() << "\n";
    return std::nullopt;
  }
  SourceFile file(opts.path, (*buffer)->getBuffer().str());
  DiagnosticPrinter diag(file, errs);
  std::optional<ModuleAST> ast = parseModelFile(file, diag);
  if (!ast || diag.hadError())
    return std::nullopt;
  // `-D optimizer=TEXT` is an optimizer spec, not a number: parse TEXT as
  // its own little source, so its errors point into it.
  std::map<std::string, std::string> overrides = opts.overrides;
  std::optional<SourceFile> optimizerText;
  std::optional<DiagnosticPrinter> optimizerDiag;
  std::optional<OptimizerSpec> optimizerSpec;
  OptimizerOverride optimizerOverride;
  auto optimizer = overrides.find("optimizer");
  if (optimizer != overrides.end()) {
    optimizerText.emplace("-D optimizer", optimizer->second);
    optimizerDiag.emplace(*optimizerText, errs);
    Parser parser(*optimizerText, *optimizerDiag);
    optimizerSpec = parser.parseOptimizerOverride();
    if (!optimizerSpec || optimizerDiag->hadError())
      return std::nullopt;
    optimizerOverride = {&*optimizerSpec, &*optimizerDiag};
    overrides.erase(optimizer);
  }
  std::optional<TensorGraph> graph =
      buildTensorGraph(*ast, overrides, diag,
                       optimizerSpec ? &optimizerOverride : nullptr);
  if (optimizerDiag && optimizerDiag->hadError())
    return std::nullopt;
  if (!graph || diag.hadError())
    return std::nullopt;
  return graph;
}

mlir::OwningOpRef<mlir::ModuleOp> compileModelFile(mlir::MLIRContext &ctx,
                                                   const FrontendOptions &opts,
                                                   llvm::raw_ostream &errs) {
  std::optional<TensorGraph> graph = checkModelFile(opts, errs);
  if (!graph)
    return nullptr;
  return emitKilnModule(ctx, *graph, opts.path, errs);
}

} // namespace kiln
