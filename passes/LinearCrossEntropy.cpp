//===- LinearCrossEntropy.cpp - Cross-entropy without stored logits -------===//
//
// --kiln-fuse-linear-cross-entropy and --kiln-expand-linear-cross-entropy:
// the output layer and its loss, `cross_entropy(x @ transpose(w), targets)`,
// computed without ever storing the [N, V] logits or their gradient (with a
// 2^17 vocabulary at [64, 2048] tokens those are 32 GiB each in fp32), in
// the way of Liger-Kernel's FusedLinearCrossEntropy and llm.c's fused
// classifier: rows of x in chunks, each chunk's logits made, reduced to its
// loss and turned into its gradient at once, the gradient pushed into dx and
// dw by two GEMMs, then dropped.
//
// Fuse (on the forward graph, before @eval and autodiff, so both see it):
//  1. For each kiln.cross_entropy of @step whose logits only it reads and
//     are a kiln.matmul of x [..., D] (not transposed) and a 2-D weight:
//     w [V, D] read transposed (the matmul's flag or a kiln.transpose: a
//     tied embedding), or w [D, V] as it is (an untied head), which gets a
//     kiln.transpose to [V, D] in front of the fused op: x and the targets
//     are flattened to [N, D] and [N] and the pair becomes
//     kiln.linear_cross_entropy (valid_classes kept).
//  2. Chunk rows: the `rows` option, or Liger's rule ceil(N / ceil(V / D))
//     (a logits chunk about the size of x) but at least 4096 rows (or N):
//     the chunk's rows are the K of the dw GEMM, which adds its product into
//     the fp32 [V, D] sum, reading and writing 8·V·D bytes a chunk for
//     2·V·D·K FLOPs: K/4 FLOPs a byte, under an H100's ~295 (989 TFLOP/s
//     over 3.35 TB/s) until K ~ 1200, so below a few thousand rows that
//     traffic is as long as the GEMM's math. Measured on an H100: GPT-2
//     bf16 [16, 1024] with Liger's 249-row chunks ran that GEMM at 124
//     TFLOP/s and stepped in 74.1 ms; 1024 rows 61.8 ms, 2048 rows 61.5 ms
//     (for +0.4 and +0.9 GiB); Llama-3 1B [16, 2048]: 512 rows 666.6 ms,
//     1024 rows 634.3 ms (tools/bench/RESULTS.md, 2026-11-26 H100). The
//     H200 profile of 512-row chunks put each Llama dw GEMM at 0.81 ms for
//     0.27 TFLOP, what its math (0.34 ms) and its 2 GiB of sum traffic
//     (0.45 ms) add up to. The H200 then timed Llama-3 [16, 2048] bf16 at
//     1024 rows against 2048: 512.68 against 502.59 ms a step (2026-11-28,
//     session 20; each 2048-row dw call 1.86 ms for 1.1 TFLOP of math,
//     ~1.47 ms of it). At 4096 rows that sum traffic is a fifth of the math
//     on an H200 (K/4 = 1024 FLOPs a byte against its ~206) instead of two
//     fifths: Llama-3 [16, 2048] +1 GiB planned (the bf16 logits chunk),
//     24 GiB less GEMM traffic and 24 fewer kernels a step, about 4 ms less
//     by that model; not yet timed.
//     With `rows` = 0 only logits larger than 64 MiB in fp32 are fused
//     (small models keep the plain ops, whose single kernel is faster at
//     that size).
//
// Expand (after autodiff and grad-accum, before mixed precision, so the
// chunks' GEMMs get bf16 operands like any other):
//  3. Pair each kiln.linear_cross_entropy F with a
//     kiln.linear_cross_entropy_grad G of the same x, w and targets. If G's
//     upstream gradient is available at F (defined before it, or made by
//     pure ops from values that are -- a constant, or under sequence
//     parallelism the cotangent times 1 / ranks -- which are cloned there),
//     one loop at F computes the loss, dx and dw; otherwise F and G are
//     expanded separately (G recomputes the logits).
//  4. The loop, for rows [s, s + n) (the last block may be shorter):
//       x_c = slice(x), t_c = slice(targets), logits_c = x_c @ w^T
//       d_c, l_c = cross_entropy_grad(logits_c, t_c, grad * n / N) with loss
//       loss += l_c * n / N
//     (the loss from the gradient's own kernel, which reads the logits once
//     for both; a loop without the gradient uses cross_entropy),
//       dx_c = d_c @ w
//       dw = d_c^T @ x_c (first block), matmul_accumulate(dw, d_c^T, x_c)
//     and dx = concat(dx_c). cross_entropy's mean over its own n rows,
//     weighted by n / N, is the mean over N; the same weight on the upstream
//     gradient makes cross_entropy_grad's `grad / n` the full `grad / N`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFUSELINEARCROSSENTROPY
#define GEN_PASS_DEF_KILNEXPANDLINEARCROSSENTROPY
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

