//===- KilnVJP.cpp - Vector-Jacobian products of kiln ops -----------------===//
//
// DifferentiableOpInterface::buildVJP for every differentiable kiln op. Each
// rule is written with kiln ops only, so the backward graph goes through the
// same passes and codegen as the forward graph. Conventions (see
// KilnInterfaces.td):
//   - resultGrads[i] is null when result i is unused: no cotangent flows.
//   - One Value per operand is returned; null for non-differentiable
//     operands (integer tensors: indices, targets, iota arithmetic).
//   - Cotangents have exactly the type of their operand.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mlir::kiln;

using Grads = FailureOr<SmallVector<Value>>;

static RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

static bool isFloatTensor(Value v) {
  return llvm::isa<FloatType>(tensorType(v).getElementType());
}

/// No cotangent for any operand of `op`.
static SmallVector<Value> noGrads(Operation *op) {
  return SmallVector<Value>(op->getNumOperands(), Value());
}

/// The cotangent of a single-result op, or null when nothing flows back
/// (result unused, or an integer result that carries no derivative).
static Value singleResultGrad(Operation *op, ArrayRef<Value> resultGrads) {
  assert(resultGrads.size() == op->getNumResults() && "one grad per result");
  if (resultGrads.empty() || !resultGrads[0] ||
      !isFloatTensor(op->getResult(0)))
    return {};
  return resultGrads[0];
}

/// [..., a, b] -> [..., b, a]
static SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// d(l + r) = (g, g)
Grads AddOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{g, g};
}

// d(l - r) = (g, -g)
Grads SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{g, b.create<NegOp>(getLoc(), g)};
}

// d(l * r) = (g * r, g * l)
Grads MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  return SmallVector<Value>{b.create<MulOp>(loc, g, getRhs()),
                            b.create<MulOp>(loc, g, getLhs())};
}

// d(l / r) = (g / r, -g * l / r^2) and g * l / r^2 = (g / r) * out.
Grads DivOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  Value dLhs = b.create<DivOp>(loc, g, getRhs());
  Value dRhs =
      b.create<NegOp>(loc, b.create<MulOp>(loc, dLhs, getResult()));
  return SmallVector<Value>{dLhs, dRhs};
}

// d(x ** y) = (g * y * x ** (y - 1), g * log(x) * x ** y)
Grads PowOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  Value x = getLhs(), y = getRhs();
  Value one = createSplatConstant(
      b, loc, llvm::cast<RankedTensorType>(y.getType()), 1.0);
  Value dLhs = b.create<MulOp>(
      loc, b.create<MulOp>(loc, g, y),
      b.create<PowOp>(loc, x, b.create<SubOp>(loc, y, one)));
  Value dRhs = b.create<MulOp>(
      loc, b.create<MulOp>(loc, g, b.create<LogOp>(loc, x)), getResult());
  return SmallVector<Value>{dLhs, dRhs};
}

// d(-x) = -g
Grads NegOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{b.create<NegOp>(getLoc(), g)};
}

// d op(x) = the op's derivative formula of (x, g), as one elementwise op.
FailureOr<SmallVector<Value>> mlir::kiln::buildFormulaVJP(Operation *op, OpBuilder &b,
                                                          ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(op, resultGrads);
  if (!g)
    return noGrads(op);
  return SmallVector<Value>{b.create<ElementwiseGradOp>(
      op->getLoc(), op->getOperand(0), g, op->getName().getStringRef())};
}

// d exp(x) = g * exp(x), reusing the forward result.
Grads ExpOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{b.create<MulOp>(getLoc(), g, getResult())};
}

// d log(x) = g / x
Grads LogOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{b.create<DivOp>(getLoc(), g, getInput())};
}

// d tanh(x) = g * (1 - y^2) with y = tanh(x)
Grads TanhOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  Value y = getResult();
  Value one = createSplatConstant(b, loc, getType(), 1.0);
  Value dydx = b.create<SubOp>(loc, one, b.create<MulOp>(loc, y, y));
  return SmallVector<Value>{b.create<MulOp>(loc, g, dydx)};
}

