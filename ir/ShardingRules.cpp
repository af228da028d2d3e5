//===- ShardingRules.cpp - Sharding rules of the kiln ops ------------------===//
//
// Every op's ShardingRuleOpInterface, attached as an external model so the
// rules of all ops read as one table (ir/Sharding.h says what a rule is).
// The rules cover the forward ops a model file produces: the partitioner
// runs before autodiff, so the backward is derived from the partitioned
// forward and needs no rules of its own.
//
//   elementwise, convert, cmp, select, sharding_constraint
//                      one pass-through factor per dimension
//   constant (splat)   pass-through (each rank makes its block)
//   matmul [..., M, K] @ [..., K, N]  batch, M, N pass through; K sums
//   reduce_sum         kept dims pass through; reduced dims sum
//   broadcast          operand dims follow the result dims they land in
//   transpose          the permutation
//   reshape            dims grouped into runs of equal element count; a
//                      run of one dim splitting into several (C -> H, D)
//                      maps the one dim to the major of the several, so a
//                      split C is a split H (contiguous blocks agree)
//   embedding          index dims and D pass through; the table's rows,
//                      split, are rewritten (each rank looks up the rows it
//                      holds, the others give 0, an all-reduce sums them)
//   layer/rms_norm, softmax      rows pass through; the normalized dim whole
//   causal_mask, rope  leading dims pass through; the [T, T] square / the
//                      positions and features whole
//   cross_entropy      rows are a mean; the vocabulary, split, is rewritten
//                      (Megatron's vocabulary-parallel cross-entropy)
//   attention          B and the heads (q's H, k's and v's KVH: one factor,
//                      so grouped-query groups stay on one rank) pass
//                      through; positions and features whole
//   slice, pad, concat the cut dim whole, the others pass through
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"
#include "ir/Sharding.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

using Dims = SmallVector<int64_t, 4>;

/// Factors for every dim of `type`, all of `kind`.
Dims addFactors(ShardingRule &rule, RankedTensorType type, FactorKind kind,
                StringRef why = "") {
  Dims dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    dims.push_back(rule.addFactor(kind, why.str()));
  return dims;
}

RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// One factor per dimension of a rank-`rank` tensor: Whole (`why`) where
/// `isWhole(d)`, pass-through elsewhere.
Dims addDimFactors(ShardingRule &rule, int64_t rank, StringRef why,
                   llvm::function_ref<bool(int64_t)> isWhole) {
  Dims dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(rule.addFactor(isWhole(d) ? FactorKind::Whole
                                             : FactorKind::PassThrough,
                                  why.str()));
  return dims;
}

/// Same-shape operands and results, dimension by dimension.
ShardingRule elementwiseRule(Operation *op) {
  ShardingRule rule;
  Dims dims = addFactors(rule, typeOf(op->getResult(0)), FactorKind::PassThrough);
  for (Value v : op->getOperands())
    rule.addOperand(typeOf(v).getRank() == (int64_t)dims.size() ? dims : Dims());
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.addResult(dims);
  return rule;
}

/// Every dimension a Whole factor, `why` says why.
ShardingRule wholeRule(Operation *op, StringRef why) {
  ShardingRule rule;
  for (Value v : op->getOperands())
    rule.addOperand(addFactors(rule, typeOf(v), FactorKind::Whole, why));
  for (Value v : op->getResults())
    rule.addResult(addFactors(rule, typeOf(v), FactorKind::Whole, why));
  return rule;
}

