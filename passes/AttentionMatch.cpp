//===- AttentionMatch.cpp - softmax(q kᵀ * scale + bias) v -> attention ---===//
//
// --kiln-attention-match: a hand-written attention materializes the [B, H,
// T, S] scores and probabilities and runs three kernels over them; the same
// computation as one kiln.attention becomes a flash kernel that never stores
// them. This pass finds the hand-written form and rewrites it, so a model
// written with softmax(...) @ v gets the same kernel as one written with
// attention(...).
//
// Algorithm, per kiln.softmax (a candidate) in every function:
//  1. The probabilities: the softmax is rank 4 [B, H, T, S] in f32 and its
//     only use is the lhs of a kiln.matmul p @ v with v [B, H, S, Dv].
//  2. The score chain, walked back from the softmax input to a rank-4
//     kiln.matmul q @ kᵀ: every value on it has exactly one use (else the
//     [T, S] tensor is needed anyway), and every op is one of
//       kiln.mul / kiln.div by a splat   (the first, right after q @ kᵀ,
//                                          becomes the op's `scale`),
//       kiln.add / kiln.sub of a bias    (the chain is the lhs of sub),
//       kiln.causal_mask with fill -inf  (-> the mask region),
//       kiln.select(keep, scores, -inf)  (where(keep, s, -inf) -> mask;
//         or select(drop, -inf, scores)   the negation of drop),
//     where an add of a constant that is 0 on and below the diagonal
//     (j <= i + S - T) and -inf above it is the causal mask too, and an add
//     of an additive mask -- a select between splat 0 and -inf, seen
//     through broadcasts and transposes -- is a mask of its condition.
//     Between a mask and the softmax a splat factor must be positive (a
//     masked -inf must stay -inf). A bias or condition that would need a
//     boolean capture fails (captures hold numbers).
//  3. Any other op, or a value used twice, fails the candidate: the softmax
//     gets `kiln.not_attention = "<reason>"` (the report of kilnc
//     --dump-phases-to lists them with their model-file line) and nothing
//     changes.
//  4. Rewrite: k = transpose(kᵀ) (and q, v when the matmuls transpose
//     them); k and v written as repeated heads (reshape(broadcast(kv
//     [B, KVH, S, D] -> [B, KVH, G, S, D]) -> [B, H, S, D])) are replaced by
//     kv itself (grouped-query attention); then kiln.attention with the
//     scale and
//       - a score region replaying the chain on the scalar s: each bias is
//         rebuilt at (b, h, i, j) by AttentionScalarRebuild (iota -> the
//         index, broadcasts -> index remapping, transposes -> permutation,
//         splats, elementwise ops incl. cmp/select/convert -> arith/math);
//         anything else (an input, a parameter, a non-splat constant, a
//         computed tensor) becomes a capture read with tensor.extract at
//         its own indices, so a [H] slope or a [B] length is captured as it
//         is and the [T, S] bias is never formed;
//       - a mask region and-ing every keep condition: j <= i + (S - T) for
//         a causal mask, the rebuilt condition of each where / additive
//         mask.
//     p @ v's result is replaced by the attention output; the chain is
//     erased (the phase's canonicalizer removes the now-dead bias ops).
//
//===----------------------------------------------------------------------===//

#include "passes/AttentionReport.h"
#include "passes/AttentionScalarRebuild.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <map>
#include <string>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNATTENTIONMATCH
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

