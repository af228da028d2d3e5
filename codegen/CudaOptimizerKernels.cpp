//===- CudaOptimizerKernels.cpp - Accumulation, clipping scale, updates ---===//
//
// The CUDA kernels of the ops in ir/KilnOptimizerOps.td, with the CPU
// kernels' semantics (CpuOptimizerKernels.cpp): the updates work in place,
// a non-finite `scale` skips the step (nothing written; update_sq = 0 and
// param_sq of the unchanged parameter are still reported).
//
// An update kernel gives each update op a segment of its grid (one segment
// for a single op; one per parameter for a multi-tensor kernel, a kiln.fusion
// "optimizer", so the whole update is one launch). A segment's blocks stride
// over its parameter running the formulas shared with the CPU
// (emitUpdateElementStatements); each thread sums its elements' squared
// update and squared new value in float, each block combines its threads
// (kiln_block_sum_double), and the segment's last block (kiln_last_of on the
// segment's counter) adds the segment's block partials in block order: the
// same bits on every run, no floating-point atomics. Which segment a block
// runs is a static table in the source (a chain of `blockIdx.x < end`
// tests), since every parameter has a static size and its own buffer.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <functional>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string literal(double v) { return ScalarExprEmitter::floatLiteral(v); }

std::string literal(const APFloat &v) { return literal(v.convertToDouble()); }

// The blocks of one update inside its kernel: blocks [first, first +
// count) of the grid, norm partials at partial[2 * block], its last-block
// counter done[segment]. A single update is segment 0 of the whole grid; a
// multi-tensor kernel gives each update a segment of its own.
struct UpdateSegment {
  uint32_t first = 0, count = 1;
  size_t segment = 0;
};

// The update kernels' scratch: per-block norm partials and one last-block
// counter per segment.
void declareUpdateScratch(KernelSourceWriter &w, uint32_t blocks,
                          size_t segments) {
  w.global("__device__ double " + kEntryPlaceholder + "_partial[" +
           str(2 * blocks) + "];");
  w.global("__device__ unsigned int " + kEntryPlaceholder + "_done[" +
           str(segments) + "];");
}

// Writes the update of one optimizer op over the blocks of `seg`: the
// guard, the scalars, a loop over the parameter strided by the segment's
// threads running the shared formulas (emitUpdateElementStatements) when
// the scale is finite, and the norm reduction into update_sq / param_sq.
// Ends the segment's blocks with `return`.
void emitUpdateSegment(Operation *op, KernelSourceWriter &w,
                       const UpdateSegment &seg) {
  Value param = op->getOperand(0);
  Value scale = op->getOperands().back();
  Value updateSq = op->getResult(op->getNumResults() - 2);
  Value paramSq = op->getResult(op->getNumResults() - 1);
  int64_t n = numElements(shapeOf(param));
  std::string partial = (kEntryPlaceholder + "_partial").str();
  std::string done = (kEntryPlaceholder + "_done").str();
  std::string first = str(seg.first), count = str(seg.count);
  w.line("// " + updateSummary(op) + ": blocks [" + first + ", " +
         str(seg.first + seg.count) + ")");
  w.line("const float scale = " + w.ptr(scale) + "[0];");
  w.line("const bool apply = isfinite(scale); // else: skipped step");
  emitUpdateScalarStatements(op, w);
  w.line("const int64_t block = (int64_t)blockIdx.x - " + first + ";");
  w.line("float du = 0.0f, pp = 0.0f;");
  w.open("for (int64_t i = block * blockDim.x + threadIdx.x; i < " + str(n) +
         "; i += (int64_t)" + count + " * blockDim.x)");
  w.line("const float p = " + w.ptr(param) + "[i];");
  w.line("float pn = p;");
  w.open("if (apply)");
  emitUpdateElementStatements(op, w);
  w.close();
  w.line("const float delta = pn - p;");
  w.line("du += delta * delta;");
  w.line("pp += pn * pn;");
  w.close();
  w.line("const double blockDu = kiln_block_sum_double(du);");
  w.line("const double blockPp = kiln_block_sum_double(pp);");
  w.open("if (threadIdx.x == 0)");
  w.line(partial + "[2 * blockIdx.x] = blockDu;");
  w.line(partial + "[2 * blockIdx.x + 1] = blockPp;");
  w.close();
  w.line("if (!kiln_last_of(&" + done + "[" + str(seg.segment) + "], " +
         count + "u)) return;");
  w.line("double sumDu = 0.0, sumPp = 0.0;");
  w.open("for (int b = " + first + " + threadIdx.x; b < " +
         str(seg.first + seg.count) + "; b += blockDim.x)");
  w.line("sumDu += __ldcg(&" + partial + "[2 * b]);");
  w.line("sumPp += __ldcg(&" + partial + "[2 * b + 1]);");
  w.close();
  w.line("sumDu = kiln_block_sum_double(sumDu);");
  w.line("sumPp = kiln_block_sum_double(sumPp);");
  w.open("if (threadIdx.x == 0)");
  w.line(w.ptr(updateSq) + "[0] = (float)sumDu;");
  w.line(w.ptr(paramSq) + "[0] = (float)sumPp;");
  w.close();
  w.line("return;");
}

