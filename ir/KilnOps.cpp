//===- KilnOps.cpp - Ops of the kiln dialect ------------------------------===//
//
// Builders, verifiers and folders of the compute ops (constant, iota, matmul,
// embedding, normalisation, softmax, mask, loss, optimizer). The shape ops
// (broadcast, reduce_sum, reshape, transpose) are in KilnShapeOps.cpp.
// Verifiers print the offending types so a frontend bug is found from the
// message alone.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;

#include "ir/KilnInterfaces.cpp.inc"

/// `-> type` after an op's type list, printed only when the result type is
/// not `other` (the type it defaults to).
static ParseResult parseResultTypeIfOther(OpAsmParser &parser, Type other,
                                          Type &result) {
  result = other;
  if (succeeded(parser.parseOptionalArrow()))
    return parser.parseType(result);
  return success();
}
static void printResultTypeIfOther(OpAsmPrinter &printer, Operation *,
                                   Type other, Type result) {
  if (result != other)
    printer << " -> " << result;
}

#define GET_OP_CLASSES
#include "ir/KilnOps.cpp.inc"

Value mlir::kiln::createSplatConstant(OpBuilder &b, Location loc,
                                      RankedTensorType type, double value) {
  Type elt = type.getElementType();
  Attribute scalar;
  if (auto f = llvm::dyn_cast<FloatType>(elt))
    scalar = b.getFloatAttr(f, value);
  else
    scalar = b.getIntegerAttr(elt, static_cast<int64_t>(value));
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, scalar));
}

//===----------------------------------------------------------------------===//
// ConstantOp, IotaOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// ElementwiseGradOp
//===----------------------------------------------------------------------===//

namespace {
/// The interface of the registered op named `name`, or null.
ScalarFormulaOpInterface::Concept *formulaOf(MLIRContext *ctx, StringRef name) {
  std::optional<RegisteredOperationName> op = RegisteredOperationName::lookup(name, ctx);
  if (!op)
    return nullptr;
  return op->getInterface<ScalarFormulaOpInterface>();
}
} // namespace

StringRef ElementwiseGradOp::getDerivativeFormula() {
  ScalarFormulaOpInterface::Concept *formula = formulaOf(getContext(), getOp());
  return formula ? formula->getDerivativeFormula() : StringRef();
}

LogicalResult ElementwiseGradOp::verify() {
  if (!RegisteredOperationName::lookup(getOp(), getContext()))
    return emitOpError() << "'" << getOp() << "' is not a registered op";
  if (getDerivativeFormula().empty())
    return emitOpError() << "'" << getOp()
                         << "' declares no derivative formula (ScalarFormulaOpInterface)";
  return success();
}

LogicalResult IotaOp::verify() {
  RankedTensorType type = getType();
  if (type.getRank() != 1)
    return emitOpError() << "result must be rank 1, got " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The dimensions of a matmul after applying the transpose flags.
struct MatmulDims {
  SmallVector<int64_t> batch; // lhs batch dims
  int64_t m, k, rhsK, n;
};
} // namespace

/// Reads M, K, N and the batch dims; emits through `emitError` (may be null)
/// and returns failure when the ranks or batch dims do not fit the contract.
static FailureOr<MatmulDims>
getMatmulDims(RankedTensorType lhs, RankedTensorType rhs, bool transposeLhs,
              bool transposeRhs,
              function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](auto &&...parts) -> FailureOr<MatmulDims> {
    if (emitError)
      (emitError() << ... << parts);
    return failure();
  };
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  if (lr < 2)
    return fail("lhs must have rank >= 2, got ", lhs);
  if (rr != 2 && rr != lr)
    return fail("rhs must have rank 2 or the rank of lhs (", lr, "), got ",
                rhs);
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  MatmulDims d;
  d.batch.assign(ls.begin(), ls.end() - 2);
  if (rr == lr && !ArrayRef<int64_t>(rs).drop_back(2).equals(d.batch))
    return fail("batch dimensions of lhs ", lhs, " and rhs ", rhs,
                " differ");
  d.m = transposeLhs ? ls[lr - 1] : ls[lr - 2];
  d.k = transposeLhs ? ls[lr - 2] : ls[lr - 1];
  d.rhsK = transposeRhs ? rs[rr - 1] : rs[rr - 2];
  d.n = transposeRhs ? rs[rr - 2] : rs[rr - 1];
  if (d.k != d.rhsK)
    return fail("contracting dimensions differ: lhs ", lhs, " has K = ", d.k,
                ", rhs ", rhs, " has K = ", d.rhsK);
  return d;
}

