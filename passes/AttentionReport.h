//===- AttentionReport.h - What --kiln-attention-match matched or refused -===//
//
// The near-miss attribute the attention-match pass leaves on a softmax it
// could not turn into kiln.attention, and the report kilnc writes to
// DIR/attention.txt with --dump-phases-to.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_ATTENTIONREPORT_H
#define KILN_PASSES_ATTENTIONREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::kiln {

/// Discardable attribute on a kiln.softmax that looked like attention but
/// was not matched: which condition failed (with the model-file locations
/// of the ops involved).
constexpr llvm::StringLiteral kNotAttentionAttrName = "kiln.not_attention";

/// Per function: each kiln.attention (model-file location, shapes, scale,
/// captures, whether it has a score and a mask region), then each softmax
/// left alone with its reason.
void printAttentionReport(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::kiln

#endif // KILN_PASSES_ATTENTIONREPORT_H