/// Rows (all dims but the last `whole`) pass through; the last `whole`
/// dims of the first operand and of every result of the same rank are
/// Whole. Further operands of rank `whole` (a norm's weight) map to those
/// dims; lower-rank results (a norm's mean, rstd) to the rows.
ShardingRule rowRule(Operation *op, int64_t whole, StringRef why) {
  ShardingRule rule;
  RankedTensorType x = typeOf(op->getOperand(0));
  Dims dims = addDimFactors(rule, x.getRank(), why, [&](int64_t d) {
    return d >= x.getRank() - whole;
  });
  // Other operands are weights over the normalized dims; other results are
  // per-row statistics (layer_norm's mean and rstd). Told apart by position,
  // not by rank: a [rows, C] input has both of rank 1 (mean [rows] was
  // given C's factor, and a row-split input left it whole on every rank).
  auto map = [&](RankedTensorType t, bool operand) -> Dims {
    if (t.getRank() == x.getRank())
      return dims;
    if (operand && t.getRank() == whole)
      return Dims(dims.end() - whole, dims.end());
    if (!operand && t.getRank() == x.getRank() - whole)
      return Dims(dims.begin(), dims.end() - whole);
    return Dims(t.getRank(), -1);
  };
  for (Value v : op->getOperands())
    rule.addOperand(map(typeOf(v), /*operand=*/true));
  for (Value v : op->getResults())
    rule.addResult(map(typeOf(v), /*operand=*/false));
  return rule;
}

ShardingRule matmulRule(MatmulOp op) {
  ShardingRule rule;
  RankedTensorType lhs = typeOf(op.getLhs()), rhs = typeOf(op.getRhs());
  int64_t batch = lhs.getRank() - 2;
  Dims batchDims;
  for (int64_t d = 0; d < batch; ++d)
    batchDims.push_back(rule.addFactor(FactorKind::PassThrough));
  int64_t m = rule.addFactor(FactorKind::PassThrough);
  int64_t k = rule.addFactor(FactorKind::Sum);
  int64_t n = rule.addFactor(FactorKind::PassThrough);
  Dims l = batchDims, r, out = batchDims;
  l.append(op.getTransposeLhs() ? Dims{k, m} : Dims{m, k});
  if (rhs.getRank() > 2)
    r = batchDims;
  r.append(op.getTransposeRhs() ? Dims{n, k} : Dims{k, n});
  out.append({m, n});
  rule.addOperand(l);
  rule.addOperand(r);
  rule.addResult(out);
  return rule;
}

ShardingRule broadcastRule(BroadcastOp op) {
  ShardingRule rule;
  RankedTensorType in = typeOf(op.getInput()), out = typeOf(op.getResult());
  Dims dims = addFactors(rule, out, FactorKind::PassThrough);
  Dims operand;
  for (auto [i, d] : llvm::enumerate(op.getDims()))
    operand.push_back(in.getDimSize(i) == out.getDimSize(d) ? dims[d] : -1);
  rule.addOperand(operand);
  rule.addResult(dims);
  return rule;
}

ShardingRule reduceSumRule(ReduceSumOp op) {
  ShardingRule rule;
  RankedTensorType in = typeOf(op.getInput());
  Dims operand, result;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    bool reduced = llvm::is_contained(op.getDims(), d);
    operand.push_back(rule.addFactor(reduced ? FactorKind::Sum
                                             : FactorKind::PassThrough));
    if (!reduced)
      result.push_back(operand.back());
  }
  rule.addOperand(operand);
  rule.addResult(result);
  return rule;
}

ShardingRule transposeRule(TransposeOp op) {
  ShardingRule rule;
  RankedTensorType in = typeOf(op.getInput());
  Dims operand = addFactors(rule, in, FactorKind::PassThrough), result;
  for (int64_t p : op.getPermutation())
    result.push_back(operand[p]);
  rule.addOperand(operand);
  rule.addResult(result);
  return rule;
}

