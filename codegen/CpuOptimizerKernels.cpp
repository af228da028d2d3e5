//===- CpuOptimizerKernels.cpp - Accumulation, clipping scale, updates ----===//
//
// The CPU kernels of the ops in ir/KilnOptimizerOps.td. The update kernels
// work in place (their results share the buffers of the parameter and its
// state) and:
//   - read `scale` first and, when it is not finite (a non-finite loss or
//     gradient norm), write nothing to the parameter or its state: the step
//     is skipped. They still report `update_sq = 0` and `param_sq` of the
//     unchanged parameter, so the norms the runtime logs stay meaningful;
//   - share their per-element formulas (emitUpdateElementStatements, at the
//     end of this file) with the CUDA kernels;
//   - accumulate `update_sq` and `param_sq` in double over fixed chunks of
//     kUpdateChunk elements (in parallel when large), then combine the chunks
//     serially in order: the same bits whatever the thread count.
//
//===----------------------------------------------------------------------===//

#include "codegen/CpuBespokeKernels.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

// Elements per chunk of the update loops' partial sums.
constexpr int64_t kUpdateChunk = 4096;

std::string str(int64_t v) { return std::to_string(v); }

std::string literal(double v) { return ScalarExprEmitter::floatLiteral(v); }

std::string literal(const APFloat &v) { return literal(v.convertToDouble()); }

// Writes the chunked loop over the `n` elements of a parameter:
//   for each chunk c (parallel): du = pp = 0; for i in chunk: <body>; store
//   then sums the chunks in order into `updateSq`/`paramSq` outputs.
// `body` reads `p` (old value) and must define `float pn` (new value); it may
// write state buffers. `skip` == true writes the body for the non-finite
// case (pn = p, nothing stored).
void emitChunkedUpdate(KernelSourceWriter &w, int64_t n, Value updateSq,
                       Value paramSq, int64_t workPerElement,
                       const std::function<void()> &body) {
  int64_t chunks = (n + kUpdateChunk - 1) / kUpdateChunk;
  w.line("double* partial = (double*)malloc(" + str(2 * chunks) +
         " * sizeof(double));");
  w.line("if (!partial) abort();");
  w.parallelFor(n * workPerElement);
  w.open("for (int64_t c = 0; c < " + str(chunks) + "; ++c)");
  w.line("double du = 0.0, pp = 0.0;");
  w.line("const int64_t end = c * " + str(kUpdateChunk) + " + " +
         str(kUpdateChunk) + " < " + str(n) + " ? c * " + str(kUpdateChunk) +
         " + " + str(kUpdateChunk) + " : " + str(n) + ";");
  w.open("for (int64_t i = c * " + str(kUpdateChunk) + "; i < end; ++i)");
  body();
  w.line("const double delta = (double)pn - (double)p;");
  w.line("du += delta * delta;");
  w.line("pp += (double)pn * (double)pn;");
  w.close();
  w.line("partial[2 * c] = du;");
  w.line("partial[2 * c + 1] = pp;");
  w.close();
  w.line("double du = 0.0, pp = 0.0;");
  w.open("for (int64_t c = 0; c < " + str(chunks) + "; ++c)");
  w.line("du += partial[2 * c];");
  w.line("pp += partial[2 * c + 1];");
  w.close();
  w.line("free(partial);");
  w.line(w.ptr(updateSq) + "[0] = (float)du;");
  w.line(w.ptr(paramSq) + "[0] = (float)pp;");
}

// The guard every update kernel starts with: a non-finite scale leaves the
// parameter and its state untouched (see the file comment).
void emitSkipWhenNotFinite(KernelSourceWriter &w, Value param, Value scale,
                           Value updateSq, Value paramSq) {
  int64_t n = numElements(shapeOf(param));
  w.line("const float scale = " + w.ptr(scale) + "[0];");
  w.open("if (!isfinite(scale))");
  w.line("// skipped step: report the unchanged parameter, write nothing");
  emitChunkedUpdate(w, n, updateSq, paramSq, 2, [&] {
    w.line("const float p = " + w.ptr(param) + "[i];");
    w.line("const float pn = p;");
  });
  w.line("return;");
  w.close();
}

// result = acc + value * scale (in place on the accumulator).
LogicalResult emitAccumulate(Operation *op, KernelSourceWriter &w) {
  auto acc = cast<k::AccumulateOp>(op);
  int64_t n = numElements(shapeOf(acc.getAcc()));
  std::string scale = literal(acc.getScale());
  w.line("// accumulate " + str(n) + " elements, in place: acc += value * " +
         scale);
  w.parallelFor(n * 2);
  w.open("for (int64_t i = 0; i < " + str(n) + "; ++i)");
  w.line(w.ptr(acc.getResult()) + "[i] = " + w.ptr(acc.getAcc()) + "[i] + " +
         w.ptr(acc.getValue()) + "[i] * " + scale + ";");
  w.close();
  return success();
}

// NaN for a non-finite loss or grad norm, else the clip_grad_norm_ factor.
LogicalResult emitGradScale(Operation *op, KernelSourceWriter &w) {
  emitGradScaleStatements(cast<k::GradScaleOp>(op), w);
  return success();
}