// d sqrt(x) = g / (2 y) with y = sqrt(x)
Grads SqrtOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  Value two = createSplatConstant(b, loc, getType(), 2.0);
  Value twoY = b.create<MulOp>(loc, two, getResult());
  return SmallVector<Value>{b.create<DivOp>(loc, g, twoY)};
}

// d gelu(x) = gelu_grad(x, g)
Grads GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{b.create<GeluGradOp>(getLoc(), getInput(), g)};
}

// d convert(x) = convert(g) back to x's type
// Only float -> float converts carry a gradient: an integer has no
// derivative, and float -> int is piecewise constant (derivative 0).
Grads ConvertOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g || !isFloatTensor(getInput()))
    return noGrads(*this);
  return SmallVector<Value>{
      b.create<ConvertOp>(getLoc(), getInput().getType(), g)};
}

// A comparison is piecewise constant: no gradient for either side.
Grads CmpOp::buildVJP(OpBuilder &, ArrayRef<Value>) { return noGrads(*this); }

// d select(c, a, b) = (none, select(c, g, 0), select(c, 0, g)).
Grads SelectOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  auto type = tensorType(g);
  Value zero = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(
               type, b.getZeroAttr(type.getElementType())));
  return SmallVector<Value>{
      Value(), b.create<SelectOp>(loc, getCondition(), g, zero),
      b.create<SelectOp>(loc, getCondition(), zero, g)};
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

// broadcast: sum g over the result dims that did not come from the input and
// over the input's size-1 dims that were expanded, in one reduce_sum, then
// reshape to the input type (which restores the size-1 dims).
Grads BroadcastOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Location loc = getLoc();
  RankedTensorType input = getInput().getType(), result = getType();
  ArrayRef<int64_t> dims = getDims();
  SmallVector<int64_t> reduced;
  for (int64_t d = 0; d < result.getRank(); ++d) {
    const auto *it = llvm::find(dims, d);
    if (it == dims.end()) {
      reduced.push_back(d); // a new dimension
      continue;
    }
    int64_t i = it - dims.begin();
    if (input.getDimSize(i) == 1 && result.getDimSize(d) != 1)
      reduced.push_back(d); // an expanded size-1 dimension
  }
  Value sum = g;
  if (!reduced.empty())
    sum = b.create<ReduceSumOp>(loc, g, reduced);
  if (sum.getType() != input)
    sum = b.create<ReshapeOp>(loc, input, sum);
  return SmallVector<Value>{sum};
}

// reduce_sum: every summed element receives g of its row; broadcast g back
// along the reduced dims (the kept dims map to themselves).
Grads ReduceSumOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  RankedTensorType input = getInput().getType();
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (!llvm::is_contained(getDims(), d))
      kept.push_back(d);
  return SmallVector<Value>{
      b.create<BroadcastOp>(getLoc(), input, g, kept)};
}

// reshape: reshape g back.
Grads ReshapeOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{
      b.create<ReshapeOp>(getLoc(), getInput().getType(), g)};
}

// transpose by p: transpose g by p^-1 (inv[p[i]] = i).
Grads TransposeOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return SmallVector<Value>{b.create<TransposeOp>(getLoc(), g, inverse)};
}

// slice [start, start + n) of dim: the gradient padded with zeros back to
// the input's size.
Grads SliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  int64_t dim = getDim(), start = getStart();
  int64_t after = getInput().getType().getDimSize(dim) - start -
                  getType().getDimSize(dim);
  return SmallVector<Value>{b.create<PadOp>(getLoc(), g, dim, start, after)};
}

// pad: the gradient of the input's own range (the zeros have no input).
Grads PadOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  int64_t dim = getDim(), before = getBefore();
  return SmallVector<Value>{b.create<SliceOp>(
      getLoc(), g, dim, before,
      before + getInput().getType().getDimSize(dim))};
}

// concat: each input gets its own range of the gradient.
Grads ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  SmallVector<Value> grads;
  int64_t dim = getDim(), offset = 0;
  for (Value in : getInputs()) {
    int64_t size = llvm::cast<RankedTensorType>(in.getType()).getDimSize(dim);
    grads.push_back(b.create<SliceOp>(getLoc(), g, dim, offset, offset + size));
    offset += size;
  }
  return grads;
}

