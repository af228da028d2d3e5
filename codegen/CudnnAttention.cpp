//===- CudnnAttention.cpp - Which attention ops cuDNN's fused SDPA can run ===//
//
// Algorithm (matchCudnnAttention):
//  1. Element types: every q/k/v-like operand and result bf16.
//  2. Attributes: `scale` only (a dropout rate, or any attribute added to
//     the op later, means a computation cuDNN is not told about).
//  3. Score region: absent, or a block that yields its first argument.
//  4. Mask region: the yielded i1 is split at arith.andi into atoms; each
//     atom is an arith.cmpi whose two sides evaluate to linear forms
//     c_b*b + c_h*h + c_i*i + c_j*j + c_len*len[b] + c (LinearForm below),
//     normalised to `form <= 0`; an atom is causal when the form is
//     j - i - (S - T) and padding when it is j - len[b] + 1.
//  5. Captures: exactly the length tensor of a padding atom, or none.
//  6. Head dims.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudnnAttention.h"

#include "codegen/AttentionDims.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {
namespace {

// The head dims cuDNN 9's fused attention supports on every architecture
// Kiln targets (sm_80 backward: d <= 128, a multiple of 8).
constexpr int64_t kMaxHeadDim = 128;
constexpr int64_t kHeadDimMultiple = 8;

// c_b*b + c_h*h + c_i*i + c_j*j + c_len*len[b] + c, over the mask's index
// arguments and one rank-1 capture read at b.
struct LinearForm {
  int64_t b = 0, h = 0, i = 0, j = 0, len = 0, c = 0;
  std::optional<unsigned> lengthsCapture; // set when len != 0

  bool isConstant() const { return !b && !h && !i && !j && !len; }
};

std::optional<LinearForm> combine(const LinearForm &x, const LinearForm &y,
                                  int64_t ySign) {
  if (x.lengthsCapture && y.lengthsCapture &&
      *x.lengthsCapture != *y.lengthsCapture)
    return std::nullopt; // two different length tensors
  LinearForm r;
  r.b = x.b + ySign * y.b;
  r.h = x.h + ySign * y.h;
  r.i = x.i + ySign * y.i;
  r.j = x.j + ySign * y.j;
  r.len = x.len + ySign * y.len;
  r.c = x.c + ySign * y.c;
  r.lengthsCapture = x.lengthsCapture ? x.lengthsCapture : y.lengthsCapture;
  if (!r.len)
    r.lengthsCapture.reset();
  return r;
}

LinearForm scaled(LinearForm x, int64_t factor) {
  x.b *= factor, x.h *= factor, x.i *= factor, x.j *= factor;
  x.len *= factor, x.c *= factor;
  if (!x.len)
    x.lengthsCapture.reset();
  return x;
}

// Evaluates an integer value of the mask block (args: b, h, i, j, captures).
class MaskEvaluator {
public:
  MaskEvaluator(Block &block, int64_t batch) : block(block), batch(batch) {}

  std::optional<LinearForm> eval(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &block || arg.getArgNumber() >= 4)
        return std::nullopt;
      LinearForm f;
      int64_t *slots[] = {&f.b, &f.h, &f.i, &f.j};
      *slots[arg.getArgNumber()] = 1;
      return f;
    }
    Operation *op = v.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<IntegerAttr>(constant.getValue());
      if (!value)
        return std::nullopt;
      LinearForm f;
      f.c = value.getValue().getSExtValue();
      return f;
    }
    // Widening or index casts keep the value (the region's i64 and i32
    // arithmetic never holds a value outside i32: indices and lengths).
    if (isa<arith::IndexCastOp, arith::ExtSIOp>(op))
      return eval(op->getOperand(0));
    if (isa<arith::AddIOp, arith::SubIOp>(op)) {
      std::optional<LinearForm> x = eval(op->getOperand(0));
      std::optional<LinearForm> y = eval(op->getOperand(1));
      if (!x || !y)
        return std::nullopt;
      return combine(*x, *y, isa<arith::AddIOp>(op) ? 1 : -1);
    }
    if (isa<arith::MulIOp>(op)) {
      std::optional<LinearForm> x = eval(op->getOperand(0));
      std::optional<LinearForm> y = eval(op->getOperand(1));
      if (!x || !y)
        return std::nullopt;
      if (x->isConstant())
        return scaled(*y, x->c);
      if (y->isConstant())
        return scaled(*x, y->c);
      return std::nullopt;
    }
    // len[b]: a rank-1 i32 capture of B elements read at exactly b.
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      auto capture = dyn_cast<BlockArgument>(extract.getTensor());
      auto type = cast<RankedTensorType>(extract.getTensor().getType());
      if (!capture || capture.getOwner() != &block ||
          capture.getArgNumber() < 4 || type.getRank() != 1 ||
          type.getDimSize(0) != batch || !type.getElementType().isInteger(32))
        return std::nullopt;
      std::optional<LinearForm> index = eval(extract.getIndices()[0]);
      if (!index || index->b != 1 || index->h || index->i || index->j ||
          index->len || index->c)
        return std::nullopt;
      LinearForm f;
      f.len = 1;
      f.lengthsCapture = capture.getArgNumber() - 4;
      return f;
    }
    return std::nullopt;
  }