namespace mlir::kiln {
namespace {

// "kiln.add at model.kiln:12:9".
std::string describeOp(Operation *op) {
  return (op->getName().getStringRef() + " at " + modelLocation(op->getLoc()))
      .str();
}

bool isRank4(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 4;
}

// Whether `bias` ([B, H, T, S] like the scores) is a broadcast constant that
// is 0 where j <= i + (S - T) and -inf elsewhere: kiln.causal_mask written
// as a lower-triangular additive constant.
bool isCausalConstant(Value bias) {
  auto result = cast<RankedTensorType>(bias.getType());
  // Result dim of each dim of the value reached (through broadcasts).
  SmallVector<int64_t> dimOf = {0, 1, 2, 3};
  Value v = bias;
  while (auto broadcast = v.getDefiningOp<BroadcastOp>()) {
    SmallVector<int64_t> inner;
    for (int64_t d : broadcast.getDims())
      inner.push_back(dimOf[d]);
    dimOf = inner;
    v = broadcast.getInput();
  }
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return false;
  auto type = cast<RankedTensorType>(dense.getType());
  const int64_t t = result.getDimSize(2), s = result.getDimSize(3);
  int64_t iDim = -1, jDim = -1;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (dimOf[d] == 2 && type.getDimSize(d) == t)
      iDim = d;
    else if (dimOf[d] == 3 && type.getDimSize(d) == s)
      jDim = d;
    else if (type.getDimSize(d) != 1)
      return false; // varies along b or h: not one triangle
  }
  if (iDim < 0 || jDim < 0)
    return false;
  // Row-major walk: element e has index (e / stride) % size along each dim.
  SmallVector<int64_t> strides(type.getRank(), 1);
  for (int64_t d = type.getRank() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * type.getDimSize(d + 1);
  int64_t e = 0;
  for (APFloat value : dense.getValues<APFloat>()) {
    int64_t i = (e / strides[iDim]) % t, j = (e / strides[jDim]) % s;
    ++e;
    bool keep = j <= i + (s - t);
    if (keep ? !value.isZero() : !(value.isInfinity() && value.isNegative()))
      return false;
  }
  return true;
}

// A matched candidate: softmax(chain(q @ kᵀ)) @ v.
struct AttentionCandidate {
  SoftmaxOp softmax;
  MatmulOp qk, pv;
  SmallVector<Operation *> chain; // q @ kᵀ's first user ... the softmax input
};

// Step 2: walks back from `x` to q @ kᵀ, appending the chain ops (softmax
// side first). On failure `why` says which condition failed.
bool walkScoreChain(Value x, AttentionCandidate &c, std::string &why) {
  Operation *def = x.getDefiningOp();
  if (!def) {
    why = "the scores are a function argument, not q @ kᵀ";
    return false;
  }
  if (!x.hasOneUse()) {
    Operation *expected = c.chain.empty() ? c.softmax.getOperation()
                                          : c.chain.back();
    Operation *other = expected;
    for (Operation *user : x.getUsers())
      if (user != expected)
        other = user;
    why = "the scores of " + describeOp(def) + " are also used by " +
          (other == expected ? "the same op twice" : describeOp(other));
    return false;
  }
  if (auto matmul = dyn_cast<MatmulOp>(def)) {
    if (!isRank4(matmul.getLhs()) || !isRank4(matmul.getRhs())) {
      why = "the score matmul " + describeOp(def) +
            " is not a batched [B, H, T, D] x [B, H, D, S] product";
      return false;
    }
    c.qk = matmul;
    return true;
  }
  // The chain operand: the lhs of sub/div and of causal_mask; for add
  // whichever operand leads to q @ kᵀ (lhs tried first); for mul the one
  // that is not the splat factor.
  SmallVector<Value, 2> tries;
  if (isa<MulOp, DivOp>(def)) {
    bool lhsSplat = splatThroughBroadcasts(def->getOperand(0)).has_value();
    bool rhsSplat = splatThroughBroadcasts(def->getOperand(1)).has_value();
    if (!rhsSplat && !(isa<MulOp>(def) && lhsSplat)) {
      why = "the scale " + describeOp(def) + " is not by a splat constant";
      return false;
    }
    tries = {rhsSplat ? def->getOperand(0) : def->getOperand(1)};
  } else if (isa<AddOp>(def)) {
    tries = {def->getOperand(0), def->getOperand(1)};
  } else if (isa<SubOp, CausalMaskOp>(def)) {
    tries = {def->getOperand(0)};
  } else if (auto select = dyn_cast<SelectOp>(def)) {
    // where(keep, scores, -inf) or where(drop, -inf, scores).
    auto isNegInf = [](Value v) {
      std::optional<double> x = splatThroughBroadcasts(v);
      return x && std::isinf(*x) && *x < 0;
    };
    if (isNegInf(select.getFalseValue()))
      tries = {select.getTrueValue()};
    else if (isNegInf(select.getTrueValue()))
      tries = {select.getFalseValue()};
    else {
      why = describeOp(def) + " does not choose between the scores and -inf";
      return false;
    }
  } else if (isa<TransposeOp>(def)) {
    why = "the softmax runs over a transposed score (" + describeOp(def) +
          "), not over the key dimension of q @ kᵀ";
    return false;
  } else {
    why = describeOp(def) +
          " between q @ kᵀ and the softmax is not a scale, bias or mask";
    return false;
  }
  if (auto mask = dyn_cast<CausalMaskOp>(def)) {
    APFloat fill = mask.getFill();
    if (!(fill.isInfinity() && fill.isNegative())) {
      why = describeOp(def) + " fills with " +
            std::to_string(fill.convertToDouble()) + ", not -inf";
      return false;
    }
  }
  std::string firstWhy;
  for (Value operand : tries) {
    size_t depth = c.chain.size();
    c.chain.push_back(def);
    if (walkScoreChain(operand, c, why))
      return true;
    c.chain.resize(depth);
    if (firstWhy.empty())
      firstWhy = why;
  }
  why = firstWhy;
  return false;
}

// Steps 1-3 for one softmax; fills `c` or says why not.
bool matchAttention(SoftmaxOp softmax, AttentionCandidate &c,
                    std::string &why) {
  c.softmax = softmax;
  auto type = cast<RankedTensorType>(softmax.getType());
  if (type.getRank() != 4) {
    why = "the scores are rank " + std::to_string(type.getRank()) +
          ", not [B, H, T, S]";
    return false;
  }
  if (!type.getElementType().isF32()) {
    why = "the scores are not f32";
    return false;
  }
  Value p = softmax.getResult();
  for (Operation *user : p.getUsers()) {
    auto pv = dyn_cast<MatmulOp>(user);
    if (!pv || pv.getLhs() != p || pv.getTransposeLhs() ||
        (c.pv && c.pv != pv)) {
      why = "the probabilities are also used by " + describeOp(user) +
            " (only p @ v may read them)";
      return false;
    }
    c.pv = pv;
  }
  if (!c.pv) {
    why = "the probabilities are not multiplied by v";
    return false;
  }
  if (!isRank4(c.pv.getRhs())) {
    why = "v of " + describeOp(c.pv) + " is not [B, H, S, Dv]";
    return false;
  }
  if (!walkScoreChain(softmax.getInput(), c, why))
    return false;
  std::reverse(c.chain.begin(), c.chain.end()); // q @ kᵀ side first
  // A mask turns scores into -inf; a later factor must keep them there.
  bool masked = false;
  Value chainValue = c.qk.getResult();
  for (Operation *op : c.chain) {
    // The bias, or the select's condition: rebuilt in a region, so it may
    // not need a boolean capture.
    Value other;
    if (auto select = dyn_cast<SelectOp>(op))
      other = select.getCondition();
    else if (op->getNumOperands() == 2)
      other = op->getOperand(0) == chainValue ? op->getOperand(1)
                                              : op->getOperand(0);
    chainValue = op->getResult(0);
    if (other) {
      std::string reason = whyNotRebuildable(other);
      if (!reason.empty()) {
        why = describeOp(op) + ": " + reason;
        return false;
      }
    }
    masked |= isa<CausalMaskOp, SelectOp>(op) ||
              (isa<AddOp>(op) && isAdditiveMask(other)) ||
              (isa<AddOp>(op) && isCausalConstant(op->getOperand(1))) ||
              (isa<AddOp>(op) && isCausalConstant(op->getOperand(0)));
    if (masked && isa<MulOp, DivOp>(op)) {
      std::optional<double> factor = splatThroughBroadcasts(op->getOperand(1));
      if (!factor && isa<MulOp>(op))
        factor = splatThroughBroadcasts(op->getOperand(0));
      if (!factor || *factor <= 0) {
        why = describeOp(op) +
              " scales masked scores by a factor that is not a positive splat";
        return false;
      }
    }
  }
  return true;
}

// Grouped-query heads written by hand: kv [B, KVH, S, D] repeated to
// [B, H, S, D] as reshape(broadcast(kv [B, KVH, S, D] dims = [0, 1, 3, 4]
// -> [B, KVH, G, S, D])), or with the size-1 group dim written out
// (broadcast of [B, KVH, 1, S, D], itself maybe a reshape of kv). Returns kv
// (a new reshape to [B, KVH, S, D] when only the 5-D form exists), or `x`.
Value peelRepeatedHeads(OpBuilder &builder, Value x) {
  auto reshape = x.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return x;
  auto broadcast = reshape.getInput().getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return x;
  auto rep = cast<RankedTensorType>(broadcast.getType()); // [B, KVH, G, S, D]
  auto out = cast<RankedTensorType>(x.getType());          // [B, H, S, D]
  if (rep.getRank() != 5 || rep.getDimSize(0) != out.getDimSize(0) ||
      rep.getDimSize(1) * rep.getDimSize(2) != out.getDimSize(1) ||
      rep.getDimSize(3) != out.getDimSize(2) ||
      rep.getDimSize(4) != out.getDimSize(3))
    return x;
  Value kv = broadcast.getInput();
  auto in = cast<RankedTensorType>(kv.getType());
  ArrayRef<int64_t> dims = broadcast.getDims();
  auto sameKv = [&](int64_t inDim, int64_t repDim) {
    return in.getDimSize(inDim) == rep.getDimSize(repDim);
  };
  if (in.getRank() == 4 && dims == ArrayRef<int64_t>{0, 1, 3, 4} &&
      sameKv(0, 0) && sameKv(1, 1) && sameKv(2, 3) && sameKv(3, 4))
    return kv;
  if (in.getRank() == 5 && dims == ArrayRef<int64_t>{0, 1, 2, 3, 4} &&
      in.getDimSize(2) == 1 && sameKv(0, 0) && sameKv(1, 1) &&
      sameKv(3, 3) && sameKv(4, 4)) {
    auto kvType = RankedTensorType::get(
        {in.getDimSize(0), in.getDimSize(1), in.getDimSize(3),
         in.getDimSize(4)},
        in.getElementType());
    if (auto inner = kv.getDefiningOp<ReshapeOp>())
      if (inner.getInput().getType() == kvType)
        return inner.getInput();
    return builder.create<ReshapeOp>(x.getLoc(), kvType, kv);
  }
  return x;
}

// Step 4: builds kiln.attention in place of p @ v.
void rewriteAttention(AttentionCandidate &c) {
  OpBuilder builder(c.pv);
  Location loc = c.softmax.getLoc();
  auto transposeLast2 = [&](Value v) -> Value {
    // transpose(transpose(x)) is x: keeps a repeated-heads kv visible.
    if (auto t = v.getDefiningOp<TransposeOp>())
      if (t.getPermutation() == ArrayRef<int64_t>{0, 1, 3, 2})
        return t.getInput();
    return builder.create<TransposeOp>(loc, v, ArrayRef<int64_t>{0, 1, 3, 2});
  };
  // q [B, H, T, D], k [B, KVH, S, D], v [B, KVH, S, Dv].
  Value q = c.qk.getTransposeLhs() ? transposeLast2(c.qk.getLhs())
                                   : c.qk.getLhs();
  Value k = peelRepeatedHeads(builder, c.qk.getTransposeRhs()
                                           ? c.qk.getRhs()
                                           : transposeLast2(c.qk.getRhs()));
  Value v = peelRepeatedHeads(builder, c.pv.getTransposeRhs()
                                           ? transposeLast2(c.pv.getRhs())
                                           : c.pv.getRhs());
  // Both or neither: kiln.attention reads one KVH for k and v.
  if (cast<RankedTensorType>(k.getType()).getDimSize(1) !=
      cast<RankedTensorType>(v.getType()).getDimSize(1)) {
    k = c.qk.getTransposeRhs() ? c.qk.getRhs() : transposeLast2(c.qk.getRhs());
    v = c.pv.getTransposeRhs() ? transposeLast2(c.pv.getRhs())
                               : c.pv.getRhs();
  }

  // The splat right after q @ kᵀ is the scale; the rest is replayed.
  ArrayRef<Operation *> chain = c.chain;
  Value chainValue = c.qk.getResult(); // the scores before chain.front()
  double scale = 1.0;
  if (!chain.empty() && isa<MulOp, DivOp>(chain.front())) {
    Operation *op = chain.front();
    std::optional<double> factor = splatThroughBroadcasts(op->getOperand(1));
    if (!factor && isa<MulOp>(op))
      factor = splatThroughBroadcasts(op->getOperand(0));
    if (factor && *factor != 0) {
      scale = isa<DivOp>(op) ? 1.0 / *factor : *factor;
      chain = chain.drop_front();
      chainValue = op->getResult(0);
    }
  }

  auto scores = cast<RankedTensorType>(c.softmax.getType());
  const int64_t t = scores.getDimSize(2), s = scores.getDimSize(3);
  auto outType = cast<RankedTensorType>(c.pv.getType());
  auto lseType = RankedTensorType::get(
      {scores.getDimSize(0), scores.getDimSize(1), t}, builder.getF32Type());

  // Both regions are built in detached blocks first: the captures (one
  // list, shared) are only known once the chain has been replayed.
  Type indexType = builder.getIndexType();
  auto scoreBlock = std::make_unique<Block>();
  Value sArg = scoreBlock->addArgument(builder.getF32Type(), loc);
  auto maskBlock = std::make_unique<Block>();
  SmallVector<Value> bhij, maskIdx;
  for (int d = 0; d < 4; ++d) {
    bhij.push_back(scoreBlock->addArgument(indexType, loc));
    maskIdx.push_back(maskBlock->addArgument(indexType, loc));
  }
  // (A detached block has no context of its own: the builder brings it.)
  OpBuilder region(builder.getContext()), m(builder.getContext());
  region.setInsertionPointToStart(scoreBlock.get());
  m.setInsertionPointToStart(maskBlock.get());
  SmallVector<Value> captures;
  ScalarRebuilder rebuild(region, *scoreBlock, 5, captures);
  ScalarRebuilder rebuildMask(m, *maskBlock, 4, captures);
  Value current = sArg;
  SmallVector<Value> keeps; // and-ed into the mask region
  for (Operation *op : chain) {
    // The operand that is not the chain (the first one when both are).
    Value other = op->getOperand(0) == chainValue ? op->getOperand(1)
                                                  : op->getOperand(0);
    Location opLoc = op->getLoc();
    if (isa<CausalMaskOp>(op) ||
        (isa<AddOp>(op) && isCausalConstant(other))) {
      // keep(b, h, i, j) = j <= i + (S - T)
      Value offset = m.create<arith::ConstantIndexOp>(loc, s - t);
      Value limit = m.create<arith::AddIOp>(loc, maskIdx[2], offset);
      keeps.push_back(m.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sle,
                                              maskIdx[3], limit));
    } else if (auto select = dyn_cast<SelectOp>(op)) {
      Value keep = rebuildMask.element(select.getCondition(), maskIdx);
      if (select.getTrueValue() != chainValue) { // where(drop, -inf, scores)
        Value one = m.create<arith::ConstantOp>(opLoc, m.getBoolAttr(true));
        keep = m.create<arith::XOrIOp>(opLoc, keep, one);
      }
      keeps.push_back(keep);
    } else if (isa<AddOp>(op) && isAdditiveMask(other)) {
      keeps.push_back(rebuildMask.keepOfAdditiveMask(other, maskIdx));
    } else if (isa<AddOp>(op)) {
      current = region.create<arith::AddFOp>(opLoc, current,
                                             rebuild.element(other, bhij));
    } else if (isa<SubOp>(op)) {
      current = region.create<arith::SubFOp>(opLoc, current,
                                             rebuild.element(other, bhij));
    } else if (isa<MulOp>(op)) {
      current = region.create<arith::MulFOp>(opLoc, current,
                                             rebuild.element(other, bhij));
    } else if (isa<DivOp>(op)) {
      current = region.create<arith::DivFOp>(opLoc, current,
                                             rebuild.element(other, bhij));
    }
    chainValue = op->getResult(0);
  }
  rebuild.addRemainingCaptureArguments();
  rebuildMask.addRemainingCaptureArguments();

