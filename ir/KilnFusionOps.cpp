//===- KilnFusionOps.cpp - Verifier of kiln.fusion -------------------------===//
//
// A kiln.fusion is the contract between --kiln-fusion and codegen: codegen
// maps block arguments to the operands' buffers and yielded values to the
// results' buffers one to one, so any mismatch there would silently read or
// write the wrong buffer. The verifier refuses it on the op instead.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

using namespace mlir;
using namespace mlir::kiln;

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " operands but its body has "
                         << body.getNumArguments() << " block arguments";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments()))) {
    auto [operand, arg] = pair;
    if (operand.getType() != arg.getType())
      return emitOpError() << "block argument " << i << " has type "
                           << arg.getType() << " but operand " << i
                           << " has type " << operand.getType();
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end with kiln.yield";
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values but has " << getNumResults()
                         << " results";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(yield.getValues(), getResultTypes()))) {
    auto [value, type] = pair;
    if (value.getType() != type)
      return emitOpError() << "yielded value " << i << " has type "
                           << value.getType() << " but result " << i
                           << " has type " << type;
  }
  for (Operation &op : body.without_terminator()) {
    if (isa<FusionOp>(op))
      return op.emitOpError() << "cannot be nested in another kiln.fusion";
    if (op.getDialect() != getOperation()->getDialect())
      return op.emitOpError() << "cannot be in a kiln.fusion (only kiln ops "
                                 "become kernels)";
  }
  if (getKind() == FusionKind::Gemm)
    return verifyGemmBody();
  return success();
}

// A gemm kernel is one GEMM call: the matmul first, then only the ops a
// GEMM epilogue can compute.
LogicalResult FusionOp::verifyGemmBody() {
  Block &body = getBody().front();
  if (body.without_terminator().empty() ||
      !isa<MatmulOp>(body.without_terminator().begin()))
    return emitOpError() << "of kind gemm must begin with a kiln.matmul";
  for (Operation &op : llvm::drop_begin(body.without_terminator())) {
    if (isa<MatmulOp>(op))
      return op.emitOpError()
             << "is a second kiln.matmul in a kiln.fusion of kind gemm (one "
                "GEMM call per kernel)";
    // kiln.convert: a bf16 GEMM's epilogue widens its bf16 bias and rounds
    // the sums it stores.
    if (!isa<BroadcastOp, AddOp, GeluOp, GeluGradOp, ReduceSumOp, ConvertOp>(
            op))
      return op.emitOpError()
             << "cannot be in the epilogue of a kiln.fusion of kind gemm "
                "(only kiln.broadcast, kiln.add, kiln.convert, kiln.gelu, "
                "kiln.gelu_grad and kiln.reduce_sum)";
  }
  return success();
}