private:
  Block &block;
  int64_t batch;
};

// Adds the atoms of `keep` (an i1 of the mask block) to `mask`.
bool matchMaskValue(Value keep, MaskEvaluator &evaluator, int64_t qLen,
                    int64_t kvLen, CudnnAttentionMask &mask,
                    std::string &whyNot) {
  Operation *op = keep.getDefiningOp();
  if (auto both = dyn_cast_or_null<arith::AndIOp>(op))
    return matchMaskValue(both.getLhs(), evaluator, qLen, kvLen, mask,
                          whyNot) &&
           matchMaskValue(both.getRhs(), evaluator, qLen, kvLen, mask, whyNot);
  auto cmp = dyn_cast_or_null<arith::CmpIOp>(op);
  if (!cmp) {
    whyNot = "the mask is not causal or per-sample key lengths (not a "
             "comparison or a conjunction of comparisons)";
    return false;
  }
  std::optional<LinearForm> lhs = evaluator.eval(cmp.getLhs());
  std::optional<LinearForm> rhs = evaluator.eval(cmp.getRhs());
  std::optional<LinearForm> diff =
      lhs && rhs ? combine(*lhs, *rhs, -1) : std::nullopt;
  if (!diff) {
    whyNot = "the mask is not causal or per-sample key lengths (a side of a "
             "comparison is not linear in b, h, i, j and len[b])";
    return false;
  }
  // Integers: x < 0 <=> x + 1 <= 0; x >= 0 <=> -x <= 0; x > 0 <=> -x + 1 <= 0.
  LinearForm form;
  switch (cmp.getPredicate()) {
  case arith::CmpIPredicate::sle:
    form = *diff;
    break;
  case arith::CmpIPredicate::slt:
    form = *diff, form.c += 1;
    break;
  case arith::CmpIPredicate::sge:
    form = scaled(*diff, -1);
    break;
  case arith::CmpIPredicate::sgt:
    form = scaled(*diff, -1), form.c += 1;
    break;
  default:
    whyNot = "the mask is not causal or per-sample key lengths (comparison '" +
             arith::stringifyCmpIPredicate(cmp.getPredicate()).str() + "')";
    return false;
  }
  bool causal = form.j == 1 && form.i == -1 && !form.b && !form.h &&
                !form.len && form.c == -(kvLen - qLen);
  bool padding = form.j == 1 && form.len == -1 && !form.i && !form.b &&
                 !form.h && form.c == 1;
  // Kiln's causal is aligned bottom-right; the cuDNN graphs shift the row
  // index by S - T (runtime/cuda/CudnnSdpaBuilder.h), so any S >= T maps.
  // With T > S the first T - S query rows keep no key at all, a case cuDNN
  // leaves undefined (Kiln: out 0, lse -inf).
  if (causal && qLen > kvLen) {
    whyNot = "causal with q length " + std::to_string(qLen) +
             " > kv length " + std::to_string(kvLen) + " (query rows 0.." +
             std::to_string(qLen - kvLen - 1) +
             " keep no key; cuDNN's result there is undefined)";
    return false;
  }
  if (causal && !mask.causal) {
    mask.causal = true;
    return true;
  }
  if (padding && !mask.lengthsCapture) {
    mask.lengthsCapture = form.lengthsCapture;
    return true;
  }
  whyNot = "the mask is not causal or per-sample key lengths j < len[b]";
  return false;
}

bool isBf16(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
}

