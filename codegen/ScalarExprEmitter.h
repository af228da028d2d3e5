//===- ScalarExprEmitter.h - Scalar C expressions of elementwise ops ------===//
//
// The one place that knows the scalar formula of every elementwise kiln op
// (add, gelu, gelu_grad, ...). Kernel emitters (the C++ CPU and the CUDA
// emitters, through PointwiseBody) build their loop nests and ask this
// emitter for the expression of each op given the expressions of its
// operands. The returned
// strings are plain C expressions over `float` using only expf/logf/tanhf/
// sqrtf, so the same text is valid C++ and CUDA device code.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_SCALAREXPREMITTER_H
#define KILN_CODEGEN_SCALAREXPREMITTER_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace kiln {

class ScalarExprEmitter {
public:
  // True for the ops that `emit` handles (kiln.add ... kiln.gelu_grad).
  static bool isElementwise(mlir::Operation *op);

  // The C expression of `op` applied to `operands` (one expression per
  // operand, in operand order). Operands may be any expression; each is
  // parenthesised where it is used. Fails for ops that are not elementwise.
  static mlir::FailureOr<std::string>
  emit(mlir::Operation *op, llvm::ArrayRef<std::string> operands);

  // A C literal of type float for `value` ("0.5f", "-INFINITY", "NAN").
  static std::string floatLiteral(double value);
};

} // namespace kiln

#endif // KILN_CODEGEN_SCALAREXPREMITTER_H
