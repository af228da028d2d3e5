//===- CudaRowKernels.cpp - CUDA kernels of the row ops -------------------===//
//
// Softmax and cross entropy, forward and backward: ops that work on rows of
// [rows, C] (C the last dimension); and the helpers the norms' kernels
// (CudaNormKernels.cpp) share with them.
//
// Shapes of parallelism:
//   - one block per row, rows strided by the grid; the row's sums and maxima
//     by kiln_block_sum / kiln_block_max (cross entropy's max and sum of
//     exponentials in one pass: kiln_online_add8 a run of 8 columns, or
//     kiln_online_add a column, then kiln_block_max_sum);
//     rows wider than 8192 (logits) get up to 1024 threads;
//   - cross entropy reads its rows in runs of 8 columns (32-byte loads of
//     f32 logits, 16-byte of bf16 ones) and writes a bf16 gradient 16 bytes
//     at a time where C % 8 == 0;
//   - the mean loss: block partials in a __device__ scratch array, combined
//     in block order by the last block (kiln_last_block).
// Fused row kernels: the emitters call beginRow/endRow (CudaBespokeKernels.h)
// at the top and bottom of each row.
// Numerics: float accumulation, every sum in a fixed order, so a kernel gives
// the same bits on every run.
// The norms and their backwards are in CudaNormKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/RowGroup.h"
#include "codegen/PointwiseStatements.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
} // namespace

std::string countLiteral(int64_t v) { return str(v) + ".0f"; }

double floatAttr(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<FloatAttr>(name);
  return attr ? attr.getValueAsDouble() : 0.0;
}

void openRowLoop(KernelSourceWriter &w, int64_t rows, int64_t columns,
                 CudaLaunch &launch) {
  launch = {cudaGridFor(rows, 1, kCudaMaxRowGrid), cudaRowThreads(columns), 0};
  w.line("// one block of " + str(launch.block) + " threads per row");
  w.open("for (int64_t r = blockIdx.x; r < " + str(rows) +
         "; r += gridDim.x)");
}

std::string columnLoop(int64_t columns) {
  return "for (int64_t c = threadIdx.x; c < " + str(columns) +
         "; c += blockDim.x)";
}