/// Groups the dims of `a` and `b` into runs of equal element count; a run
/// of one dim on one side and several on the other maps the one to the
/// major of the several; any other run (or a size-1 dim) is Whole.
ShardingRule reshapeRule(ReshapeOp op) {
  ShardingRule rule;
  ArrayRef<int64_t> a = typeOf(op.getInput()).getShape();
  ArrayRef<int64_t> b = typeOf(op.getResult()).getShape();
  Dims in(a.size(), -1), out(b.size(), -1);
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    // Skip size-1 dims: they map to nothing.
    if (i < a.size() && a[i] == 1) {
      ++i;
      continue;
    }
    if (j < b.size() && b[j] == 1) {
      ++j;
      continue;
    }
    if (i == a.size() || j == b.size())
      break;
    size_t i0 = i, j0 = j;
    int64_t pa = a[i++], pb = b[j++];
    while (pa != pb) {
      if (pa < pb)
        pa *= a[i++];
      else
        pb *= b[j++];
    }
    if (i - i0 == 1 || j - j0 == 1) {
      // One dim on a side: it follows the major dim of the other side; the
      // other side's minor dims stay whole (a split of the one dim cuts
      // the major dim only).
      int64_t major = rule.addFactor(FactorKind::PassThrough);
      in[i0] = out[j0] = major;
      for (size_t k = i0 + 1; k < i; ++k)
        in[k] = rule.addFactor(FactorKind::Whole, "a dimension a reshape merges "
                                                  "below another");
      for (size_t k = j0 + 1; k < j; ++k)
        out[k] = rule.addFactor(FactorKind::Whole, "a dimension a reshape "
                                                   "splits off below another");
    } else {
      for (size_t k = i0; k < i; ++k)
        in[k] = rule.addFactor(FactorKind::Whole, "a dimension a reshape "
                                                  "regroups");
      for (size_t k = j0; k < j; ++k)
        out[k] = rule.addFactor(FactorKind::Whole, "a dimension a reshape "
                                                   "regroups");
    }
  }
  rule.addOperand(in);
  rule.addResult(out);
  return rule;
}

ShardingRule embeddingRule(EmbeddingOp op) {
  ShardingRule rule;
  RankedTensorType indices = typeOf(op.getIndices());
  int64_t rows = rule.addFactor(FactorKind::Rewritten);
  Dims idx = addFactors(rule, indices, FactorKind::PassThrough);
  int64_t d = rule.addFactor(FactorKind::PassThrough);
  rule.addOperand({rows, d});
  rule.addOperand(idx);
  Dims out = idx;
  out.push_back(d);
  rule.addResult(out);
  return rule;
}

ShardingRule crossEntropyRule(CrossEntropyOp op) {
  ShardingRule rule;
  RankedTensorType logits = typeOf(op.getLogits());
  Dims rows;
  for (int64_t d = 0; d + 1 < logits.getRank(); ++d)
    rows.push_back(rule.addFactor(FactorKind::Mean));
  Dims l = rows;
  l.push_back(rule.addFactor(FactorKind::Rewritten));
  rule.addOperand(l);
  rule.addOperand(rows);
  rule.addResult({});
  return rule;
}

/// q [B, H, T, D], k [B, KVH, S, D], v [B, KVH, S, Dv] -> out [B, H, T, Dv],
/// lse [B, H, T]; captures whole.
ShardingRule attentionRule(AttentionOp op) {
  ShardingRule rule;
  int64_t b = rule.addFactor(FactorKind::PassThrough);
  int64_t h = rule.addFactor(FactorKind::PassThrough);
  const char *why = "whole rows of scores over every query and key";
  int64_t t = rule.addFactor(FactorKind::Whole, why);
  int64_t s = rule.addFactor(FactorKind::Whole, why);
  int64_t d = rule.addFactor(FactorKind::Whole, why);
  int64_t dv = rule.addFactor(FactorKind::Whole, why);
  rule.addOperand({b, h, t, d});
  rule.addOperand({b, h, s, d});
  rule.addOperand({b, h, s, dv});
  for (Value c : op.getCaptures())
    rule.addOperand(addFactors(rule, typeOf(c), FactorKind::Whole,
                               "every element of a tensor the score or mask "
                               "captures"));
  rule.addResult({b, h, t, dv});
  rule.addResult({b, h, t});
  return rule;
}

/// The cut dim whole, every other passing through (operands and result
/// of the same rank).
ShardingRule cutRule(Operation *op, int64_t cut, StringRef why) {
  ShardingRule rule;
  Dims dims = addDimFactors(rule, typeOf(op->getResult(0)).getRank(), why,
                            [&](int64_t d) { return d == cut; });
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    rule.addOperand(dims);
  rule.addResult(dims);
  return rule;
}

