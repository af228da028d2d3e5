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

namespace {

// The statements of `ops` over `elements` elements and a store for each of
// `group`'s outputs but `total` (a "sum" kernel's one-element result); with
// `lane`, plain reads and stores go to the buffers' register copies.
FailureOr<PointwiseBody> fill(const KernelGroup &group, ArrayRef<Operation *> ops,
                              int64_t elements, Value total, const KernelSourceWriter &w,
                              StringRef index, PointwiseStatements &code,
                              StringRef lane = {}) {
  PointwiseBody body;
  body.elements = elements;
  body.total = total;
  for (Operation *op : ops)
    if (numElements(shapeOf(op->getResult(0))) != body.elements)
      return op->emitError()
             << "pointwise ops of one kernel must all produce "
             << body.elements << " elements";
  auto laneElement = [&](Value v) {
    return PointwiseBody::laneCopy(w.ptr(v)) + ".v[" + lane.str() + "]";
  };
  auto pointer = [&](Value v) { return w.ptr(v); };
  if (failed(lane.empty() ? emitPointwiseStatements(ops, index, pointer, code)
                          : emitPointwiseStatements(ops, index, pointer, code,
                                                    laneElement)))
    return failure();
  body.statements.assign(code.lines.begin(), code.lines.end());
  body.plainInputs = code.plainReads;
  body.usesIndex = code.usesIndex;
  for (Value out : group.outputs) {
    if (out == total)
      continue;
    auto it = code.vars.find(out);
    if (it == code.vars.end())
      return group.ops.front()->emitError()
             << "a kernel output is not computed by the kernel's ops";
    body.stores.push_back(
        lane.empty() ? w.store(out, index, it->second)
                     : storeElement(cast<RankedTensorType>(out.getType())
                                        .getElementType(),
                                    laneElement(out), it->second));
  }
  return body;
}

} // namespace

std::string PointwiseBody::laneCopy(StringRef pointer) {
  return pointer.str() + "_l";
}

FailureOr<PointwiseBody> PointwiseBody::build(const KernelGroup &group,
                                              const KernelSourceWriter &w,
                                              StringRef index, StringRef lane) {
  if (group.outputs.empty())
    return group.ops.front()->emitError() << "a kernel needs an output";
  PointwiseStatements code;
  return fill(group, group.ops, numElements(shapeOf(group.outputs.front())), Value(), w,
              index, code, lane);
}

bool PointwiseBody::isSumGroup(const KernelGroup &group) {
  if (group.ops.size() < 2)
    return false;
  auto sum = dyn_cast<k::ReduceSumOp>(group.ops.back());
  return sum && numElements(shapeOf(sum.getResult())) == 1 &&
         llvm::all_of(ArrayRef<Operation *>(group.ops).drop_back(), isPointwise);
}

FailureOr<PointwiseBody> PointwiseBody::buildSum(const KernelGroup &group,
                                                 const KernelSourceWriter &w,
                                                 StringRef index, StringRef lane) {
  if (!isSumGroup(group))
    return group.ops.front()->emitError()
           << "a \"sum\" kernel is pointwise ops and then one whole-tensor kiln.reduce_sum";
  auto sum = cast<k::ReduceSumOp>(group.ops.back());
  PointwiseStatements code;
  FailureOr<PointwiseBody> body =
      fill(group, ArrayRef<Operation *>(group.ops).drop_back(),
           numElements(shapeOf(sum.getInput())), sum.getResult(), w, index, code, lane);
  if (failed(body))
    return failure();
  auto summand = code.vars.find(sum.getInput());
  if (summand == code.vars.end())
    return sum->emitError() << "the summed tensor is not computed by the kernel's ops";
  body->summand = summand->second;
  return body;
}

} // namespace kiln