namespace {

// A row of `columns` f32 or bf16 read (or bf16 written) in runs of 8 columns
// per thread (kiln_lanes8): 32- and 16-byte accesses instead of 4 and 2, so a
// vocabulary-wide row keeps enough bytes in flight. Needs whole runs: every
// row then starts 32-byte aligned (16-byte for bf16 logits, what their runs
// need).
bool columnRuns(int64_t columns) { return columns % 8 == 0; }
// `for (int64_t c8 = threadIdx.x; c8 < C / 8; c8 += blockDim.x)`, with
// `const int64_t c0 = c8 * 8;` the run's first column.
void openColumnRunLoop(KernelSourceWriter &w, int64_t columns) {
  w.open("for (int64_t c8 = threadIdx.x; c8 < " + str(columns / 8) +
         "; c8 += blockDim.x)");
  w.line("const int64_t c0 = c8 * 8;");
}

// `const T* x = <logits> + r * columns;`: a row of f32 logits, or of bf16
// ones (mixed precision), widened where they are read (loadElement).
void emitLogitsRow(KernelSourceWriter &w, Value logits, int64_t columns) {
  w.line("const " + w.cType(logits) + "* x = " + w.ptr(logits) + " + r * " +
         str(columns) + ";");
}
// The run of 8 logits at column c0 (32 bytes of f32, 16 of bf16).
void emitLogitsRun(KernelSourceWriter &w, Value logits) {
  w.line("const kiln_lanes8<" + w.cType(logits) + "> xs = kiln_load_lanes8(x + c0);");
}

// The online max and sum of row `x`'s first `valid` of `columns` elements
// into the thread's `mx` and `sum` (declared here), in runs of 8 where
// columnRuns allows, one element per thread otherwise.
void emitOnlineMaxSum(KernelSourceWriter &w, Value logits, int64_t columns,
                      int64_t valid) {
  w.line("float mx = -INFINITY, sum = 0.0f;");
  if (!columnRuns(columns)) {
    w.line(columnLoop(valid) + " kiln_online_add(" + loadElement(logits, "x[c]") +
           ", mx, sum);");
    return;
  }
  // A run at once (kiln_online_add8); padded classes are -INFINITY there.
  openColumnRunLoop(w, columns);
  emitLogitsRun(w, logits);
  w.line("float xr[8];");
  std::string value = loadElement(logits, "xs.v[j]");
  if (valid < columns)
    value = "c0 + j < " + str(valid) + " ? " + value + " : -INFINITY";
  w.line("KILN_UNROLL for (int j = 0; j < 8; ++j) xr[j] = " + value + ";");
  w.line("kiln_online_add8(xr, mx, sum);");
  w.close();
}

// Per row: y = exp(x - max) / sum(exp(x - max)); a fully masked row (max
// -inf) is all zeros, as on the CPU.
LogicalResult emitSoftmax(Operation *op, KernelSourceWriter &w,
                          CudaLaunch &launch, CudaRowFusion *rows) {
  Value x = op->getOperand(0), y = op->getResult(0);
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c);
  w.line("// softmax over rows of [" + str(r) + ", " + cs + "]");
  openRowLoop(w, r, c, launch);
  if (failed(beginRow(w, rows, "r", c, RowLanes::Block)))
    return failure();
  w.line("const float* x = " + w.ptr(x) + " + r * " + cs + ";");
  w.line("float* y = " + w.ptr(y) + " + r * " + cs + ";");
  w.line("float mx = -INFINITY;");
  w.line(columnLoop(c) + " mx = fmaxf(mx, x[c]);");
  w.line("mx = kiln_block_max(mx);");
  w.line("float sum = 0.0f;");
  w.open(columnLoop(c));
  w.line("const float e = mx == -INFINITY ? 0.0f : expf(x[c] - mx);");
  w.line("y[c] = e;");
  w.line("sum += e;");
  w.close();
  w.line("sum = kiln_block_sum(sum);");
  w.line("const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;");
  w.line(columnLoop(c) + " y[c] *= inv;");
  if (failed(endRow(w, rows, "r", c)))
    return failure();
  w.close();
  return success();
}

// Per row: dx = y * (dy - sum(dy * y)).
LogicalResult emitSoftmaxGrad(Operation *op, KernelSourceWriter &w,
                              CudaLaunch &launch, CudaRowFusion *rows) {
  Value y = op->getOperand(0), dy = op->getOperand(1), dx = op->getResult(0);
  auto [r, c] = rowsAndColumns(y);
  std::string cs = str(c);
  w.line("// softmax backward over rows of [" + str(r) + ", " + cs + "]");
  openRowLoop(w, r, c, launch);
  if (failed(beginRow(w, rows, "r", c, RowLanes::Block)))
    return failure();
  w.line("const float* y = " + w.ptr(y) + " + r * " + cs + ";");
  w.line("const float* dy = " + w.ptr(dy) + " + r * " + cs + ";");
  w.line("float* dx = " + w.ptr(dx) + " + r * " + cs + ";");
  w.line("float dot = 0.0f;");
  w.line(columnLoop(c) + " dot += dy[c] * y[c];");
  w.line("dot = kiln_block_sum(dot);");
  w.line(columnLoop(c) + " dx[c] = y[c] * (dy[c] - dot);");
  if (failed(endRow(w, rows, "r", c)))
    return failure();
  w.close();
  return success();
}

