//===- MLIRGenAttention.cpp - Attention nodes to kiln.attention ------------===//
//
// Each ScalarExpr becomes scalar arith/math ops in the region: Float is f32,
// Int is i64 (the index block arguments are cast once per use), Bool is i1;
// a capture read casts its i64 indices to index and extends an i32 element
// to i64.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGenAttention.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
namespace kd = mlir::kiln;

namespace kiln {
namespace {

class RegionBuilder {
public:
  RegionBuilder(OpBuilder &b, Location loc, Block &block, bool isScore)
      : b(b), loc(loc), block(block), firstIndex(isScore ? 1 : 0),
        firstCapture(isScore ? 5 : 4) {}

  Value emit(const ScalarExpr &e) {
    using K = ScalarExpr::Kind;
    using T = ScalarExpr::Type;
    Type i64 = b.getI64Type(), f32 = b.getF32Type();
    switch (e.kind) {
    case K::Var:
      if (e.var == 0)
        return block.getArgument(0);
      return b.create<arith::IndexCastOp>(
          loc, i64, block.getArgument(firstIndex + e.var - 1));
    case K::Const:
      if (e.type == T::Float)
        return b.create<arith::ConstantOp>(
            loc, b.getF32FloatAttr((float)e.value));
      return b.create<arith::ConstantOp>(
          loc, b.getI64IntegerAttr((int64_t)e.value));
    case K::Capture: {
      SmallVector<Value> indices;
      for (const auto &index : e.operands)
        indices.push_back(
            b.create<arith::IndexCastOp>(loc, b.getIndexType(), emit(*index)));
      Value element = b.create<tensor::ExtractOp>(
          loc, block.getArgument(firstCapture + e.capture), indices);
      if (e.type == T::Int && element.getType() != i64)
        element = b.create<arith::ExtSIOp>(loc, i64, element);
      return element;
    }
    case K::Unary: {
      Value x = emit(*e.operands[0]);
      if (e.op == '!')
        return b.create<arith::XOrIOp>(
            loc, x, b.create<arith::ConstantOp>(loc, b.getBoolAttr(true)));
      if (e.type == T::Float)
        return b.create<arith::NegFOp>(loc, x);
      return b.create<arith::SubIOp>(
          loc, b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0)), x);
    }
    case K::Binary:
      return emitBinary(e);
    case K::Call:
      return emitCall(e, f32);
    }
    return Value();
  }

private:
  Value emitBinary(const ScalarExpr &e) {
    // x ** 2 is one multiply, as kiln.square outside regions: powf costs
    // tens of instructions per pair (a distance bias squares two per pair).
    const ScalarExpr &power = *e.operands[1];
    if (e.op == '^' && power.kind == ScalarExpr::Kind::Const &&
        power.value == 2.0) {
      Value x = emit(*e.operands[0]);
      return b.create<arith::MulFOp>(loc, x, x);
    }
    Value l = emit(*e.operands[0]), r = emit(power);
    bool isFloat = isa<FloatType>(l.getType());
    switch (e.op) {
    case '+':
      return isFloat ? b.create<arith::AddFOp>(loc, l, r).getResult()
                     : b.create<arith::AddIOp>(loc, l, r).getResult();
    case '-':
      return isFloat ? b.create<arith::SubFOp>(loc, l, r).getResult()
                     : b.create<arith::SubIOp>(loc, l, r).getResult();
    case '*':
      return isFloat ? b.create<arith::MulFOp>(loc, l, r).getResult()
                     : b.create<arith::MulIOp>(loc, l, r).getResult();
    case '/':
      return b.create<arith::DivFOp>(loc, l, r);
    case '^':
      return b.create<math::PowFOp>(loc, l, r);
    case '&':
      return b.create<arith::AndIOp>(loc, l, r);
    case '|':
      return b.create<arith::OrIOp>(loc, l, r);
    default:
      break;
    }
    // Comparisons; ordered for floats (false on NaN) except '!='.
    using FP = arith::CmpFPredicate;
    using IP = arith::CmpIPredicate;
    FP fp = FP::OEQ;
    IP ip = IP::eq;
    switch (e.op) {
    case '<': fp = FP::OLT; ip = IP::slt; break;
    case 'l': fp = FP::OLE; ip = IP::sle; break;
    case '>': fp = FP::OGT; ip = IP::sgt; break;
    case 'g': fp = FP::OGE; ip = IP::sge; break;
    case 'e': fp = FP::OEQ; ip = IP::eq; break;
    case 'n': fp = FP::UNE; ip = IP::ne; break;
    }
    if (isFloat)
      return b.create<arith::CmpFOp>(loc, fp, l, r);
    return b.create<arith::CmpIOp>(loc, ip, l, r);
  }