LogicalResult emitAdam(Operation *op, KernelSourceWriter &w) {
  auto adam = cast<k::AdamOp>(op);
  Value p = adam.getParam();
  int64_t n = numElements(shapeOf(p));
  w.line("// " + updateSummary(op));
  emitSkipWhenNotFinite(w, p, adam.getScale(), adam.getUpdateSq(),
                        adam.getParamSq());
  emitUpdateScalarStatements(op, w);
  emitChunkedUpdate(w, n, adam.getUpdateSq(), adam.getParamSq(), 12, [&] {
    w.line("const float p = " + w.ptr(p) + "[i];");
    w.line("float pn = p;");
    emitUpdateElementStatements(op, w);
  });
  return success();
}

LogicalResult emitSgd(Operation *op, KernelSourceWriter &w) {
  auto sgd = cast<k::SgdOp>(op);
  Value p = sgd.getParam();
  int64_t n = numElements(shapeOf(p));
  w.line("// " + updateSummary(op));
  emitSkipWhenNotFinite(w, p, sgd.getScale(), sgd.getUpdateSq(),
                        sgd.getParamSq());
  emitUpdateScalarStatements(op, w);
  emitChunkedUpdate(w, n, sgd.getUpdateSq(), sgd.getParamSq(), 6, [&] {
    w.line("const float p = " + w.ptr(p) + "[i];");
    w.line("float pn = p;");
    emitUpdateElementStatements(op, w);
  });
  return success();
}

LogicalResult emitSgdMomentum(Operation *op, KernelSourceWriter &w) {
  auto sgd = cast<k::SgdMomentumOp>(op);
  Value p = sgd.getParam();
  int64_t n = numElements(shapeOf(p));
  w.line("// " + updateSummary(op));
  emitSkipWhenNotFinite(w, p, sgd.getScale(), sgd.getUpdateSq(),
                        sgd.getParamSq());
  emitUpdateScalarStatements(op, w);
  emitChunkedUpdate(w, n, sgd.getUpdateSq(), sgd.getParamSq(), 8, [&] {
    w.line("const float p = " + w.ptr(p) + "[i];");
    w.line("float pn = p;");
    emitUpdateElementStatements(op, w);
  });
  return success();
}

} // namespace

bool hasOptimizerCpuKernel(Operation *op) {
  return isa<k::AccumulateOp, k::GradScaleOp, k::AdamOp, k::SgdOp,
             k::SgdMomentumOp>(op);
}

LogicalResult emitOptimizerCpuKernel(Operation *op, KernelSourceWriter &w) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<k::AccumulateOp>([&](auto) { return emitAccumulate(op, w); })
      .Case<k::GradScaleOp>([&](auto) { return emitGradScale(op, w); })
      .Case<k::AdamOp>([&](auto) { return emitAdam(op, w); })
      .Case<k::SgdOp>([&](auto) { return emitSgd(op, w); })
      .Case<k::SgdMomentumOp>([&](auto) { return emitSgdMomentum(op, w); })
      .Default([&](Operation *) {
        return op->emitError()
               << "codegen has no CPU kernel for '" << op->getName() << "'";
      });
}

void emitGradScaleStatements(k::GradScaleOp gs, KernelSourceWriter &w) {
  double maxNorm = gs.getMaxNorm().convertToDouble();
  w.line("const float norm = " + w.ptr(gs.getGradNorm()) + "[0];");
  w.line("const float loss = " + w.ptr(gs.getLoss()) + "[0];");
  w.line("float scale = 1.0f;");
  w.open("if (!isfinite(norm) || !isfinite(loss))");
  w.line("scale = NAN; // the guard: every update skips this step");
  w.close();
  if (maxNorm > 0.0) {
    w.open("else");
    w.line("// torch.nn.utils.clip_grad_norm_: min(1, max_norm / (norm + "
           "1e-6))");
    w.line("const float clip = " + literal(maxNorm) + " / (norm + 1e-6f);");
    w.line("scale = clip < 1.0f ? clip : 1.0f;");
    w.close();
  }
  w.line(w.ptr(gs.getResult()) + "[0] = scale;");
}

// The formulas of torch.optim.AdamW / Adam / SGD, one text for both targets.

std::string updateSummary(Operation *op) {
  if (auto adam = dyn_cast<k::AdamOp>(op))
    return std::string(adam.getDecoupledWeightDecay() ? "AdamW" : "Adam") +
           " over " + str(numElements(shapeOf(adam.getParam()))) +
           " parameters, in place; weight decay " +
           literal(adam.getWeightDecay());
  if (auto sgd = dyn_cast<k::SgdOp>(op))
    return "SGD over " + str(numElements(shapeOf(sgd.getParam()))) +
           " parameters, in place; weight decay " +
           literal(sgd.getWeightDecay());
  auto sgd = cast<k::SgdMomentumOp>(op);
  return "SGD with momentum " + literal(sgd.getMomentum()) +
         (sgd.getNesterov() ? " (nesterov)" : "") + " over " +
         str(numElements(shapeOf(sgd.getParam()))) +
         " parameters, in place; weight decay " +
         literal(sgd.getWeightDecay());
}

