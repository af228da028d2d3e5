//===- PointwiseBody.cpp - Per-element statements of a pointwise group ----===//
//
// A whole pointwise group as one flat loop body: checks that every op
// produces the output's element count, asks emitPointwiseStatements (the one
// statement generator, also used inside row kernels) for the statements over
// the kernel's pointers, and adds one store per output.
//
//===----------------------------------------------------------------------===//

#include "codegen/PointwiseBody.h"

#include "codegen/PointwiseStatements.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

bool PointwiseBody::isPointwise(Operation *op) {
  if (auto constant = dyn_cast<k::ConstantOp>(op)) {
    auto value = constant->getAttrOfType<DenseElementsAttr>("value");
    return value && value.isSplat();
  }
  return ScalarExprEmitter::isElementwise(op) ||
         isa<k::BroadcastOp, k::IotaOp, k::CausalMaskOp>(op);
}

FailureOr<PointwiseBody> PointwiseBody::build(const KernelGroup &group,
                                              const KernelSourceWriter &w,
                                              StringRef index) {
  if (group.outputs.empty())
    return group.ops.front()->emitError() << "a kernel needs an output";
  PointwiseBody body;
  body.elements = numElements(shapeOf(group.outputs.front()));
  for (Operation *op : group.ops)
    if (numElements(shapeOf(op->getResult(0))) != body.elements)
      return op->emitError()
             << "pointwise ops of one kernel must all produce "
             << body.elements << " elements";
  PointwiseStatements code;
  if (failed(emitPointwiseStatements(
          group.ops, index, [&](Value v) { return w.ptr(v); }, code)))
    return failure();
  body.statements.assign(code.lines.begin(), code.lines.end());
  for (Value out : group.outputs) {
    auto it = code.vars.find(out);
    if (it == code.vars.end())
      return group.ops.front()->emitError()
             << "a kernel output is not computed by the kernel's ops";
    body.stores.push_back(w.store(out, index, it->second));
  }
  return body;
}

} // namespace kiln