// linear_cross_entropy: its grad op, chunked the same way.
Grads LinearCrossEntropyOp::buildVJP(OpBuilder &b,
                                     ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  auto grad = b.create<LinearCrossEntropyGradOp>(
      getLoc(), getX(), getW(), getTargets(), g, getChunkRows(),
      getValidClassesAttr());
  return SmallVector<Value>{grad.getXGrad(), grad.getWGrad(), Value()};
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

// C = op(A) @ op(B), op = optional transpose of the last two dims, G = dC.
//   dop(A) = G @ op(B)^T          dop(B) = op(A)^T @ G
// hence, folding the transposes into the flags:
//   dA = matmul(G, B, false, !tb)         if !ta   [..., M, K]
//   dA = matmul(B, G, tb, true)           if ta    [..., K, M]
//   dB = matmul(A, G, !ta, false)         if !tb   [..., K, N]
//   dB = matmul(G, A, true, ta)           if tb    [..., N, K]
// A rank-2 B shared over the batch gets the sum over the batch: op(A) and G
// are flattened to [B*M, K] and [B*M, N] so one 2-D matmul does the sum.
Grads MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  // Mixed precision rewrites GEMM operands after autodiff (the pipeline's
  // order); a mixed-type matmul has no VJP.
  if (getType().getElementType() != getLhs().getType().getElementType())
    return emitOpError() << "has no VJP with operands of another element "
                            "type than its result (run autodiff before "
                            "--kiln-mixed-precision)";
  Location loc = getLoc();
  Value lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  RankedTensorType lhsType = getLhs().getType(), rhsType = getRhs().getType();
  int64_t rank = lhsType.getRank();
  bool sharedRhs = rhsType.getRank() == 2 && rank > 2;

  Value dLhs, dRhs;
  if (!ta) {
    dLhs = b.create<MatmulOp>(loc, g, rhs, false, !tb);
  } else if (!sharedRhs) {
    dLhs = b.create<MatmulOp>(loc, rhs, g, tb, true);
  } else {
    // A rank-2 lhs with a batched rhs is not a valid matmul; compute
    // dop(A) = G @ op(B)^T [..., M, K] and transpose it to [..., K, M].
    Value dOpLhs = b.create<MatmulOp>(loc, g, rhs, false, !tb);
    dLhs = b.create<TransposeOp>(loc, dOpLhs, swapLastTwo(rank));
  }

  if (!sharedRhs) {
    dRhs = tb ? b.create<MatmulOp>(loc, g, lhs, true, ta).getResult()
              : b.create<MatmulOp>(loc, lhs, g, !ta, false).getResult();
  } else {
    // op(A) [..., M, K] -> [B*M, K]; G [..., M, N] -> [B*M, N]
    Value opLhs = ta ? b.create<TransposeOp>(loc, lhs, swapLastTwo(rank))
                           .getResult()
                     : lhs;
    RankedTensorType opLhsType = tensorType(opLhs), gType = tensorType(g);
    int64_t rows = opLhsType.getNumElements() / opLhsType.getShape().back();
    Value lhs2d = b.create<ReshapeOp>(
        loc,
        RankedTensorType::get({rows, opLhsType.getShape().back()},
                              opLhsType.getElementType()),
        opLhs);
    Value g2d = b.create<ReshapeOp>(
        loc,
        RankedTensorType::get({rows, gType.getShape().back()},
                              gType.getElementType()),
        g);
    // [K, N] = lhs2dᵀ @ g2d, or [N, K] = g2dᵀ @ lhs2d
    dRhs = tb ? b.create<MatmulOp>(loc, g2d, lhs2d, true, false).getResult()
              : b.create<MatmulOp>(loc, lhs2d, g2d, true, false).getResult();
  }
  return SmallVector<Value>{dLhs, dRhs};
}

//===----------------------------------------------------------------------===//
// Embedding, normalisation, softmax, mask, loss
//===----------------------------------------------------------------------===//

// embedding: scatter-add g into a zero table; indices get no cotangent.
Grads EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  Value dTable = b.create<EmbeddingGradOp>(getLoc(), getTable().getType(),
                                           getIndices(), g);
  return SmallVector<Value>{dTable, Value()};
}