void emitUpdateScalarStatements(Operation *op, KernelSourceWriter &w,
                                function_ref<std::string(Value)> name) {
  auto ptr = [&](Value v) { return name ? name(v) : w.ptr(v); };
  auto scalar = [&](StringRef var, Value v) {
    w.line("const float " + var + " = " + ptr(v) + "[0];");
  };
  if (auto adam = dyn_cast<k::AdamOp>(op)) {
    std::string b1 = literal(adam.getBeta1()), b2 = literal(adam.getBeta2());
    scalar("lr", adam.getLr());
    scalar("t", adam.getStep());
    w.line("const float bc1 = (float)(1.0 - pow((double)" + b1 +
           ", (double)t));");
    w.line("const float bc2 = (float)(1.0 - pow((double)" + b2 +
           ", (double)t));");
    return;
  }
  if (auto sgd = dyn_cast<k::SgdOp>(op)) {
    scalar("lr", sgd.getLr());
    return;
  }
  auto sgd = cast<k::SgdMomentumOp>(op);
  scalar("lr", sgd.getLr());
  w.line("// torch.optim.SGD: the buffer starts as the first gradient");
  w.line("const bool first = " + ptr(sgd.getStep()) + "[0] <= 1.0f;");
}

SmallVector<Value> updateElementOperands(Operation *op) {
  if (auto adam = dyn_cast<k::AdamOp>(op))
    return {adam.getParam(), adam.getGrad(), adam.getM(), adam.getV()};
  if (auto sgd = dyn_cast<k::SgdOp>(op))
    return {sgd.getParam(), sgd.getGrad()};
  auto sgd = cast<k::SgdMomentumOp>(op);
  return {sgd.getParam(), sgd.getGrad(), sgd.getBuf()};
}

SmallVector<Value> updateElementResults(Operation *op) {
  if (auto adam = dyn_cast<k::AdamOp>(op))
    return {adam.getNewParam(), adam.getNewM(), adam.getNewV()};
  if (auto sgd = dyn_cast<k::SgdOp>(op))
    return {sgd.getNewParam()};
  auto sgd = cast<k::SgdMomentumOp>(op);
  return {sgd.getNewParam(), sgd.getNewBuf()};
}

void emitUpdateElementStatements(Operation *op, KernelSourceWriter &w,
                                 function_ref<std::string(Value)> name,
                                 StringRef index) {
  // Element `index` of an operand or result.
  auto at = [&](Value v) {
    return (name ? name(v) : w.ptr(v)) + "[" + index.str() + "]";
  };
  if (auto adam = dyn_cast<k::AdamOp>(op)) {
    std::string b1 = literal(adam.getBeta1()), b2 = literal(adam.getBeta2());
    double wd = adam.getWeightDecay().convertToDouble();
    bool decoupled = adam.getDecoupledWeightDecay();
    w.line("float g = " + at(adam.getGrad()) + " * scale;");
    if (wd != 0.0 && !decoupled)
      w.line("g += " + literal(wd) + " * p; // L2, as torch.optim.Adam");
    w.line("const float m = " + b1 + " * " + at(adam.getM()) + " + (1.0f - " +
           b1 + ") * g;");
    w.line("const float v = " + b2 + " * " + at(adam.getV()) + " + (1.0f - " +
           b2 + ") * g * g;");
    if (wd != 0.0 && decoupled)
      w.line("pn -= lr * " + literal(wd) + " * p; // decoupled (AdamW)");
    w.line("pn -= lr * (m / bc1) / (sqrtf(v / bc2) + " +
           literal(adam.getEpsilon()) + ");");
    w.line(at(adam.getNewParam()) + " = pn;");
    w.line(at(adam.getNewM()) + " = m;");
    w.line(at(adam.getNewV()) + " = v;");
    return;
  }
  if (auto sgd = dyn_cast<k::SgdOp>(op)) {
    double wd = sgd.getWeightDecay().convertToDouble();
    w.line("float g = " + at(sgd.getGrad()) + " * scale;");
    if (wd != 0.0)
      w.line("g += " + literal(wd) + " * p;");
    w.line("pn = p - lr * g;");
    w.line(at(sgd.getNewParam()) + " = pn;");
    return;
  }
  auto sgd = cast<k::SgdMomentumOp>(op);
  double wd = sgd.getWeightDecay().convertToDouble();
  std::string mu = literal(sgd.getMomentum());
  std::string damp = literal(1.0 - sgd.getDampening().convertToDouble());
  w.line("float g = " + at(sgd.getGrad()) + " * scale;");
  if (wd != 0.0)
    w.line("g += " + literal(wd) + " * p;");
  w.line("const float buf = first ? g : " + mu + " * " + at(sgd.getBuf()) +
         " + " + damp + " * g;");
  w.line(std::string("const float d = ") +
         (sgd.getNesterov() ? "g + " + mu + " * buf" : "buf") + ";");
  w.line("pn = p - lr * d;");
  w.line(at(sgd.getNewParam()) + " = pn;");
  w.line(at(sgd.getNewBuf()) + " = buf;");
}

} // namespace kiln
