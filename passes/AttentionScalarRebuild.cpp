//===- AttentionScalarRebuild.cpp - Tensors rebuilt as scalars ------------===//
//
// See AttentionScalarRebuild.h. Every tensor value is rebuilt at most once
// per index tuple (memoized), so a bias that reads iota(S) twice emits one
// index_cast.
//
//===----------------------------------------------------------------------===//

#include "passes/AttentionScalarRebuild.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::kiln {

std::optional<double> splatThroughBroadcasts(Value v) {
  while (auto broadcast = v.getDefiningOp<BroadcastOp>())
    v = broadcast.getInput();
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

static bool isNegInf(std::optional<double> x) {
  return x && std::isinf(*x) && *x < 0;
}

// A reshape that only adds or drops size-1 dims (see remap).
static bool isUnitDimReshape(Operation *op) {
  auto reshape = dyn_cast<ReshapeOp>(op);
  if (!reshape)
    return false;
  auto nonUnit = [](Type t) {
    SmallVector<int64_t> sizes;
    for (int64_t d : cast<RankedTensorType>(t).getShape())
      if (d != 1)
        sizes.push_back(d);
    return sizes;
  };
  return nonUnit(reshape.getInput().getType()) == nonUnit(reshape.getType());
}

// The select an additive mask is, seen through broadcasts and transposes.
static SelectOp additiveMaskSelect(Value bias) {
  Value v = bias;
  while (Operation *def = v.getDefiningOp()) {
    if (isa<BroadcastOp, TransposeOp>(def) || isUnitDimReshape(def)) {
      v = def->getOperand(0);
      continue;
    }
    auto select = dyn_cast<SelectOp>(def);
    if (!select)
      return {};
    std::optional<double> t = splatThroughBroadcasts(select.getTrueValue());
    std::optional<double> f = splatThroughBroadcasts(select.getFalseValue());
    if ((t == 0.0 && isNegInf(f)) || (isNegInf(t) && f == 0.0))
      return select;
    return {};
  }
  return {};
}

bool isAdditiveMask(Value bias) { return bool(additiveMaskSelect(bias)); }

// The elementwise kiln ops rebuilt as arith/math ops (the rest is captured).
static bool isRebuiltElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, ExpOp, LogOp, TanhOp, SqrtOp,
             CmpOp, SelectOp, ConvertOp>(op);
}

static bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast<ConstantOp>(op);
  if (!constant)
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  return dense && dense.isSplat();
}

std::string whyNotRebuildable(Value root) {
  llvm::DenseSet<Value> seen;
  SmallVector<Value> work{root};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    bool captured = !def || !(isa<BroadcastOp, TransposeOp, IotaOp>(def) ||
                              isUnitDimReshape(def) ||
                              isSplatConstant(def) ||
                              isRebuiltElementwise(def));
    if (captured) {
      if (cast<RankedTensorType>(v.getType()).getElementType().isInteger(1))
        return "the boolean tensor " +
               (def ? def->getName().getStringRef().str()
                    : std::string("argument")) +
               " cannot be captured by the attention regions";
      continue;
    }
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return "";
}

ScalarRebuilder::ScalarRebuilder(OpBuilder &builder, Block &block,
                                 unsigned numLeading,
                                 SmallVector<Value> &captures)
    : b_(builder), block_(block), numLeading_(numLeading),
      captures_(captures) {}

Value ScalarRebuilder::element(Value t, ArrayRef<Value> index) {
  Key key{t.getAsOpaquePointer(), {}};
  for (Value i : index)
    key.second.push_back(i.getAsOpaquePointer());
  auto it = memo_.find(key);
  if (it != memo_.end())
    return it->second;
  Value result = build(t, index);
  memo_[key] = result;
  return result;
}

Value ScalarRebuilder::indexConstant(int64_t value) {
  return b_.create<arith::ConstantIndexOp>(b_.getUnknownLoc(), value);
}

void ScalarRebuilder::addRemainingCaptureArguments() {
  while (block_.getNumArguments() < numLeading_ + captures_.size()) {
    Value t = captures_[block_.getNumArguments() - numLeading_];
    block_.addArgument(t.getType(), t.getLoc());
  }
}

