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

namespace {

// `-D KEY=TEXT` whose TEXT has a grammar of its own (an optimizer spec, a
// mesh): TEXT parsed as its own little source, so its errors point into it.
template <typename Spec> struct ParsedOverride {
  std::optional<SourceFile> text;
  std::optional<DiagnosticPrinter> diag;
  std::optional<Spec> spec;
};

// Parses and removes overrides[key] when present; false after an error.
template <typename Spec>
bool parseTextOverride(std::map<std::string, std::string> &overrides,
                       const char *key,
                       std::optional<Spec> (Parser::*rule)(),
                       llvm::raw_ostream &errs, ParsedOverride<Spec> &out) {
  auto it = overrides.find(key);
  if (it == overrides.end())
    return true;
  out.text.emplace(std::string("-D ") + key, it->second);
  out.diag.emplace(*out.text, errs);
  Parser parser(*out.text, *out.diag);
  out.spec = (parser.*rule)();
  overrides.erase(it);
  return out.spec && !out.diag->hadError();
}

} // namespace

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
  std::map<std::string, std::string> overrides = opts.overrides;
  ParsedOverride<OptimizerSpec> optimizer;
  ParsedOverride<MeshSpec> mesh;
  if (!parseTextOverride(overrides, "optimizer",
                         &Parser::parseOptimizerOverride, errs, optimizer) ||
      !parseTextOverride(overrides, "mesh", &Parser::parseMeshOverride, errs,
                         mesh))
    return std::nullopt;
  TextOverrides text;
  if (optimizer.spec)
    text.optimizer = &*optimizer.spec, text.optimizerDiag = &*optimizer.diag;
  if (mesh.spec)
    text.mesh = &*mesh.spec, text.meshDiag = &*mesh.diag;
  std::optional<TensorGraph> graph =
      buildTensorGraph(*ast, overrides, diag, text);
  if ((optimizer.diag && optimizer.diag->hadError()) ||
      (mesh.diag && mesh.diag->hadError()))
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