constexpr int64_t kAutoFuseLogitsBytes = int64_t(64) << 20;
constexpr int64_t kMinAutoChunkRows = 4096;
constexpr llvm::StringLiteral kNotFusedLinearAttrName =
    "kiln.not_fused_linear";

/// The head's weight as the matmul reads it: `rows` is w [V, D] when the
/// rhs is read transposed (the rhs itself with transpose_rhs, or the input
/// of a 2-D kiln.transpose; a tied embedding); otherwise `columns` is the
/// rhs [D, V] itself (an untied head), which the fused op reads through a
/// transpose of its own.
struct HeadWeight {
  Value rows, columns;
};

HeadWeight headWeight(MatmulOp matmul) {
  Value rhs = matmul.getRhs();
  if (cast<RankedTensorType>(rhs.getType()).getRank() != 2)
    return {};
  if (matmul.getTransposeRhs())
    return {rhs, {}};
  if (auto t = rhs.getDefiningOp<TransposeOp>())
    if (t.getPermutation() == ArrayRef<int64_t>{1, 0})
      return {t.getInput(), {}};
  return {{}, rhs};
}

/// Why `ce` cannot become kiln.linear_cross_entropy ("" when it can), with
/// the matmul and the weight it would read.
std::string whyNotFused(CrossEntropyOp ce, MatmulOp &matmul, HeadWeight &w) {
  matmul = ce.getLogits().getDefiningOp<MatmulOp>();
  if (!matmul)
    return "the logits are not a GEMM product";
  if (!ce.getLogits().hasOneUse())
    return "the logits are also read by another op";
  if (matmul.getTransposeLhs())
    return "x is read transposed";
  w = headWeight(matmul);
  if (!w.rows && !w.columns)
    return "the weight is not 2-D";
  return "";
}