RankedTensorType mlir::kiln::inferMatmulType(RankedTensorType lhs,
                                             RankedTensorType rhs,
                                             bool transposeLhs,
                                             bool transposeRhs) {
  FailureOr<MatmulDims> d =
      getMatmulDims(lhs, rhs, transposeLhs, transposeRhs, nullptr);
  if (failed(d))
    return {};
  SmallVector<int64_t> shape(d->batch);
  shape.append({d->m, d->n});
  return RankedTensorType::get(shape, lhs.getElementType());
}

void MatmulOp::build(OpBuilder &b, OperationState &state, Value lhs,
                     Value rhs, bool transposeLhs, bool transposeRhs) {
  Type type = inferMatmulType(llvm::cast<RankedTensorType>(lhs.getType()),
                              llvm::cast<RankedTensorType>(rhs.getType()),
                              transposeLhs, transposeRhs);
  assert(type && "invalid matmul operands");
  build(b, state, type, lhs, rhs, transposeLhs, transposeRhs);
}

//===----------------------------------------------------------------------===//
// ConvertOp
//===----------------------------------------------------------------------===//

// convert(x : T -> T) = x; convert(splat int) -> splat float and back.
OpFoldResult ConvertOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto input = llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput());
  if (!input)
    return {};
  Type from = input.getElementType(), to = getType().getElementType();
  if (llvm::isa<IntegerType>(from) && llvm::isa<FloatType>(to)) {
    APFloat value(llvm::cast<FloatType>(to).getFloatSemantics());
    value.convertFromAPInt(input.getSplatValue<APInt>(), /*IsSigned=*/true,
                           APFloat::rmNearestTiesToEven);
    return DenseElementsAttr::get(getType(), value);
  }
  if (llvm::isa<IntegerType>(from) && llvm::isa<IntegerType>(to))
    return DenseElementsAttr::get(
        getType(), input.getSplatValue<APInt>().sextOrTrunc(
                       to.getIntOrFloatBitWidth()));
  return {}; // float -> int of NaN/inf is undefined: left to run time
}

//===----------------------------------------------------------------------===//
// CmpOp / SelectOp
//===----------------------------------------------------------------------===//

void CmpOp::build(OpBuilder &b, OperationState &state, StringRef predicate,
                  Value lhs, Value rhs) {
  auto type = llvm::cast<RankedTensorType>(lhs.getType());
  build(b, state, type.clone(b.getI1Type()), b.getStringAttr(predicate), lhs,
        rhs);
}

// Folds a comparison of two splat constants to a splat i1.
OpFoldResult CmpOp::fold(FoldAdaptor adaptor) {
  auto lhs = llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getLhs());
  auto rhs = llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getRhs());
  if (!lhs || !rhs)
    return {};
  StringRef p = getPredicate();
  bool result;
  if (llvm::isa<FloatType>(lhs.getElementType())) {
    APFloat::cmpResult c = lhs.getSplatValue<APFloat>().compare(
        rhs.getSplatValue<APFloat>());
    if (c == APFloat::cmpUnordered)
      result = p == "ne";
    else
      result = (p == "lt" && c == APFloat::cmpLessThan) ||
               (p == "le" && c != APFloat::cmpGreaterThan) ||
               (p == "gt" && c == APFloat::cmpGreaterThan) ||
               (p == "ge" && c != APFloat::cmpLessThan) ||
               (p == "eq" && c == APFloat::cmpEqual) ||
               (p == "ne" && c != APFloat::cmpEqual);
  } else {
    APInt a = lhs.getSplatValue<APInt>(), b = rhs.getSplatValue<APInt>();
    result = (p == "lt" && a.slt(b)) || (p == "le" && a.sle(b)) ||
             (p == "gt" && a.sgt(b)) || (p == "ge" && a.sge(b)) ||
             (p == "eq" && a == b) || (p == "ne" && a != b);
  }
  return DenseElementsAttr::get(getType(), result);
}