Value ScalarRebuilder::capture(Value t, ArrayRef<Value> index) {
  auto it = llvm::find(captures_, t);
  if (it == captures_.end()) {
    captures_.push_back(t);
    it = captures_.end() - 1;
  }
  addRemainingCaptureArguments();
  BlockArgument arg =
      block_.getArgument(numLeading_ + (it - captures_.begin()));
  return b_.create<tensor::ExtractOp>(t.getLoc(), arg, index);
}

bool ScalarRebuilder::remap(Operation *def, ArrayRef<Value> index,
                            Value &input, SmallVector<Value> &inner) {
  if (auto broadcast = dyn_cast<BroadcastOp>(def)) {
    auto type = cast<RankedTensorType>(broadcast.getType());
    auto in = cast<RankedTensorType>(broadcast.getInput().getType());
    for (auto [d, resultDim] : llvm::enumerate(broadcast.getDims()))
      inner.push_back(in.getDimSize(d) == 1 && type.getDimSize(resultDim) != 1
                          ? indexConstant(0)
                          : index[resultDim]);
    input = broadcast.getInput();
    return true;
  }
  if (auto transpose = dyn_cast<TransposeOp>(def)) {
    inner.assign(index.size(), Value());
    for (auto [i, from] : llvm::enumerate(transpose.getPermutation()))
      inner[from] = index[i];
    input = transpose.getInput();
    return true;
  }
  // A reshape that only adds or drops size-1 dims (the language's
  // reshape(iota(n), [1, n])): the non-unit dims keep their indices.
  if (auto reshape = dyn_cast<ReshapeOp>(def)) {
    auto in = cast<RankedTensorType>(reshape.getInput().getType());
    auto out = cast<RankedTensorType>(reshape.getType());
    SmallVector<Value> nonUnit;
    SmallVector<int64_t> outSizes, inSizes;
    for (int64_t d = 0; d < out.getRank(); ++d)
      if (out.getDimSize(d) != 1) {
        nonUnit.push_back(index[d]);
        outSizes.push_back(out.getDimSize(d));
      }
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (in.getDimSize(d) != 1)
        inSizes.push_back(in.getDimSize(d));
    if (inSizes != outSizes)
      return false;
    size_t next = 0;
    for (int64_t d = 0; d < in.getRank(); ++d)
      inner.push_back(in.getDimSize(d) == 1 ? indexConstant(0)
                                            : nonUnit[next++]);
    input = reshape.getInput();
    return true;
  }
  return false;
}

Value ScalarRebuilder::keepOfAdditiveMask(Value bias, ArrayRef<Value> index) {
  Value v = bias;
  SmallVector<Value> at(index.begin(), index.end());
  while (Operation *def = v.getDefiningOp()) {
    Value input;
    SmallVector<Value> inner;
    if (!remap(def, at, input, inner))
      break;
    v = input;
    at = inner;
  }
  auto select = cast<SelectOp>(v.getDefiningOp());
  Value condition = element(select.getCondition(), at);
  if (splatThroughBroadcasts(select.getTrueValue()) == 0.0)
    return condition; // select(c, 0, -inf): keep where c
  Location loc = select.getLoc();
  Value one = b_.create<arith::ConstantOp>(loc, b_.getBoolAttr(true));
  return b_.create<arith::XOrIOp>(loc, condition, one);
}

// kiln.cmp's predicate as arith's: signed for integers, ordered for floats
// except ne (unordered: NaN != x is true, as kiln.cmp documents).
static Value compare(OpBuilder &b, Location loc, StringRef p, Value lhs,
                     Value rhs) {
  if (isa<FloatType>(lhs.getType())) {
    using P = arith::CmpFPredicate;
    P pred = p == "lt"   ? P::OLT
             : p == "le" ? P::OLE
             : p == "gt" ? P::OGT
             : p == "ge" ? P::OGE
             : p == "eq" ? P::OEQ
                         : P::UNE;
    return b.create<arith::CmpFOp>(loc, pred, lhs, rhs);
  }
  using P = arith::CmpIPredicate;
  P pred = p == "lt"   ? P::slt
           : p == "le" ? P::sle
           : p == "gt" ? P::sgt
           : p == "ge" ? P::sge
           : p == "eq" ? P::eq
                       : P::ne;
  return b.create<arith::CmpIOp>(loc, pred, lhs, rhs);
}