/// The external model: `Rule(op)` is the op's rule.
template <typename Op, ShardingRule (*Rule)(Op)>
struct Model : ShardingRuleOpInterface::ExternalModel<Model<Op, Rule>, Op> {
  ShardingRule getShardingRule(Operation *op) const {
    return Rule(cast<Op>(op));
  }
};

template <typename Op> ShardingRule elementwiseOf(Op op) {
  return elementwiseRule(op);
}
ShardingRule constantRule(ConstantOp op) {
  if (op.getValue().isSplat()) {
    ShardingRule rule;
    rule.addResult(addFactors(rule, typeOf(op.getResult()),
                              FactorKind::PassThrough));
    return rule;
  }
  return wholeRule(op, "every element of a constant that is not a splat");
}
ShardingRule iotaRule(IotaOp op) {
  return wholeRule(op, "the whole range it counts");
}
ShardingRule layerNormRule(LayerNormOp op) {
  return rowRule(op, 1, "the whole row it normalizes");
}
ShardingRule rmsNormRule(RmsNormOp op) {
  return rowRule(op, 1, "the whole row it normalizes");
}
ShardingRule softmaxRule(SoftmaxOp op) {
  return rowRule(op, 1, "the whole row it normalizes");
}
ShardingRule causalMaskRule(CausalMaskOp op) {
  return rowRule(op, 2, "the whole [T, T] square it masks");
}
ShardingRule ropeRule(RopeOp op) {
  return rowRule(op, 2, "every position and feature pair it rotates");
}
ShardingRule sliceRule(SliceOp op) {
  return cutRule(op, op.getDim(), "the whole dimension it slices");
}
ShardingRule padRule(PadOp op) {
  return cutRule(op, op.getDim(), "the whole dimension it pads");
}
ShardingRule concatRule(ConcatOp op) {
  return cutRule(op, op.getDim(), "the whole dimension it joins along");
}

template <typename... Ops> void attachElementwise(MLIRContext *ctx) {
  (Ops::template attachInterface<Model<Ops, elementwiseOf<Ops>>>(*ctx), ...);
}

} // namespace

void mlir::kiln::registerShardingRules(MLIRContext *ctx) {
  attachElementwise<AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp,
                    TanhOp, SqrtOp, SigmoidOp, SiluOp, ReluOp, SinOp, CosOp,
                    SquareOp, GeluOp, ConvertOp, CmpOp, SelectOp,
                    ShardingConstraintOp>(ctx);
  ConstantOp::attachInterface<Model<ConstantOp, constantRule>>(*ctx);
  IotaOp::attachInterface<Model<IotaOp, iotaRule>>(*ctx);
  MatmulOp::attachInterface<Model<MatmulOp, matmulRule>>(*ctx);
  EmbeddingOp::attachInterface<Model<EmbeddingOp, embeddingRule>>(*ctx);
  LayerNormOp::attachInterface<Model<LayerNormOp, layerNormRule>>(*ctx);
  RmsNormOp::attachInterface<Model<RmsNormOp, rmsNormRule>>(*ctx);
  SoftmaxOp::attachInterface<Model<SoftmaxOp, softmaxRule>>(*ctx);
  CausalMaskOp::attachInterface<Model<CausalMaskOp, causalMaskRule>>(*ctx);
  RopeOp::attachInterface<Model<RopeOp, ropeRule>>(*ctx);
  BroadcastOp::attachInterface<Model<BroadcastOp, broadcastRule>>(*ctx);
  ReduceSumOp::attachInterface<Model<ReduceSumOp, reduceSumRule>>(*ctx);
  ReshapeOp::attachInterface<Model<ReshapeOp, reshapeRule>>(*ctx);
  TransposeOp::attachInterface<Model<TransposeOp, transposeRule>>(*ctx);
  SliceOp::attachInterface<Model<SliceOp, sliceRule>>(*ctx);
  PadOp::attachInterface<Model<PadOp, padRule>>(*ctx);
  ConcatOp::attachInterface<Model<ConcatOp, concatRule>>(*ctx);
  CrossEntropyOp::attachInterface<Model<CrossEntropyOp, crossEntropyRule>>(*ctx);
  AttentionOp::attachInterface<Model<AttentionOp, attentionRule>>(*ctx);
}