// select(true, a, b) = a; select(false, a, b) = b; select(c, a, a) = a.
OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getTrueValue() == getFalseValue())
    return getTrueValue();
  auto condition =
      llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getCondition());
  if (!condition)
    return {};
  return condition.getSplatValue<bool>() ? getTrueValue() : getFalseValue();
}

LogicalResult MatmulOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  // bf16/f16 operands may produce f32 (fp32 accumulation and output).
  Type resultElement = getType().getElementType();
  if (lhs.getElementType() != rhs.getElementType() ||
      (lhs.getElementType() != resultElement && !resultElement.isF32()))
    return emitOpError() << "element types differ: " << lhs << ", " << rhs
                         << " -> " << getType();
  FailureOr<MatmulDims> d =
      getMatmulDims(lhs, rhs, getTransposeLhs(), getTransposeRhs(),
                    [&] { return emitOpError(); });
  if (failed(d))
    return failure();
  auto expected = llvm::cast<RankedTensorType>(inferMatmulType(
                      lhs, rhs, getTransposeLhs(), getTransposeRhs()))
                      .clone(resultElement);
  if (getType() != expected)
    return emitOpError() << "result type " << getType() << " should be "
                         << expected;
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp, EmbeddingGradOp
//===----------------------------------------------------------------------===//

/// indices [...] and rows of width D -> [..., D].
static RankedTensorType appendDim(RankedTensorType indices, int64_t d,
                                  Type elementType) {
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(d);
  return RankedTensorType::get(shape, elementType);
}

void EmbeddingOp::build(OpBuilder &b, OperationState &state, Value table,
                        Value indices) {
  auto tableType = llvm::cast<RankedTensorType>(table.getType());
  build(b, state,
        appendDim(llvm::cast<RankedTensorType>(indices.getType()),
                  tableType.getShape().back(), tableType.getElementType()),
        table, indices);
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = getTable().getType();
  if (table.getRank() != 2)
    return emitOpError() << "table must be rank 2 [V, D], got " << table;
  Type expected = appendDim(getIndices().getType(), table.getDimSize(1),
                            table.getElementType());
  if (getType() != expected)
    return emitOpError() << "result type " << getType() << " should be "
                         << expected;
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType result = getType(), grad = getGrad().getType();
  if (result.getRank() != 2)
    return emitOpError() << "result must be rank 2 [V, D], got " << result;
  Type expected = appendDim(getIndices().getType(), result.getDimSize(1),
                            result.getElementType());
  if (grad != expected)
    return emitOpError() << "grad type " << grad << " should be " << expected
                         << " (indices shape + [D])";
  if (getAcc() && getAcc().getType() != result)
    return emitOpError() << "acc type " << getAcc().getType()
                         << " should be the result's, " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormOp, LayerNormGradOp
//===----------------------------------------------------------------------===//

/// input [..., C] -> mean/rstd [...]
static RankedTensorType rowStatsType(RankedTensorType input) {
  return RankedTensorType::get(input.getShape().drop_back(),
                               input.getElementType());
}

/// Checks input [..., C] (rank >= 1) and a [C] per-channel tensor.
static LogicalResult verifyChannelParam(Operation *op, RankedTensorType input,
                                        RankedTensorType param,
                                        StringRef name) {
  if (input.getRank() < 1)
    return op->emitOpError() << "input must have rank >= 1, got " << input;
  auto expected = RankedTensorType::get({input.getShape().back()},
                                        input.getElementType());
  if (param != expected)
    return op->emitOpError() << name << " type " << param << " should be "
                             << expected;
  return success();
}

/// A norm's epsilon: finite and non-negative (-0.0 is zero, not negative;
/// NaN and infinity are never meaningful).
static LogicalResult verifyEpsilon(Operation *op, const llvm::APFloat &epsilon) {
  if (epsilon.isNegative() && !epsilon.isZero())
    return op->emitOpError() << "epsilon must be non-negative, got "
                             << formatShortestFloat(epsilon);
  if (!epsilon.isFinite())
    return op->emitOpError() << "epsilon must be finite, got "
                             << formatShortestFloat(epsilon);
  return success();
}

void LayerNormOp::build(OpBuilder &b, OperationState &state, Value input,
                        Value weight, Value bias, float epsilon) {
  auto inputType = llvm::cast<RankedTensorType>(input.getType());
  RankedTensorType stats = rowStatsType(inputType);
  build(b, state, inputType, stats, stats, input, weight, bias,
        b.getF32FloatAttr(epsilon));
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyChannelParam(*this, input, getWeight().getType(),
                                "weight")) ||
      failed(verifyChannelParam(*this, input, getBias().getType(), "bias")))
    return failure();
  if (getOutput().getType() != input)
    return emitOpError() << "output type " << getOutput().getType()
                         << " should be " << input;
  RankedTensorType stats = rowStatsType(input);
  if (getMean().getType() != stats || getRstd().getType() != stats)
    return emitOpError() << "mean/rstd types " << getMean().getType() << ", "
                         << getRstd().getType() << " should be " << stats;
  return verifyEpsilon(*this, getEpsilon());
}