  Value emitCall(const ScalarExpr &e, Type f32) {
    SmallVector<Value> args;
    for (const auto &operand : e.operands)
      args.push_back(emit(*operand));
    const std::string &fn = e.fn;
    bool isFloat = e.type == ScalarExpr::Type::Float;
    if (fn == "float")
      return b.create<arith::SIToFPOp>(loc, f32, args[0]);
    if (fn == "exp")
      return b.create<math::ExpOp>(loc, args[0]);
    if (fn == "log")
      return b.create<math::LogOp>(loc, args[0]);
    if (fn == "sqrt")
      return b.create<math::SqrtOp>(loc, args[0]);
    if (fn == "tanh")
      return b.create<math::TanhOp>(loc, args[0]);
    if (fn == "abs")
      return isFloat ? b.create<math::AbsFOp>(loc, args[0]).getResult()
                     : b.create<math::AbsIOp>(loc, args[0]).getResult();
    if (fn == "min")
      return isFloat
                 ? b.create<arith::MinimumFOp>(loc, args[0], args[1])
                       .getResult()
                 : b.create<arith::MinSIOp>(loc, args[0], args[1]).getResult();
    if (fn == "max")
      return isFloat
                 ? b.create<arith::MaximumFOp>(loc, args[0], args[1])
                       .getResult()
                 : b.create<arith::MaxSIOp>(loc, args[0], args[1]).getResult();
    // where(c, x, y)
    return b.create<arith::SelectOp>(loc, args[0], args[1], args[2]);
  }

  OpBuilder &b;
  Location loc;
  Block &block;
  unsigned firstIndex, firstCapture;
};

/// Creates the block of `region` (leading types, then one per capture) and
/// fills it with `expr`'s ops and the kiln.yield.
void buildRegion(OpBuilder &b, Location loc, Region &region,
                 const ScalarExpr &expr, bool isScore,
                 ArrayRef<Value> captures) {
  OpBuilder::InsertionGuard guard(b);
  SmallVector<Type> types;
  if (isScore)
    types.push_back(b.getF32Type());
  types.append(4, b.getIndexType());
  for (Value c : captures)
    types.push_back(c.getType());
  SmallVector<Location> locs(types.size(), loc);
  Block *block = b.createBlock(&region, {}, types, locs);
  RegionBuilder builder(b, loc, *block, isScore);
  Value result = builder.emit(expr);
  b.create<kd::YieldOp>(loc, ValueRange{result});
}

} // namespace

bool graphHasDropout(const TensorGraph &graph) {
  return llvm::any_of(graph.nodes, [](const Node &n) {
    return n.kind == NodeKind::Attention && n.attention->dropout > 0.0;
  });
}

Value emitAttentionOp(OpBuilder &b, Location loc, const Node &node,
                      ArrayRef<Value> operands, RankedTensorType outType,
                      Value dropoutRng) {
  SmallVector<Value> captures(operands.drop_front(3));
  // The RNG state is the last capture by the op's convention (KilnAttentionOps.td).
  if (node.attention->dropout > 0.0)
    captures.push_back(dropoutRng);
  auto lseType = RankedTensorType::get(outType.getShape().drop_back(),
                                       b.getF32Type());
  auto op = b.create<kd::AttentionOp>(
      loc, outType, lseType, operands[0], operands[1], operands[2], captures,
      b.getF32FloatAttr((float)node.value),
      // Unset (= 0) without dropout, so the op prints as before.
      node.attention->dropout > 0.0
          ? b.getF32FloatAttr((float)node.attention->dropout)
          : FloatAttr(),
      kd::AttentionLayoutAttr());
  if (node.attention->score)
    buildRegion(b, loc, op.getScore(), *node.attention->score, true, captures);
  if (node.attention->mask)
    buildRegion(b, loc, op.getMask(), *node.attention->mask, false, captures);
  return op.getOut();
}

} // namespace kiln
