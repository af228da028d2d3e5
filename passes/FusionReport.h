//===- FusionReport.h - What --kiln-fusion grouped and what it refused ----===//
//
// The human-readable side of the fusion pass: the `kiln.not_fused` reason
// attribute, the model-file location format both use, and the report kilnc
// writes to DIR/fusion.txt with --dump-phases-to.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSIONREPORT_H
#define KILN_PASSES_FUSIONREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::kiln {

/// Discardable attribute on an op that a fusion candidate was refused for:
/// "into <consumer> at <file:line:col>: <reason>" (several joined by "; ").
constexpr llvm::StringLiteral kNotFusedAttrName = "kiln.not_fused";

/// "file:line:col" of the first model-file location inside `loc` ("?" when
/// there is none).
std::string modelLocation(Location loc);

/// Per program (@step, @update, @eval): kernels and GEMM calls with fusion
/// and what they would be without it; then each kiln.fusion kernel with its
/// member ops and their model-file locations, then each refused candidate
/// with its reason.
void printFusionReport(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::kiln

#endif // KILN_PASSES_FUSIONREPORT_H