void LayerNormGradOp::build(OpBuilder &b, OperationState &state, Value input,
                            Value weight, Value mean, Value rstd, Value grad) {
  build(b, state, input.getType(), weight.getType(), weight.getType(), input,
        weight, mean, rstd, grad);
}

LogicalResult LayerNormGradOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyChannelParam(*this, input, getWeight().getType(),
                                "weight")))
    return failure();
  RankedTensorType stats = rowStatsType(input);
  if (getMean().getType() != stats || getRstd().getType() != stats)
    return emitOpError() << "mean/rstd types " << getMean().getType() << ", "
                         << getRstd().getType() << " should be " << stats;
  if (getGrad().getType() != input || getInputGrad().getType() != input)
    return emitOpError() << "grad and input_grad types "
                         << getGrad().getType() << ", "
                         << getInputGrad().getType() << " should be " << input;
  if (getWeightGrad().getType() != getWeight().getType() ||
      getBiasGrad().getType() != getWeight().getType())
    return emitOpError() << "weight_grad/bias_grad types "
                         << getWeightGrad().getType() << ", "
                         << getBiasGrad().getType() << " should be "
                         << getWeight().getType();
  return success();
}

bool LayerNormOp::isNormalizationParameter(unsigned index) { return index >= 1; }
bool LayerNormGradOp::isNormalizationParameter(unsigned index) { return index == 1; }
bool LayerNormOp::hasElementEpilogue() { return true; }
bool LayerNormGradOp::hasElementEpilogue() { return true; }

//===----------------------------------------------------------------------===//
// RmsNormOp, RmsNormGradOp
//===----------------------------------------------------------------------===//

void RmsNormOp::build(OpBuilder &b, OperationState &state, Value input,
                      Value weight, float epsilon) {
  auto inputType = llvm::cast<RankedTensorType>(input.getType());
  build(b, state, inputType, rowStatsType(inputType), input, weight,
        b.getF32FloatAttr(epsilon));
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyChannelParam(*this, input, getWeight().getType(), "weight")))
    return failure();
  if (getOutput().getType() != input)
    return emitOpError() << "output type " << getOutput().getType()
                         << " should be " << input;
  RankedTensorType stats = rowStatsType(input);
  if (getRstd().getType() != stats)
    return emitOpError() << "rstd type " << getRstd().getType() << " should be "
                         << stats;
  return verifyEpsilon(*this, getEpsilon());
}