// The end of a cross-entropy kernel whose row loop (launched as `launch`)
// added each row's loss to `blockLoss` in row order: thread 0's sum per
// block, then the last block's sum of those in block order, divided by the
// `rows`, into loss[0].
void emitMeanLoss(KernelSourceWriter &w, const CudaLaunch &launch, int64_t rows,
                  const std::string &loss) {
  std::string partial = (kEntryPlaceholder + "_partial").str();
  std::string done = (kEntryPlaceholder + "_done").str();
  w.global("__device__ float " + partial + "[" + str(launch.grid) + "];");
  w.global("__device__ unsigned int " + done + " = 0u;");
  w.line("if (threadIdx.x == 0) " + partial + "[blockIdx.x] = blockLoss;");
  w.line("if (!kiln_last_block(&" + done + ")) return;");
  w.line("float total = 0.0f;");
  w.line("for (int b = threadIdx.x; b < " + str(launch.grid) +
         "; b += blockDim.x) total += __ldcg(&" + partial + "[b]);");
  w.line("total = kiln_block_sum(total);");
  w.line("if (threadIdx.x == 0) " + loss + "[0] = total / " + countLiteral(rows) + ";");
}

// loss = mean over rows n of logsumexp(logits[n]) - logits[n, target[n]]
// (0 for a target outside [0, V)). Each block sums its rows' losses in row
// order; the last block sums the block partials in block order.
LogicalResult emitCrossEntropy(Operation *op, KernelSourceWriter &w,
                               CudaLaunch &launch, CudaRowFusion *rows) {
  Value logits = op->getOperand(0), targets = op->getOperand(1);
  Value loss = op->getResult(0);
  auto [n, v] = rowsAndColumns(logits);
  int64_t valid = validClasses(op, v); // < v when pad-dims padded the classes
  std::string vs = str(v), ns = str(n), cs = str(valid);
  w.line("// mean cross entropy of [" + ns + ", " + vs + "] logits");
  w.line("float blockLoss = 0.0f; // thread 0's sum of this block's rows");
  openRowLoop(w, n, v, launch);
  if (failed(beginRow(w, rows, "r", v, RowLanes::Block)))
    return failure();
  emitLogitsRow(w, logits, v);
  // One pass: the online max and sum (kiln_online_add8 / kiln_online_add).
  emitOnlineMaxSum(w, logits, v, valid);
  w.line("const KilnMaxSum stats = kiln_block_max_sum(mx, sum);");
  w.line("mx = stats.max;");
  w.line("sum = stats.sum;");
  w.line("const int64_t t = (int64_t)" + w.ptr(targets) + "[r];");
  w.line("blockLoss += (t < 0 || t >= " + cs +
         ") ? 0.0f : logf(sum) + mx - " + loadElement(logits, "x[t]") + ";");
  if (failed(endRow(w, rows, "r", v)))
    return failure();
  w.close();
  emitMeanLoss(w, launch, n, w.ptr(loss));
  return success();
}