struct KilnFuseLinearCrossEntropyPass
    : public mlir::kiln::impl::KilnFuseLinearCrossEntropyBase<
          KilnFuseLinearCrossEntropyPass> {
  using KilnFuseLinearCrossEntropyBase::KilnFuseLinearCrossEntropyBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>(kStepFunctionName);
    if (!func)
      return;
    SmallVector<CrossEntropyOp> candidates;
    func.walk([&](CrossEntropyOp ce) { candidates.push_back(ce); });
    for (CrossEntropyOp ce : candidates)
      fuse(ce);
  }

  void fuse(CrossEntropyOp ce) {
    MatmulOp matmul;
    HeadWeight head;
    std::string why = whyNotFused(ce, matmul, head);
    if (!why.empty()) {
      if (matmul)
        ce->setAttr(kNotFusedLinearAttrName,
                    StringAttr::get(ce.getContext(), why));
      return;
    }
    auto logits = cast<RankedTensorType>(ce.getLogits().getType());
    auto headType = cast<RankedTensorType>(
        (head.rows ? head.rows : head.columns).getType());
    int64_t v = headType.getDimSize(head.rows ? 0 : 1),
            d = headType.getDimSize(head.rows ? 1 : 0);
    int64_t n = logits.getNumElements() / v;
    int64_t chunk = rows;
    if (chunk <= 0) {
      if (n * v * 4 <= kAutoFuseLogitsBytes)
        return;
      int64_t blocks = (v + d - 1) / d;
      chunk = std::max((n + blocks - 1) / blocks, kMinAutoChunkRows);
    }
    chunk = std::min(chunk, n);

    OpBuilder b(ce);
    Location loc = ce.getLoc();
    Type element = headType.getElementType();
    // An untied [D, V] head: its [V, D] transpose, made once a step (a
    // weight-sized copy, next to logits N / D times larger), and its
    // gradient transposed back by autodiff.
    Value w = head.rows
                  ? head.rows
                  : b.create<TransposeOp>(loc, head.columns,
                                          ArrayRef<int64_t>{1, 0})
                        .getResult();
    auto targetsType = cast<RankedTensorType>(ce.getTargets().getType());
    Value x = b.create<ReshapeOp>(loc, RankedTensorType::get({n, d}, element),
                                  matmul.getLhs());
    Value targets = b.create<ReshapeOp>(
        loc, RankedTensorType::get({n}, targetsType.getElementType()),
        ce.getTargets());
    Value loss = b.create<LinearCrossEntropyOp>(
        loc, ce.getType(), x, w, targets, chunk, ce.getValidClassesAttr());
    ce.getResult().replaceAllUsesWith(loss);
    ce.erase();
    Operation *transpose = matmul.getRhs().getDefiningOp<TransposeOp>();
    matmul.erase();
    if (transpose && transpose->use_empty())
      transpose->erase();
  }
};

/// One pass over the row blocks of x (step 4). `grad` null: the loss only;
/// `wantLoss` false: the gradients only.
struct Expanded {
  Value loss, dx, dw;
};

Expanded expandChunks(OpBuilder &b, Location loc, Value x, Value w,
                      Value targets, Value grad, bool wantLoss,
                      int64_t chunkRows, IntegerAttr validClasses) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t n = xType.getDimSize(0);
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Expanded out;
  SmallVector<Value> dxParts;
  for (int64_t start = 0; start < n; start += chunkRows) {
    int64_t end = std::min(start + chunkRows, n);
    Value weight = createSplatConstant(b, loc, scalar,
                                       double(end - start) / double(n));
    Value xc = b.create<SliceOp>(loc, x, 0, start, end);
    Value tc = b.create<SliceOp>(loc, targets, 0, start, end);
    Value logits = b.create<MatmulOp>(loc, xc, w, false, true);
    // The chunk's mean loss: from the gradient's own kernel when there is
    // one (one read of the logits for both), else from cross_entropy.
    Value chunkLoss, d;
    if (grad) {
      Value gc = b.create<MulOp>(loc, grad, weight);
      auto ceGrad = b.create<CrossEntropyGradOp>(
          loc, logits.getType(), wantLoss ? Type(scalar) : Type(), logits, tc, gc,
          validClasses);
      d = ceGrad.getResult();
      chunkLoss = ceGrad.getLoss();
    } else if (wantLoss) {
      auto ce = b.create<CrossEntropyOp>(loc, logits, tc);
      if (validClasses)
        ce.setValidClassesAttr(validClasses);
      chunkLoss = ce.getResult();
    }
    if (wantLoss) {
      Value term = b.create<MulOp>(loc, chunkLoss, weight);
      out.loss = out.loss ? b.create<AddOp>(loc, out.loss, term) : term;
    }
    if (!grad)
      continue;
    dxParts.push_back(b.create<MatmulOp>(loc, d, w));
    out.dw = out.dw ? b.create<MatmulAccumulateOp>(loc, out.dw, d, xc,
                                                   /*transposeLhs=*/true,
                                                   /*transposeRhs=*/false)
                          .getResult()
                    : b.create<MatmulOp>(loc, d, xc, true, false).getResult();
  }
  if (grad)
    out.dx = b.create<ConcatOp>(loc, dxParts, 0);
  return out;
}