Value ScalarRebuilder::build(Value t, ArrayRef<Value> index) {
  Operation *def = t.getDefiningOp();
  auto type = cast<RankedTensorType>(t.getType());
  Type elementType = type.getElementType();
  Location loc = t.getLoc();
  if (!def)
    return capture(t, index);
  if (isSplatConstant(def)) {
    auto dense = cast<DenseElementsAttr>(cast<ConstantOp>(def).getValue());
    return b_.create<arith::ConstantOp>(
        loc, cast<TypedAttr>(dense.getSplatValue<Attribute>()));
  }
  if (isa<ConstantOp>(def))
    return capture(t, index);
  if (isa<IotaOp>(def)) // iota[n] = n
    return b_.create<arith::IndexCastOp>(loc, elementType, index[0]);
  Value input;
  SmallVector<Value> inner;
  if (remap(def, index, input, inner))
    return element(input, inner);
  auto operand = [&](unsigned i) {
    return element(def->getOperand(i), index);
  };
  bool isFloat = isa<FloatType>(elementType);
  // Operands are rebuilt in order (lhs first) before the op is created:
  // C++ leaves the order of evaluating call arguments open.
  auto binary = [&](auto floatOp, auto intOp) -> Value {
    Value lhs = operand(0);
    Value rhs = operand(1);
    if (isFloat)
      return b_.create<decltype(floatOp)>(loc, lhs, rhs);
    return b_.create<decltype(intOp)>(loc, lhs, rhs);
  };
  if (isa<AddOp>(def))
    return binary(arith::AddFOp(), arith::AddIOp());
  if (isa<SubOp>(def))
    return binary(arith::SubFOp(), arith::SubIOp());
  if (isa<MulOp>(def))
    return binary(arith::MulFOp(), arith::MulIOp());
  if (isa<DivOp>(def))
    return binary(arith::DivFOp(), arith::DivSIOp());
  if (isa<NegOp>(def) && isFloat)
    return b_.create<arith::NegFOp>(loc, operand(0));
  if (isa<ExpOp>(def))
    return b_.create<math::ExpOp>(loc, operand(0));
  if (isa<LogOp>(def))
    return b_.create<math::LogOp>(loc, operand(0));
  if (isa<TanhOp>(def))
    return b_.create<math::TanhOp>(loc, operand(0));
  if (isa<SqrtOp>(def))
    return b_.create<math::SqrtOp>(loc, operand(0));
  if (auto cmp = dyn_cast<CmpOp>(def)) {
    Value lhs = operand(0);
    Value rhs = operand(1);
    return compare(b_, loc, cmp.getPredicate(), lhs, rhs);
  }
  if (isa<SelectOp>(def)) {
    Value c = operand(0);
    Value t = operand(1);
    Value f = operand(2);
    return b_.create<arith::SelectOp>(loc, c, t, f);
  }
  if (auto convert = dyn_cast<ConvertOp>(def)) {
    Type from = convert.getInput().getType().getElementType();
    bool fromInt = isa<IntegerType>(from);
    // Regions compute in f32; other float results are captured as computed.
    if (fromInt && elementType.isF32())
      return b_.create<arith::SIToFPOp>(loc, elementType, operand(0));
    if (!fromInt && from.isF32() && isa<IntegerType>(elementType))
      return b_.create<arith::FPToSIOp>(loc, elementType, operand(0));
    if (fromInt && isa<IntegerType>(elementType))
      return elementType.getIntOrFloatBitWidth() >
                     from.getIntOrFloatBitWidth()
                 ? Value(b_.create<arith::ExtSIOp>(loc, elementType,
                                                   operand(0)))
                 : Value(b_.create<arith::TruncIOp>(loc, elementType,
                                                    operand(0)));
  }
  return capture(t, index);
}

} // namespace mlir::kiln