// dlogits[n, c] = (softmax(logits[n])[c] - (c == target[n])) * grad / N;
// a row whose target is outside [0, V) gets zeros (its loss is constant).
// With a loss result, also cross_entropy's loss, with its kernel's bits:
// the same launch, row statistics and sums (emitMeanLoss).
LogicalResult emitCrossEntropyGrad(Operation *op, KernelSourceWriter &w,
                                   CudaLaunch &launch, CudaRowFusion *rows) {
  Value logits = op->getOperand(0), targets = op->getOperand(1),
        grad = op->getOperand(2);
  Value out = op->getResult(0);
  Value loss = op->getNumResults() > 1 ? op->getResult(1) : Value();
  auto [n, v] = rowsAndColumns(logits);
  int64_t valid = validClasses(op, v); // classes >= valid get gradient 0
  std::string vs = str(v), ns = str(n), cs = str(valid);
  w.line("// cross entropy backward of [" + ns + ", " + vs + "] logits" +
         (loss ? ", and its mean loss" : ""));
  w.line("const float scale = " + w.ptr(grad) + "[0] / " + countLiteral(n) +
         ";");
  if (loss)
    w.line("float blockLoss = 0.0f; // thread 0's sum of this block's rows");
  openRowLoop(w, n, v, launch);
  if (failed(beginRow(w, rows, "r", v, RowLanes::Block)))
    return failure();
  emitLogitsRow(w, logits, v);
  // dx is f32, or bf16 (each element rounded once) where mixed precision
  // made the gradient its GEMMs' bf16 operand.
  Type dxType = cast<RankedTensorType>(out.getType()).getElementType();
  auto store = [&](const std::string &value) {
    return storeElement(dxType, "dx[c]", value);
  };
  w.line(w.cType(out) + "* dx = " + w.ptr(out) + " + r * " + vs + ";");
  w.line("const int64_t t = (int64_t)" + w.ptr(targets) + "[r];");
  w.open("if (t < 0 || t >= " + cs + ")");
  w.line(columnLoop(v) + " " + store("0.0f"));
  w.close();
  // Uniform across the block (one target per row): no barrier is skipped.
  w.open("else");
  // The target's logit is read before the row statistics' barrier, which
  // every thread's gradient stores follow: dx may be the logits' own bytes
  // (writesInPlace), and each store then replaces a logit its thread has
  // just read.
  if (loss)
    w.line("const float xt = " + loadElement(logits, "x[t]") + ";");
  // Two passes over the row: the online max and sum, then the gradient.
  emitOnlineMaxSum(w, logits, v, valid);
  w.line("const KilnMaxSum stats = kiln_block_max_sum(mx, sum);");
  w.line("mx = stats.max;");
  w.line("const float inv = 1.0f / stats.sum;");
  if (loss)
    w.line("blockLoss += logf(stats.sum) + mx - xt;");
  auto gradient = [&](const std::string &c, const std::string &logit) {
    return (valid < v ? c + " < " + cs + " ? " : std::string()) + "(expf(" + logit +
           " - mx) * inv - (" + c + " == t ? 1.0f : 0.0f)) * scale" +
           (valid < v ? " : 0.0f" : "");
  };
  if (columnRuns(v)) {
    openColumnRunLoop(w, v);
    emitLogitsRun(w, logits);
    w.line("kiln_lanes8<" + w.cType(out) + "> ds;");
    w.line("KILN_UNROLL for (int j = 0; j < 8; ++j) " +
           storeElement(dxType, "ds.v[j]",
                        gradient("c0 + j", loadElement(logits, "xs.v[j]"))));
    w.line("kiln_store_lanes8(dx + c0, ds);");
    w.close();
  } else {
    w.line(columnLoop(v) + " " + store(gradient("c", loadElement(logits, "x[c]"))));
  }
  w.close();
  if (failed(endRow(w, rows, "r", v)))
    return failure();
  w.close();
  if (loss)
    emitMeanLoss(w, launch, n, w.ptr(loss));
  return success();
}
} // namespace

bool hasRowCudaKernel(Operation *op) {
  return isa<k::LayerNormOp, k::LayerNormGradOp, k::RmsNormOp,
             k::RmsNormGradOp, k::SoftmaxOp, k::SoftmaxGradOp,
             k::CrossEntropyOp, k::CrossEntropyGradOp>(op);
}

LogicalResult emitRowCudaKernel(Operation *op, KernelSourceWriter &w,
                                CudaLaunch &launch, CudaRowFusion *rows) {
  using Emitter = LogicalResult (*)(Operation *, KernelSourceWriter &,
                                    CudaLaunch &, CudaRowFusion *);
  Emitter emitter =
      llvm::TypeSwitch<Operation *, Emitter>(op)
          .Case<k::LayerNormOp, k::RmsNormOp>([](auto) { return emitNormCudaKernel; })
          .Case<k::LayerNormGradOp, k::RmsNormGradOp>(
              [](auto) { return emitNormGradCudaKernel; })
          .Case<k::SoftmaxOp>([](auto) { return emitSoftmax; })
          .Case<k::SoftmaxGradOp>([](auto) { return emitSoftmaxGrad; })
          .Case<k::CrossEntropyOp>([](auto) { return emitCrossEntropy; })
          .Case<k::CrossEntropyGradOp>(
              [](auto) { return emitCrossEntropyGrad; })
          .Default([](Operation *) { return nullptr; });
  if (!emitter)
    return op->emitError() << "codegen has no CUDA row kernel for '"
                           << op->getName() << "'";
  return emitter(op, w, launch, rows);
}

} // namespace kiln
