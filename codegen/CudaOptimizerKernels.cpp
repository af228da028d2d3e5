//===- CudaOptimizerKernels.cpp - Accumulation, clipping scale, updates ---===//
//
// The CUDA kernels of the ops in ir/KilnOptimizerOps.td, with the CPU
// kernels' semantics (CpuOptimizerKernels.cpp): the updates work in place,
// a non-finite `scale` skips the step (nothing written; update_sq = 0 and
// param_sq of the unchanged parameter are still reported).
//
// Update kernels are grid-stride loops over the parameter with a fixed grid;
// each thread sums its elements' squared update and squared new value in
// float, each block combines its threads (kiln_block_sum_double), and the
// last block adds the block partials in block order (kiln_last_block): the
// same bits on every run, no floating-point atomics.
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

// Writes the update loop over the elements of `param` and the norm
// reduction into `updateSq` / `paramSq`. Expects `apply` (bool: the scale is
// finite) to be defined. `body` runs only when `apply`; it reads `p` (old
// value), assigns `pn` (new value) and stores the new parameter and state.
void emitUpdateLoop(KernelSourceWriter &w, CudaLaunch &launch, Value param,
                    Value updateSq, Value paramSq,
                    const std::function<void()> &body) {
  int64_t n = numElements(shapeOf(param));
  uint32_t grid = cudaGridFor(n, kCudaBlock);
  launch = {grid, kCudaBlock, 0};
  std::string partial = (kEntryPlaceholder + "_partial").str();
  std::string done = (kEntryPlaceholder + "_done").str();
  w.global("__device__ double " + partial + "[" + str(2 * grid) + "];");
  w.global("__device__ unsigned int " + done + " = 0u;");
  w.line("float du = 0.0f, pp = 0.0f;");
  openGridStrideLoop(w, n);
  w.line("float pn = " + w.ptr(param) + "[i];");
  w.line("const float p = pn;");
  w.open("if (apply)");
  body();
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
  w.line("if (!kiln_last_block(&" + done + ")) return;");
  w.line("double sumDu = 0.0, sumPp = 0.0;");
  w.open("for (int b = threadIdx.x; b < " + str(grid) + "; b += blockDim.x)");
  w.line("sumDu += __ldcg(&" + partial + "[2 * b]);");
  w.line("sumPp += __ldcg(&" + partial + "[2 * b + 1]);");
  w.close();
  w.line("sumDu = kiln_block_sum_double(sumDu);");
  w.line("sumPp = kiln_block_sum_double(sumPp);");
  w.open("if (threadIdx.x == 0)");
  w.line(w.ptr(updateSq) + "[0] = (float)sumDu;");
  w.line(w.ptr(paramSq) + "[0] = (float)sumPp;");
  w.close();
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

LogicalResult emitAdam(Operation *op, KernelSourceWriter &w,
                       CudaLaunch &launch) {
  auto adam = cast<k::AdamOp>(op);
  Value p = adam.getParam();
  int64_t n = numElements(shapeOf(p));
  std::string b1 = literal(adam.getBeta1()), b2 = literal(adam.getBeta2());
  double wd = adam.getWeightDecay().convertToDouble();
  bool decoupled = adam.getDecoupledWeightDecay();
  w.line(std::string("// ") + (decoupled ? "AdamW" : "Adam") + " over " +
         str(n) + " parameters, in place; weight decay " + literal(wd));
  w.line("const float scale = " + w.ptr(adam.getScale()) + "[0];");
  w.line("const bool apply = isfinite(scale); // else: skipped step");
  w.line("const float lr = " + w.ptr(adam.getLr()) + "[0];");
  w.line("const float t = " + w.ptr(adam.getStep()) + "[0];");
  w.line("const float bc1 = (float)(1.0 - pow((double)" + b1 +
         ", (double)t));");
  w.line("const float bc2 = (float)(1.0 - pow((double)" + b2 +
         ", (double)t));");
  emitUpdateLoop(w, launch, p, adam.getUpdateSq(), adam.getParamSq(), [&] {
    w.line("float g = " + w.ptr(adam.getGrad()) + "[i] * scale;");
    if (wd != 0.0 && !decoupled)
      w.line("g += " + literal(wd) + " * p; // L2, as torch.optim.Adam");
    w.line("const float m = " + b1 + " * " + w.ptr(adam.getM()) +
           "[i] + (1.0f - " + b1 + ") * g;");
    w.line("const float v = " + b2 + " * " + w.ptr(adam.getV()) +
           "[i] + (1.0f - " + b2 + ") * g * g;");
    if (wd != 0.0 && decoupled)
      w.line("pn -= lr * " + literal(wd) + " * p; // decoupled (AdamW)");
    w.line("pn -= lr * (m / bc1) / (sqrtf(v / bc2) + " +
           literal(adam.getEpsilon()) + ");");
    w.line(w.ptr(adam.getNewParam()) + "[i] = pn;");
    w.line(w.ptr(adam.getNewM()) + "[i] = m;");
    w.line(w.ptr(adam.getNewV()) + "[i] = v;");
  });
  return success();
}

LogicalResult emitSgd(Operation *op, KernelSourceWriter &w,
                      CudaLaunch &launch) {
  auto sgd = cast<k::SgdOp>(op);
  Value p = sgd.getParam();
  int64_t n = numElements(shapeOf(p));
  double wd = sgd.getWeightDecay().convertToDouble();
  w.line("// SGD over " + str(n) + " parameters, in place; weight decay " +
         literal(wd));
  w.line("const float scale = " + w.ptr(sgd.getScale()) + "[0];");
  w.line("const bool apply = isfinite(scale); // else: skipped step");
  w.line("const float lr = " + w.ptr(sgd.getLr()) + "[0];");
  emitUpdateLoop(w, launch, p, sgd.getUpdateSq(), sgd.getParamSq(), [&] {
    w.line("float g = " + w.ptr(sgd.getGrad()) + "[i] * scale;");
    if (wd != 0.0)
      w.line("g += " + literal(wd) + " * p;");
    w.line("pn = p - lr * g;");
    w.line(w.ptr(sgd.getNewParam()) + "[i] = pn;");
  });
  return success();
}

LogicalResult emitSgdMomentum(Operation *op, KernelSourceWriter &w,
                              CudaLaunch &launch) {
  auto sgd = cast<k::SgdMomentumOp>(op);
  Value p = sgd.getParam();
  int64_t n = numElements(shapeOf(p));
  double wd = sgd.getWeightDecay().convertToDouble();
  std::string mu = literal(sgd.getMomentum());
  std::string damp = literal(1.0 - sgd.getDampening().convertToDouble());
  w.line("// SGD with momentum " + mu +
         (sgd.getNesterov() ? " (nesterov)" : "") + " over " + str(n) +
         " parameters, in place; weight decay " + literal(wd));
  w.line("const float scale = " + w.ptr(sgd.getScale()) + "[0];");
  w.line("const bool apply = isfinite(scale); // else: skipped step");
  w.line("const float lr = " + w.ptr(sgd.getLr()) + "[0];");
  w.line("// torch.optim.SGD: the buffer starts as the first gradient");
  w.line("const bool first = " + w.ptr(sgd.getStep()) + "[0] <= 1.0f;");
  emitUpdateLoop(w, launch, p, sgd.getUpdateSq(), sgd.getParamSq(), [&] {
    w.line("float g = " + w.ptr(sgd.getGrad()) + "[i] * scale;");
    if (wd != 0.0)
      w.line("g += " + literal(wd) + " * p;");
    w.line("const float buf = first ? g : " + mu + " * " +
           w.ptr(sgd.getBuf()) + "[i] + " + damp + " * g;");
    w.line(std::string("const float d = ") +
           (sgd.getNesterov() ? "g + " + mu + " * buf" : "buf") + ";");
    w.line("pn = p - lr * d;");
    w.line(w.ptr(sgd.getNewParam()) + "[i] = pn;");
    w.line(w.ptr(sgd.getNewBuf()) + "[i] = buf;");
  });
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
      .Case<k::AdamOp>([&](auto) { return emitAdam(op, w, launch); })
      .Case<k::SgdOp>([&](auto) { return emitSgd(op, w, launch); })
      .Case<k::SgdMomentumOp>(
          [&](auto) { return emitSgdMomentum(op, w, launch); })
      .Default([&](Operation *) {
        return op->emitError()
               << "codegen has no CUDA kernel for '" << op->getName() << "'";
      });
}

} // namespace kiln