  auto attention = builder.create<AttentionOp>(
      loc, outType, lseType, q, k, v, captures,
      builder.getF32FloatAttr(static_cast<float>(scale)));
  if (current != sArg) {
    region.create<YieldOp>(loc, ValueRange{current});
    attention.getScore().push_back(scoreBlock.release());
  }
  if (!keeps.empty()) {
    Value keep = keeps.front();
    for (Value more : ArrayRef<Value>(keeps).drop_front())
      keep = m.create<arith::AndIOp>(loc, keep, more);
    m.create<YieldOp>(loc, ValueRange{keep});
    attention.getMask().push_back(maskBlock.release());
  }

  c.pv.getResult().replaceAllUsesWith(attention.getOut());
  c.pv.erase();
  c.softmax.erase();
  for (Operation *op : llvm::reverse(c.chain))
    op->erase();
  c.qk.erase();
}

struct KilnAttentionMatchPass
    : public impl::KilnAttentionMatchBase<KilnAttentionMatchPass> {
  using KilnAttentionMatchBase::KilnAttentionMatchBase;
  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    for (SoftmaxOp softmax : softmaxes) {
      AttentionCandidate candidate;
      std::string why;
      if (!matchAttention(softmax, candidate, why)) {
        softmax->setAttr(kNotAttentionAttrName,
                         StringAttr::get(&getContext(), why));
        if (remarks)
          softmax.emitRemark() << "not attention: " << why;
        continue;
      }
      softmax->removeAttr(kNotAttentionAttrName);
      rewriteAttention(candidate);
    }
  }
};

} // namespace
} // namespace mlir::kiln