bool isUpdate(Operation *op) {
  return isa<k::AdamOp, k::SgdOp, k::SgdMomentumOp>(op);
}

// result = acc + value * scale (in place on the accumulator).
LogicalResult emitAccumulate(Operation *op, KernelSourceWriter &w,
                             CudaLaunch &launch) {
  auto acc = cast<k::AccumulateOp>(op);
  int64_t n = numElements(shapeOf(acc.getAcc()));
  std::string scale = literal(acc.getScale());
  launch = {cudaGridFor(n, kCudaBlock), kCudaBlock, 0};
  w.line("// accumulate " + str(n) + " elements, in place: acc += value * " +
         scale);
  openGridStrideLoop(w, n);
  w.line(w.ptr(acc.getResult()) + "[i] = " + w.ptr(acc.getAcc()) + "[i] + " +
         w.ptr(acc.getValue()) + "[i] * " + scale + ";");
  w.close();
  return success();
}

// NaN for a non-finite loss or grad norm, else the clip_grad_norm_ factor.
// One thread does it (launched as one warp).
LogicalResult emitGradScale(Operation *op, KernelSourceWriter &w,
                            CudaLaunch &launch) {
  launch = {1, 32, 0};
  w.line("if (blockIdx.x != 0 || threadIdx.x != 0) return;");
  emitGradScaleStatements(cast<k::GradScaleOp>(op), w);
  return success();
}

} // namespace

bool hasOptimizerCudaKernel(Operation *op) {
  return isa<k::AccumulateOp, k::GradScaleOp, k::AdamOp, k::SgdOp,
             k::SgdMomentumOp>(op);
}

LogicalResult emitOptimizerCudaKernel(Operation *op, KernelSourceWriter &w,
                                      CudaLaunch &launch) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<k::AccumulateOp>(
          [&](auto) { return emitAccumulate(op, w, launch); })
      .Case<k::GradScaleOp>([&](auto) { return emitGradScale(op, w, launch); })
      .Case<k::AdamOp, k::SgdOp, k::SgdMomentumOp>([&](auto) {
        return emitMultiTensorUpdateCudaKernel({op}, w, launch);
      })
      .Default([&](Operation *) {
        return op->emitError()
               << "codegen has no CUDA kernel for '" << op->getName() << "'";
      });
}

LogicalResult emitMultiTensorUpdateCudaKernel(ArrayRef<Operation *> updates,
                                              KernelSourceWriter &w,
                                              CudaLaunch &launch) {
  SmallVector<UpdateSegment> segments;
  uint32_t blocks = 0;
  for (Operation *op : updates) {
    if (!isUpdate(op))
      return op->emitError() << "a multi-tensor optimizer kernel holds "
                                "adam, sgd and sgd_momentum updates only";
    UpdateSegment seg;
    seg.first = blocks;
    seg.count = cudaGridFor(numElements(shapeOf(op->getOperand(0))),
                            kCudaBlock);
    seg.segment = segments.size();
    blocks += seg.count;
    segments.push_back(seg);
  }
  launch = {blocks, kCudaBlock, 0};
  declareUpdateScratch(w, blocks, segments.size());
  if (updates.size() > 1)
    w.line("// " + str(updates.size()) + " optimizer updates in one launch, "
           "each on a segment of the grid");
  for (auto [op, seg] : llvm::zip(updates, segments)) {
    bool last = seg.segment + 1 == segments.size();
    // Uniform per block: a block runs exactly one segment.
    if (!last)
      w.open("if (blockIdx.x < " + str(seg.first + seg.count) + "u)");
    emitUpdateSegment(op, w, seg);
    if (!last)
      w.close();
  }
  return success();
}

} // namespace kiln
