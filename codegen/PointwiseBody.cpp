//===- PointwiseBody.cpp - Per-element statements of a pointwise group ----===//
//
// One statement per op, in group order: an external input is read at the
// output index (or, under a broadcast, at the index the static shapes map it
// to); a value computed earlier in the group is reused by name. Outputs are
// stored at the output index. Shared by CpuKernelEmitter and
// CudaKernelEmitter, so both backends compute the same formula per element.
//
//===----------------------------------------------------------------------===//

#include "codegen/PointwiseBody.h"

#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast<k::ConstantOp>(op);
  if (!constant)
    return false;
  auto value = constant->getAttrOfType<DenseElementsAttr>("value");
  return value && value.isSplat();
}

// The C literal of a splat constant.
std::string splatLiteral(Operation *op) {
  auto value = op->getAttrOfType<DenseElementsAttr>("value");
  if (isa<FloatType>(value.getElementType()))
    return ScalarExprEmitter::floatLiteral(
        value.getSplatValue<APFloat>().convertToDouble());
  return "((" + cElementType(value.getElementType()) + ")" +
         std::to_string(value.getSplatValue<APInt>().getSExtValue()) + "LL)";
}

// The flat index into `input` (shape `in`) of output element `index` of a
// broadcast to `out` that maps input dim j to output dim dims[j].
std::string broadcastIndex(StringRef index, ArrayRef<int64_t> in,
                           ArrayRef<int64_t> out, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> outStrides = rowMajorStrides(out);
  SmallVector<int64_t> inStrides = rowMajorStrides(in);
  std::string sum;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1)
      continue;
    int64_t d = dims[j];
    addTerm(sum, coordinate(index, outStrides[d], out[d], d == 0),
            inStrides[j]);
  }
  return sum.empty() ? "0" : sum;
}

} // namespace

bool PointwiseBody::isPointwise(Operation *op) {
  return ScalarExprEmitter::isElementwise(op) || isSplatConstant(op) ||
         isa<k::BroadcastOp, k::IotaOp, k::CausalMaskOp>(op);
}

FailureOr<PointwiseBody> PointwiseBody::build(const KernelGroup &group,
                                              const KernelSourceWriter &w,
                                              StringRef index) {
  if (group.outputs.empty())
    return group.ops.front()->emitError() << "a kernel needs an output";
  PointwiseBody body;
  body.elements = numElements(shapeOf(group.outputs.front()));
  int64_t n = body.elements;
  for (Operation *op : group.ops)
    if (numElements(shapeOf(op->getResult(0))) != n)
      return op->emitError()
             << "pointwise ops of one kernel must all produce " << n
             << " elements";

  std::string at = "[" + index.str() + "]";
  llvm::DenseMap<Value, std::string> vars;
  auto load = [&](Value v) -> std::string {
    auto it = vars.find(v);
    if (it != vars.end())
      return it->second;
    return w.ptr(v) + at;
  };

  for (Operation *op : group.ops) {
    Value result = op->getResult(0);
    std::string expr;
    if (isa<k::BroadcastOp>(op)) {
      Value input = op->getOperand(0);
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
      if (vars.count(input)) {
        if (shapeOf(input) != shapeOf(result))
          return op->emitError()
                 << "cannot broadcast a value computed in the same kernel";
        expr = vars[input];
      } else {
        expr = w.ptr(input) + "[" +
               broadcastIndex(index, shapeOf(input), shapeOf(result),
                              dims.asArrayRef()) +
               "]";
      }
    } else if (isSplatConstant(op)) {
      expr = splatLiteral(op);
    } else if (isa<k::IotaOp>(op)) {
      expr = "(" + w.cType(result) + ")" + index.str();
    } else if (isa<k::CausalMaskOp>(op)) {
      // Element (r, c) of the trailing [T, S] matrix is masked when
      // c > r + (S - T).
      ArrayRef<int64_t> shape = shapeOf(result);
      if (shape.size() < 2)
        return op->emitError() << "causal_mask needs rank >= 2";
      int64_t t = shape[shape.size() - 2], s = shape.back();
      double fill = op->getAttrOfType<FloatAttr>("fill").getValueAsDouble();
      std::string col = coordinate(index, 1, s, false);
      std::string row = coordinate(index, s, t, shape.size() == 2);
      expr = "((" + col + " > " + row + " + " + std::to_string(s - t) +
             ") ? " + ScalarExprEmitter::floatLiteral(fill) + " : " +
             load(op->getOperand(0)) + ")";
    } else {
      SmallVector<std::string> operands;
      for (Value v : op->getOperands())
        operands.push_back(load(v));
      FailureOr<std::string> e = ScalarExprEmitter::emit(op, operands);
      if (failed(e))
        return op->emitError() << "no scalar expression for this op";
      expr = *e;
    }
    std::string var = "v" + std::to_string(vars.size());
    body.statements.push_back("const " + w.cType(result) + " " + var + " = " +
                              expr + "; // " +
                              op->getName().getStringRef().str());
    vars[result] = var;
  }
  for (Value out : group.outputs) {
    auto it = vars.find(out);
    if (it == vars.end())
      return group.ops.front()->emitError()
             << "a kernel output is not computed by the kernel's ops";
    body.stores.push_back(w.ptr(out) + at + " = " + it->second + ";");
  }
  return body;
}

} // namespace kiln
