//===- MLIRGenAttention.h - Attention nodes to kiln.attention ---*- C++ -*-===//
//
// Internal to frontend/: MLIRGen's lowering of an Attention node, whose score
// and mask ScalarExpr trees become the op's regions (arith, math and
// tensor.extract on the captures' block arguments).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_MLIRGENATTENTION_H
#define KILN_FRONTEND_MLIRGENATTENTION_H

#include "frontend/TensorGraph.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace kiln {

/// Builds the kiln.attention of `node` at `b`'s insertion point; `operands`
/// are the node's operands (q, k, v, captures...); `dropoutRng` is the
/// step function's dropout_rng argument (appended as the last capture when
/// the node has dropout). Returns its `out`.
mlir::Value emitAttentionOp(mlir::OpBuilder &b, mlir::Location loc,
                            const Node &node,
                            llvm::ArrayRef<mlir::Value> operands,
                            mlir::RankedTensorType outType,
                            mlir::Value dropoutRng);

/// True when some Attention node of `graph` has dropout (the step function
/// then takes the dropout_rng argument).
bool graphHasDropout(const TensorGraph &graph);

} // namespace kiln

#endif // KILN_FRONTEND_MLIRGENATTENTION_H
