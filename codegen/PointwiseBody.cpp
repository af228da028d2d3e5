//===- PointwiseBody.cpp - Per-element statements of a pointwise group ----===//
//
// A whole pointwise group as one flat loop body: checks that every op
// produces the output's element count, asks emitPointwiseStatements (the one
// statement generator, also used inside row kernels) for the statements over
// the kernel's pointers, and adds one store per output.
//
//===----------------------------------------------------------------------===//

#include "codegen/PointwiseBody.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

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

namespace {
bool isTotal(Operation *op) {
  auto sum = dyn_cast<k::ReduceSumOp>(op);
  return sum && numElements(shapeOf(sum.getResult())) == 1;
}
} // namespace

bool PointwiseBody::isSumGroup(const KernelGroup &group) {
  if (group.ops.size() < 2 || !isTotal(group.ops.back()))
    return false;
  return llvm::all_of(ArrayRef<Operation *>(group.ops).drop_back(),
                      [](Operation *op) { return isPointwise(op) || isTotal(op); });
}

SmallVector<KernelGroup> PointwiseBody::sumChains(const KernelGroup &group) {
  SmallVector<KernelGroup> chains;
  llvm::SmallPtrSet<Operation *, 8> taken;
  for (auto [at, op] : llvm::enumerate(group.ops)) {
    if (!isTotal(op))
      continue;
    // The ops before the sum that it reads, transitively.
    llvm::SmallPtrSet<Operation *, 8> needed{op};
    for (size_t i = at; i-- > 0;) {
      Operation *candidate = group.ops[i];
      if (taken.contains(candidate))
        continue;
      bool read = llvm::any_of(candidate->getUsers(),
                               [&](Operation *user) { return needed.contains(user); });
      if (read)
        needed.insert(candidate);
    }
    KernelGroup chain;
    for (Operation *member : ArrayRef<Operation *>(group.ops).take_front(at + 1))
      if (needed.contains(member)) {
        chain.ops.push_back(member);
        taken.insert(member);
      }
    llvm::SetVector<Value> inputs;
    for (Operation *member : chain.ops)
      for (Value v : member->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !needed.contains(def))
          inputs.insert(v);
      }
    chain.inputs.assign(inputs.begin(), inputs.end());
    for (Value v : group.outputs)
      if (Operation *def = v.getDefiningOp(); def && needed.contains(def))
        chain.outputs.push_back(v);
    chains.push_back(std::move(chain));
  }
  return chains;
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