// layer_norm: layer_norm_grad with the forward mean and rstd. mean and rstd
// are saved statistics, not model outputs: a cotangent flowing into them is
// not supported.
Grads LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  assert(resultGrads.size() == 3 && "layer_norm has three results");
  if (resultGrads[1] || resultGrads[2])
    return emitOpError()
           << "cannot differentiate through the mean/rstd results";
  Value g = resultGrads[0];
  if (!g)
    return noGrads(*this);
  auto grad = b.create<LayerNormGradOp>(getLoc(), getInput(), getWeight(),
                                        getMean(), getRstd(), g);
  return SmallVector<Value>{grad.getInputGrad(), grad.getWeightGrad(),
                            grad.getBiasGrad()};
}

// rms_norm: rms_norm_grad with the forward rstd (no cotangent may reach it).
Grads RmsNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  assert(resultGrads.size() == 2 && "rms_norm has two results");
  if (resultGrads[1])
    return emitOpError() << "cannot differentiate through the rstd result";
  Value g = resultGrads[0];
  if (!g)
    return noGrads(*this);
  auto grad = b.create<RmsNormGradOp>(getLoc(), getInput(), getWeight(), getRstd(), g);
  return SmallVector<Value>{grad.getInputGrad(), grad.getWeightGrad()};
}

// rope: a rotation per feature pair, so the cotangent is the transposed
// rotation of g: rope with the angle negated. (Autodiff runs before
// --kiln-fuse-rope gives a rope permutations or a cast.)
Grads RopeOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{
      b.create<RopeOp>(getLoc(), g.getType(), g, getInvFreqAttr(), !getInverse())};
}

// softmax: softmax_grad with the forward output.
Grads SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{
      b.create<SoftmaxGradOp>(getLoc(), getResult(), g)};
}

// causal_mask: masked positions are constants, so their cotangent is 0;
// the others pass g through.
Grads CausalMaskOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  return SmallVector<Value>{
      b.create<CausalMaskOp>(getLoc(), g, b.getF32FloatAttr(0.0f))};
}

// cross_entropy: cross_entropy_grad; targets get no cotangent.
Grads CrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  Value g = singleResultGrad(*this, resultGrads);
  if (!g)
    return noGrads(*this);
  // valid_classes carries over: padded classes get exactly zero gradient.
  Value dLogits = b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                               /*loss=*/Type(), getLogits(),
                                               getTargets(), g, getValidClassesAttr())
                      .getResult();
  return SmallVector<Value>{dLogits, Value()};
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// attention: one attention_grad with the same scale, dropout (the same RNG
// state capture, so the same mask), captures and regions
// (cloned), given the forward out and lse. It returns dq, dk, dv and one
// gradient per floating capture; integer captures get none. lse is a saved
// statistic like layer_norm's mean/rstd: a cotangent flowing into it is an
// error.
Grads AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  assert(resultGrads.size() == 2 && "attention has two results");
  if (resultGrads[1])
    return emitOpError() << "cannot differentiate through the lse result "
                            "(it is saved for the backward pass only)";
  Value g = resultGrads[0];
  if (!g)
    return noGrads(*this);
  SmallVector<Type> resultTypes{getQ().getType(), getK().getType(),
                                getV().getType()};
  for (Value capture : getCaptures())
    if (isFloatTensor(capture))
      resultTypes.push_back(capture.getType());
  auto grad = b.create<AttentionGradOp>(
      getLoc(), resultTypes, getQ(), getK(), getV(), getOut(), getLse(), g,
      getCaptures(), getScaleAttr(), getDropoutAttr(), getLayoutAttr());
  IRMapping mapping;
  getScore().cloneInto(&grad.getScore(), mapping);
  getMask().cloneInto(&grad.getMask(), mapping);

  SmallVector<Value> grads{grad.getDq(), grad.getDk(), grad.getDv()};
  auto captureGrads = grad.getCaptureGrads().begin();
  for (Value capture : getCaptures())
    grads.push_back(isFloatTensor(capture) ? *captureGrads++ : Value());
  return grads;
}
