//===- CudaAttentionBackward.h - The emitter of kiln.attention_grad -------===//
//
// Internal to codegen/: the kernel of kiln.attention_grad
// (CudaAttentionBackward.cpp: its design, the shared-memory tiles for fp32
// and for head dims past 128; CudaAttentionBackwardMma.cpp: the bf16 roles
// on mma.sync with the tile products in registers). One emitter holds what
// both share: the launch (role A's dK/dV blocks, then role B's dQ blocks),
// the capture-gradient workspace and its reduction, the row statistics and
// the capture pass.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDAATTENTIONBACKWARD_H
#define KILN_CODEGEN_CUDAATTENTIONBACKWARD_H

#include "codegen/CudaAttentionKernels.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

namespace kiln {
namespace cuda_attention {

// Which role-B blocks can add to a floating capture's gradient, and so the
// part of it one block keeps a partial of: all of it, or the [b] or [h]
// sub-tensor (dim 0 indexed by the block's b or h) of `count` elements.
struct CapturePartial {
  enum Kind { Whole, PerSample, PerHead } kind = Whole;
  int64_t count = 0;
};

// The tiles of the mma.sync backward: both roles own 64 rows per block (16
// per warp: keys in role A, query rows in role B) and step over the other
// side `inner` at a time (64 for head dims up to 64, else 32: the registers
// of the dK/dV or dQ accumulators). Head dims past 128 take the shared-
// memory kernel.
struct MmaBackwardPlan {
  int64_t inner = 64;
  // Tiles of the inner loop in shared memory at once: 2 overlaps the copy
  // of the next with the computation on this one (emitTilePipeline); 1
  // where two do not fit the shared-memory budget.
  int64_t stages = 2;
  bool captureTiles = false; // role B stores s and dS for the capture pass
};
bool mmaBackwardApplies(const TilePlan &p);
MmaBackwardPlan mmaBackwardPlan(const TilePlan &p, bool captureGradients);
SharedLayout mmaBackwardLayout(const TilePlan &p, const MmaBackwardPlan &m);

class BackwardEmitter {
public:
  BackwardEmitter(mlir::kiln::AttentionGradOp op, KernelSourceWriter &w,
                  const TilePlan &p)
      : op(op), w(w), p(p), n(dimsOf(op)),
        scale(ScalarExprEmitter::floatLiteral(
            op.getScale().convertToDouble())),
        in(attentionLoopInputs(w, op.getCaptures())) {}

  // The shared-memory kernel, or with `mma` the mma.sync one; `layout` is
  // the dynamic shared memory of the chosen plan.
  mlir::LogicalResult emit(CudaLaunch &launch, const SharedLayout &layout,
                           const MmaBackwardPlan *mma);

  // Whether the op has a floating capture (so role B walks its pairs).
  static bool hasCaptureGradients(mlir::kiln::AttentionGradOp op);

private:
  mlir::LogicalResult emitRowStats(int64_t rows);
  mlir::LogicalResult emitProducts();
  // From `float pv, seed, dsv` to their values for the pair (i, j) in
  // scope: p (times the dropout's z), dS and scale * ds, zeros where not
  // kept; S and dP of the pair are `sAcc` and `dpAcc`, its row in sLse /
  // sDi `row`.
  mlir::LogicalResult emitPairTerms(const std::string &sAcc,
                                    const std::string &dpAcc,
                                    const std::string &row,
                                    const std::string &tileAllKept);
  mlir::LogicalResult emitPairs();
  // Capture gradients (CudaAttentionBackward.cpp's header says how they
  // are summed): the role-B block's setup (zeroed slice `cg`, row sums),
  // the passes over one tile, and the row sums' adds after the last tile.
  mlir::LogicalResult classifyCaptureReads();
  void emitCaptureSetup();
  mlir::LogicalResult emitCapturePass(int64_t rows, int64_t cols);
  void emitCaptureFlush(int64_t rows);
  // Threads below `threads` add `value` to cg[at] (none where at < 0): in
  // parallel when no two targets are equal, else one thread after another.
  void emitOrderedAdds(int64_t threads, const std::string &value,
                       const std::string &at);
  std::string captureTarget(unsigned capture, const std::string &index);
  mlir::LogicalResult emitRoleA();
  mlir::LogicalResult emitRoleB();
  void emitCaptureReduction();
  // The score's backward statements; with `invariant`, those of its
  // forward free of s, i and j go there instead (emitScoreInvariants).
  mlir::LogicalResult scoreBackward(const CaptureGradHook &hook,
                                    AttentionRegionEmitter::Backward &out,
                                    llvm::SmallVector<std::string> *invariant = nullptr);
  // The score's statements that are the same for every pair of one (b, h),
  // once where h is set: emitPairTerms leaves them out.
  mlir::LogicalResult emitScoreInvariants();

  // CudaAttentionBackwardMma.cpp.
  // The block-skip's whole-tile flag (none without a mask).
  std::string allKept() {
    return op.getMask().empty() ? "" : "tileAllKept";
  }
  mlir::LogicalResult emitRoleAMma(const MmaBackwardPlan &m);
  void emitTileRowStats(int64_t rows, int64_t ld);
  mlir::LogicalResult emitRoleBMma(const MmaBackwardPlan &m);
  mlir::LogicalResult emitMmaPairs(const std::string &accS,
                                   const std::string &accDP, int64_t tiles,
                                   const std::string &i, const std::string &j,
                                   const std::string &row,
                                   const std::string &captureIndex);

  mlir::kiln::AttentionGradOp op;
  KernelSourceWriter &w;
  TilePlan p;
  Dims n;
  std::string scale;
  AttentionRegionInputs in;
  int64_t qTiles = 0, kvTiles = 0, blocksA = 0, blocksB = 0;
  // The mma.sync roles keep lse in base 2 in sLse (lse log2 e), so that each
  // p = exp2(score log2 e - L) is one multiply, subtract and exp2.
  bool lseBase2 = false;
  // Floating captures: offset of each one's partial in a block's workspace
  // slice (-1 for integer captures), the sub-tensor a block keeps, and the
  // slice's total element count.
  llvm::SmallVector<int64_t> gradOffset;
  llvm::SmallVector<CapturePartial> partial;
  int64_t gradTotal = 0;
  // Each read of a floating capture in the score, in the order the reverse
  // pass meets them: summed along the tile's rows (its element does not
  // depend on j), its columns (depends on j, not i), or pair by pair.
  enum class CaptureRead { Row, Column, Pair };
  llvm::SmallVector<CaptureRead> captureReads;
  bool hasRead(CaptureRead kind) const {
    return llvm::is_contained(captureReads, kind);
  }
  bool perSampleCaptures = false;
  std::string workspace, done;
  std::string dkvWorkspace; // role A's accumulators when dkvInWorkspace
  AttentionDropout drop; // the forward's mask, regenerated
};

} // namespace cuda_attention
} // namespace kiln

#endif // KILN_CODEGEN_CUDAATTENTIONBACKWARD_H