bool RmsNormOp::isNormalizationParameter(unsigned index) { return index == 1; }
bool RmsNormOp::hasElementEpilogue() { return true; }

void RmsNormGradOp::build(OpBuilder &b, OperationState &state, Value input,
                          Value weight, Value rstd, Value grad) {
  build(b, state, input.getType(), weight.getType(), input, weight, rstd, grad);
}

LogicalResult RmsNormGradOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyChannelParam(*this, input, getWeight().getType(), "weight")))
    return failure();
  if (getRstd().getType() != rowStatsType(input))
    return emitOpError() << "rstd type " << getRstd().getType() << " should be "
                         << rowStatsType(input);
  if (getGrad().getType() != input || getInputGrad().getType() != input)
    return emitOpError() << "grad and input_grad types " << getGrad().getType()
                         << ", " << getInputGrad().getType() << " should be "
                         << input;
  if (getWeightGrad().getType() != getWeight().getType())
    return emitOpError() << "weight_grad type " << getWeightGrad().getType()
                         << " should be " << getWeight().getType();
  return success();
}

bool RmsNormGradOp::isNormalizationParameter(unsigned index) { return index == 1; }
bool RmsNormGradOp::hasElementEpilogue() { return true; }

bool CrossEntropyOp::hasRowEpilogue() { return false; } // result 0 is the scalar loss

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> RopeOp::getRotatedShape() {
  RankedTensorType type = getInput().getType();
  if (std::optional<ArrayRef<int64_t>> perm = getInputPermutation())
    if (RankedTensorType rotated = inferTransposeType(type, *perm))
      return SmallVector<int64_t>(rotated.getShape());
  return SmallVector<int64_t>(type.getShape());
}

LogicalResult RopeOp::verify() {
  RankedTensorType type = getInput().getType();
  if (type.getRank() < 2)
    return emitOpError() << "input must have rank >= 2 ([..., T, D]), got " << type;
  // The rotation's type, then the result's: each permutation applied as
  // kiln.transpose would.
  RankedTensorType expected = type;
  for (auto [name, perm] : {std::pair{"input_permutation", getInputPermutation()},
                            std::pair{"result_permutation", getResultPermutation()}}) {
    if (!perm)
      continue;
    expected = inferTransposeType(expected, *perm);
    if (!expected || perm->back() != type.getRank() - 1)
      return emitOpError() << name << " must be a permutation of the " << type.getRank()
                           << " dims that keeps the last one in place";
  }
  RankedTensorType resultType = getResult().getType();
  if (resultType.getShape() != expected.getShape()) {
    InFlightDiagnostic diag = emitOpError() << "result shape must be [";
    llvm::interleaveComma(expected.getShape(), diag);
    return diag << "], got " << resultType;
  }
  int64_t d = type.getShape().back();
  if (d % 2 != 0)
    return emitOpError() << "the last dimension must be even (features pair i with i + "
                            "D/2), got "
                         << d;
  if (static_cast<int64_t>(getInvFreq().size()) != d / 2)
    return emitOpError() << "inv_freq has " << getInvFreq().size()
                         << " frequencies, expected D/2 = " << d / 2;
  for (float f : getInvFreq())
    if (!std::isfinite(f))
      return emitOpError() << "inv_freq must be finite, got " << f;
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxOp, SoftmaxGradOp, CausalMaskOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError() << "input must have rank >= 1, got " << getType();
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError() << "input must have rank >= 1, got " << getType();
  return success();
}

LogicalResult CausalMaskOp::verify() {
  RankedTensorType type = getType();
  if (type.getRank() < 2)
    return emitOpError() << "input must have rank >= 2 [..., T, S], got "
                         << type;
  return success();
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp, CrossEntropyGradOp
//===----------------------------------------------------------------------===//

/// logits [..., V] and targets [...].
static LogicalResult verifyLogitsTargets(Operation *op,
                                         RankedTensorType logits,
                                         RankedTensorType targets) {
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != targets.getShape())
    return op->emitOpError() << "logits " << logits << " must be targets "
                             << targets << " shape + [V]";
  return success();
}