template <typename OpT>
std::optional<CudnnAttentionMask> matchOp(OpT op, std::string &whyNot) {
  auto q = cast<RankedTensorType>(op.getQ().getType());
  auto kType = cast<RankedTensorType>(op.getK().getType());
  auto vType = cast<RankedTensorType>(op.getV().getType());
  // 1. Element types.
  SmallVector<Value> halves = {op.getQ(), op.getK(), op.getV()};
  if constexpr (std::is_same_v<OpT, k::AttentionOp>) {
    halves.push_back(op.getOut());
  } else {
    halves.append({op.getOut(), op.getDout(), op.getDq(), op.getDk(),
                   op.getDv()});
  }
  if (!llvm::all_of(halves, isBf16)) {
    whyNot = "q, k, v are not all bf16 (cuDNN's fused attention takes "
             "bf16 / fp16)";
    return std::nullopt;
  }
  // 2. Attributes: the scale maps to cuDNN's attention scale; dropout would
  // need cuDNN to draw Kiln's Philox mask (it draws its own), so any nonzero
  // probability keeps the generated kernel. Anything else added to the op
  // later is refused until it is mapped.
  if (op.getDropoutProbability() != 0.0) {
    whyNot = "dropout " +
             llvm::formatv("{0}", op.getDropoutProbability()).str() +
             " (cuDNN would draw a different mask than Kiln's Philox stream)";
    return std::nullopt;
  }
  if (DictionaryAttr inherent =
          dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute attr : inherent)
      if (attr.getName() != "scale" && attr.getName() != "dropout" &&
          attr.getName() != "layout") {
        whyNot = "attribute '" + attr.getName().str() +
                 "' is not mapped to cuDNN";
        return std::nullopt;
      }
  // 3. Score region.
  if (Block *score = op.getScoreBlock()) {
    auto yield = cast<k::YieldOp>(score->getTerminator());
    if (score->getOperations().size() != 1 ||
        yield->getOperand(0) != score->getArgument(0)) {
      whyNot = "the score region is not the identity (a score mod)";
      return std::nullopt;
    }
  }
  // 4. Mask region.
  CudnnAttentionMask mask;
  if (Block *maskBlock = op.getMaskBlock()) {
    MaskEvaluator evaluator(*maskBlock, q.getDimSize(0));
    Value keep = maskBlock->getTerminator()->getOperand(0);
    AttentionDims n = attentionDims(op);
    if (!matchMaskValue(keep, evaluator, n.T, n.S, mask, whyNot))
      return std::nullopt;
  }
  // 5. Captures.
  size_t expected = mask.lengthsCapture ? 1 : 0;
  if (op.getCaptures().size() != expected) {
    whyNot = std::to_string(op.getCaptures().size()) +
             " captured tensors (cuDNN takes only the key lengths)";
    return std::nullopt;
  }
  // 6. Head dims.
  for (int64_t d : {q.getDimSize(3), vType.getDimSize(3)})
    if (d % kHeadDimMultiple != 0 || d > kMaxHeadDim) {
      whyNot = "head dim " + std::to_string(d) +
               " (cuDNN needs a multiple of 8, at most 128)";
      return std::nullopt;
    }
  return mask;
}

} // namespace

std::optional<CudnnAttentionMask> matchCudnnAttention(Operation *op,
                                                      std::string &whyNot) {
  if (auto forward = dyn_cast<k::AttentionOp>(op))
    return matchOp(forward, whyNot);
  if (auto backward = dyn_cast<k::AttentionGradOp>(op))
    return matchOp(backward, whyNot);
  whyNot = "not an attention op";
  return std::nullopt;
}

std::optional<CudnnAttentionCall>
planCudnnAttention(Operation *op, llvm::function_ref<uint32_t(Value)> bufferOf,
                   std::string &whyNot) {
  std::optional<CudnnAttentionMask> mask = matchCudnnAttention(op, whyNot);
  if (!mask)
    return std::nullopt;
  CudnnAttentionCall call;
  auto fill = [&](auto attention) {
    AttentionDims n = attentionDims(attention);
    call.batch = n.B;
    call.heads = n.H;
    call.kvHeads = n.KVH;
    call.qLen = n.T;
    call.kvLen = n.S;
    call.tokensMajor = n.tokensMajor;
    call.headDim = n.D;
    call.valueDim = n.Dv;
    call.scale = attention.getScale().convertToFloat();
    call.causal = mask->causal;
    if (mask->lengthsCapture)
      call.kvLengths = static_cast<int32_t>(
          bufferOf(attention.getCaptures()[*mask->lengthsCapture]));
    call.q = bufferOf(attention.getQ());
    call.k = bufferOf(attention.getK());
    call.v = bufferOf(attention.getV());
    call.out = bufferOf(attention.getOut());
    call.lse = bufferOf(attention.getLse());
  };
  if (auto forward = dyn_cast<k::AttentionOp>(op)) {
    fill(forward);
  } else {
    auto backward = cast<k::AttentionGradOp>(op);
    fill(backward);
    call.backward = true;
    call.dout = static_cast<int32_t>(bufferOf(backward.getDout()));
    call.dq = static_cast<int32_t>(bufferOf(backward.getDq()));
    call.dk = static_cast<int32_t>(bufferOf(backward.getDk()));
    call.dv = static_cast<int32_t>(bufferOf(backward.getDv()));
  }
  return call;
}

std::string describeCudnnAttention(Operation *op) {
  std::string whyNot;
  std::optional<CudnnAttentionMask> mask = matchCudnnAttention(op, whyNot);
  if (!mask)
    return "cudnn: no (" + whyNot + ")";
  std::string what;
  if (mask->causal)
    what = "causal";
  if (mask->lengthsCapture)
    what += std::string(what.empty() ? "" : " + ") + "key lengths";
  return "cudnn: " + (what.empty() ? std::string("no mask") : what);
}

} // namespace kiln