/// Whether `value` can be used at `op`: defined before it (or an argument).
bool availableAt(Value value, Operation *op) {
  Operation *def = value.getDefiningOp();
  return !def || (def->getBlock() == op->getBlock() && def->isBeforeInBlock(op));
}

/// `value` made usable at `b`'s insertion point before `op`: itself when it
/// is available there, else a clone of its producer when that is a pure op
/// without regions whose operands are (recursively, a few ops deep) -- a
/// constant, or the loss cotangent scaled by the mean over a tensor axis's
/// ranks (`mul(1, 1/R)` after --kiln-partition). Null otherwise.
Value materializeAt(Value value, Operation *op, OpBuilder &b, int depth = 4) {
  if (availableAt(value, op))
    return value;
  Operation *def = value.getDefiningOp();
  // Not `op` itself: a gradient computed from the loss stays after it.
  if (depth == 0 || !def || def == op || def->getNumRegions() != 0 ||
      !isMemoryEffectFree(def))
    return Value();
  IRMapping mapping;
  for (Value operand : def->getOperands()) {
    Value usable = materializeAt(operand, op, b, depth - 1);
    if (!usable)
      return Value();
    mapping.map(operand, usable);
  }
  return b.clone(*def, mapping)->getResult(cast<OpResult>(value).getResultNumber());
}

struct KilnExpandLinearCrossEntropyPass
    : public mlir::kiln::impl::KilnExpandLinearCrossEntropyBase<
          KilnExpandLinearCrossEntropyPass> {
  void runOnOperation() override {
    for (StringRef name : {kStepFunctionName, kEvalFunctionName})
      if (auto func = getOperation().lookupSymbol<func::FuncOp>(name))
        expand(func);
  }

  void expand(func::FuncOp func) {
    SmallVector<LinearCrossEntropyOp> forwards;
    SmallVector<LinearCrossEntropyGradOp> grads;
    func.walk([&](Operation *op) {
      if (auto f = dyn_cast<LinearCrossEntropyOp>(op))
        forwards.push_back(f);
      else if (auto g = dyn_cast<LinearCrossEntropyGradOp>(op))
        grads.push_back(g);
    });
    for (LinearCrossEntropyOp f : forwards) {
      auto pair = llvm::find_if(grads, [&](LinearCrossEntropyGradOp g) {
        return g.getX() == f.getX() && g.getW() == f.getW() &&
               g.getTargets() == f.getTargets() &&
               g.getChunkRows() == f.getChunkRows() &&
               g.getValidClassesAttr() == f.getValidClassesAttr();
      });
      OpBuilder b(f);
      Value grad;
      if (pair != grads.end())
        grad = materializeAt(pair->getGrad(), f, b);
      Expanded e = expandChunks(b, f.getLoc(), f.getX(), f.getW(),
                                f.getTargets(), grad, /*wantLoss=*/true,
                                f.getChunkRows(), f.getValidClassesAttr());
      f.getResult().replaceAllUsesWith(e.loss);
      f.erase();
      if (grad) {
        pair->getXGrad().replaceAllUsesWith(e.dx);
        pair->getWGrad().replaceAllUsesWith(e.dw);
        pair->erase();
        grads.erase(pair);
      }
    }
    for (LinearCrossEntropyGradOp g : grads) {
      OpBuilder b(g);
      Expanded e = expandChunks(b, g.getLoc(), g.getX(), g.getW(),
                                g.getTargets(), g.getGrad(),
                                /*wantLoss=*/false, g.getChunkRows(),
                                g.getValidClassesAttr());
      g.getXGrad().replaceAllUsesWith(e.dx);
      g.getWGrad().replaceAllUsesWith(e.dw);
      g.erase();
    }
  }
};

} // namespace
