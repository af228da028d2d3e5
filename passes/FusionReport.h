//===- FusionReport.h - What --kiln-fusion grouped and what it refused ----===//
//
// The human-readable side of the fusion pass: the `kiln.not_fused` reason
// attribute, the model-file location format both use, and the report kilnc
// writes to DIR/fusion.txt with --dump-phases-to.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSIONREPORT_H
#define KILN_PASSES_FUSIONREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mlir::kiln {

/// Discardable attribute on an op that a fusion candidate was refused for:
/// "into <consumer> at <file:line:col>: <reason>" (several joined by "; ").
constexpr llvm::StringLiteral kNotFusedAttrName = "kiln.not_fused";

/// "file:line:col" of the first model-file location inside `loc` ("?" when
/// there is none).
std::string modelLocation(Location loc);

/// The bytes a program's kernels and GEMM calls move, counting every buffer
/// a call reads once and every result it writes once (a kernel that rereads
/// a buffer moves more; an accumulating GEMM reads and writes its sum): what
/// the program costs in memory traffic before it runs. GEMMs are apart:
/// their time follows their FLOPs.
struct Traffic {
  int64_t kernelBytes = 0, gemmBytes = 0;
  unsigned kernels = 0, gemms = 0;
  double gemmFlops = 0;
};

/// The traffic of `func` (after fusion: a kiln.fusion is one call), calling
/// `eachKernel` with every kernel (not GEMM) and its bytes.
Traffic measureTraffic(
    func::FuncOp func,
    llvm::function_ref<void(Operation *, int64_t)> eachKernel = nullptr);

/// Per program (@step, @update, @eval): kernels and GEMM calls with fusion
/// and what they would be without it; then each kiln.fusion kernel with its
/// member ops and their model-file locations, then each refused candidate
/// with its reason.
void printFusionReport(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::kiln

#endif // KILN_PASSES_FUSIONREPORT_H
