//===- PointwiseStatements.cpp - One element of a pointwise op chain ------===//
//
//   const float v0 = in1[(i / 128) % 4 * 1];   // kiln.broadcast of an input
//   const float v1 = (in0[i]) + (v0);          // kiln.add
//   const float v2 = kiln_gelu(v1);            // kiln.gelu
//
// bf16 (loadElement / storeElement): a bf16 buffer is widened on load
// (`kiln_bf16_to_f32(in0[i])`), every value is computed in float, and the
// result of an op of bf16 type is rounded to bf16 right away (kept in a float
// register), so a fused chain gives the same bits as one kernel per op.
//
//===----------------------------------------------------------------------===//

#include "codegen/PointwiseStatements.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

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
  // i1 true is 1 (its sign-extended value would be -1).
  APInt bits = value.getSplatValue<APInt>();
  int64_t v = bits.getBitWidth() == 1 ? int64_t(bits.getZExtValue())
                                      : bits.getSExtValue();
  return "((" + cElementType(value.getElementType()) + ")" +
         std::to_string(v) + "LL)";
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

LogicalResult emitPointwiseStatements(ArrayRef<Operation *> ops,
                                      StringRef index,
                                      function_ref<std::string(Value)> pointer,
                                      PointwiseStatements &out,
                                      function_ref<std::string(Value)> plainElement) {
  auto load = [&](Value v) -> std::string {
    auto it = out.vars.find(v);
    if (it != out.vars.end())
      return it->second;
    if (!llvm::is_contained(out.plainReads, v))
      out.plainReads.push_back(v);
    return loadElement(elementOf(v), plainElement
                                         ? plainElement(v)
                                         : pointer(v) + "[" + index.str() + "]");
  };
  for (Operation *op : ops) {
    if (op->getNumResults() != 1)
      return op->emitError() << "is not a pointwise op";
    Value result = op->getResult(0);
    Type element = elementOf(result);
    std::string type = computeType(element);
    std::string expr;
    if (auto bcast = dyn_cast<k::BroadcastOp>(op)) {
      Value input = op->getOperand(0);
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
      if (out.vars.count(input)) {
        if (shapeOf(input) != shapeOf(result))
          return op->emitError()
                 << "cannot broadcast a value computed in the same kernel";
        expr = out.vars[input];
      } else {
        out.usesIndex = true;
        expr = loadElement(elementOf(input),
                           pointer(input) + "[" +
                               broadcastIndex(index, shapeOf(input),
                                              shapeOf(result),
                                              dims.asArrayRef()) +
                               "]");
      }
    } else if (isSplatConstant(op)) {
      expr = splatLiteral(op);
    } else if (isa<k::IotaOp>(op)) {
      out.usesIndex = true;
      expr = "(" + type + ")" + index.str();
      if (element.isBF16())
        expr = roundToBf16(expr);
    } else if (isa<k::CausalMaskOp>(op)) {
      // Element (r, c) of the trailing [T, S] matrix is masked when
      // c > r + (S - T).
      ArrayRef<int64_t> shape = shapeOf(result);
      if (shape.size() < 2)
        return op->emitError() << "causal_mask needs rank >= 2";
      int64_t t = shape[shape.size() - 2], s = shape.back();
      double fill = op->getAttrOfType<FloatAttr>("fill").getValueAsDouble();
      out.usesIndex = true;
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
      // Computed in float; a bf16 result is rounded once, here (a convert's
      // expression already is its rounding).
      if (element.isBF16() && !isa<k::ConvertOp>(op))
        expr = roundToBf16(expr);
    }
    std::string var = "v" + std::to_string(out.vars.size());
    out.lines.push_back("const " + type + " " + var + " = " + expr + "; // " +
                        op->getName().getStringRef().str());
    out.vars[result] = var;
  }
  return success();
}

} // namespace kiln