void CrossEntropyOp::build(OpBuilder &b, OperationState &state, Value logits,
                           Value targets) {
  build(b, state, RankedTensorType::get({}, b.getF32Type()), logits, targets,
        /*valid_classes=*/nullptr);
}

/// valid_classes, when present, must keep at least one class and at most V.
static LogicalResult verifyValidClasses(Operation *op, RankedTensorType logits,
                                        std::optional<int64_t> validClasses) {
  if (!validClasses)
    return success();
  int64_t classes = logits.getShape().back();
  if (*validClasses < 1 || *validClasses > classes)
    return op->emitOpError() << "valid_classes = " << *validClasses
                             << " must be in [1, " << classes
                             << "] (the class dimension of " << logits << ")";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLogitsTargets(*this, getLogits().getType(),
                                 getTargets().getType())))
    return failure();
  return verifyValidClasses(*this, getLogits().getType(), getValidClasses());
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLogitsTargets(*this, getLogits().getType(),
                                 getTargets().getType())))
    return failure();
  auto logits = cast<RankedTensorType>(getLogits().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (logits.getShape() != result.getShape())
    return emitOpError() << "result shape " << result
                         << " differs from the logits' " << logits;
  return verifyValidClasses(*this, getLogits().getType(), getValidClasses());
}


//===----------------------------------------------------------------------===//
// LinearCrossEntropyOp, LinearCrossEntropyGradOp, MatmulAccumulateOp
//===----------------------------------------------------------------------===//

/// x [N, D], w [V, D] (same float type), targets [N], chunk_rows in [1, N],
/// valid_classes as on cross_entropy.
static LogicalResult verifyLinearCrossEntropy(Operation *op,
                                              RankedTensorType x,
                                              RankedTensorType w,
                                              RankedTensorType targets,
                                              int64_t chunkRows,
                                              std::optional<int64_t> valid) {
  if (x.getRank() != 2 || w.getRank() != 2 || targets.getRank() != 1 ||
      x.getDimSize(1) != w.getDimSize(1) ||
      x.getDimSize(0) != targets.getDimSize(0))
    return op->emitOpError() << "expects x [N, D], w [V, D] and targets [N], "
                                "got "
                             << x << ", " << w << " and " << targets;
  if (x.getElementType() != w.getElementType())
    return op->emitOpError() << "x and w must have one element type, got "
                             << x << " and " << w;
  if (chunkRows < 1 || chunkRows > x.getDimSize(0))
    return op->emitOpError() << "chunk_rows = " << chunkRows
                             << " must be in [1, " << x.getDimSize(0) << "]";
  auto logits = RankedTensorType::get({x.getDimSize(0), w.getDimSize(0)},
                                      x.getElementType());
  return verifyValidClasses(op, logits, valid);
}

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyLinearCrossEntropy(*this, getX().getType(), getW().getType(),
                                  getTargets().getType(), getChunkRows(),
                                  getValidClasses());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  return verifyLinearCrossEntropy(*this, getX().getType(), getW().getType(),
                                  getTargets().getType(), getChunkRows(),
                                  getValidClasses());
}

LogicalResult MatmulAccumulateOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2 ||
      lhs.getElementType() != rhs.getElementType())
    return emitOpError() << "expects 2-D operands of one element type, got "
                         << lhs << " and " << rhs;
  RankedTensorType product = inferMatmulType(lhs, rhs, getTransposeLhs(),
                                             getTransposeRhs());
  if (!product || product.getShape() != getAcc().getType().getShape())
    return emitOpError() << "the product of " << lhs << " and " << rhs
                         << " does not have the shape of acc "
                         << getAcc().getType();
  if (getType() != getAcc().getType())
    return emitOpError() << "result must have acc's type";
  return success();
}
