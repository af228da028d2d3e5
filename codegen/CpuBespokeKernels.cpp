//===- CpuBespokeKernels.cpp - Hand-shaped loop nests for non-pointwise ops ===//
//
// (The optimizer ops' kernels are in CpuOptimizerKernels.cpp.)
//
// Numerics: every reduction accumulates in double and in a fixed order, so a
// kernel gives the same bits on every run whatever the thread count
// (parallel loops only split independent outputs, or fixed chunks that are
// combined serially). Row-wise ops view their input as [rows, C] with C the
// last dimension.
//
//===----------------------------------------------------------------------===//

#include "codegen/CpuBespokeKernels.h"

#include "codegen/DataMovement.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/RopeKernel.h"
#include "codegen/RowGroup.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

double floatAttr(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<FloatAttr>(name);
  return attr ? attr.getValueAsDouble() : 0.0;
}

std::string floatAttrLiteral(Operation *op, StringRef name) {
  return ScalarExprEmitter::floatLiteral(floatAttr(op, name));
}

// Splits a shape into [rows, C] with C the last dimension.
std::pair<int64_t, int64_t> rowsAndColumns(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  int64_t c = shape.empty() ? 1 : shape.back();
  return {numElements(shape) / c, c};
}

// sum over `dims` of input [..] -> output [kept dims]:
//   for o in outputs: acc = 0; for r in reduced elements: acc += in[base(o) + off(r)]
// with two shapes of loop for speed: one output (parallel fixed chunks), and
// leading dims reduced (column blocks, contiguous reads).
LogicalResult emitReduceSum(Operation *op, KernelSourceWriter &w) {
  Value in = op->getOperand(0), out = op->getResult(0);
  ReductionLayout layout = reductionLayout(
      in, op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef(), "o",
      "r");
  ArrayRef<int64_t> shape = layout.shape, dims = layout.dims;
  const SmallVector<int64_t> &kept = layout.kept, &reduced = layout.reduced;
  int64_t outN = layout.outputs, redN = layout.reducedCount;
  std::string base = layout.base, off = layout.offset;
  std::string acc = w.cType(out) == "float" ? "double" : "int64_t";
  std::string t = w.cType(out);
  w.line("// sum over dims " + shapeString(dims) + ": " + shapeString(shape) +
         " -> " + shapeString(shapeOf(out)));
  if (outN == 1 && redN >= kParallelWork) {
    // One output: 64 fixed chunks summed in parallel, combined in order.
    w.line(acc + " partial[64];");
    w.line("#pragma omp parallel for schedule(static)");
    w.open("for (int64_t c = 0; c < 64; ++c)");
    w.line(acc + " acc = 0;");
    w.open("for (int64_t r = " + str(redN) + " * c / 64; r < " + str(redN) +
           " * (c + 1) / 64; ++r)");
    w.line("acc += " + w.ptr(in) + "[" + off + "];");
    w.close();
    w.line("partial[c] = acc;");
    w.close();
    w.line(acc + " acc = 0;");
    w.line("for (int64_t c = 0; c < 64; ++c) acc += partial[c];");
    w.line(w.ptr(out) + "[0] = (" + t + ")acc;");
    return success();
  }
  bool leadingDimsReduced = !reduced.empty() && !kept.empty() &&
                            reduced.back() < kept.front();
  if (leadingDimsReduced && outN > 1) {
    // The input is [redN, outN] row-major (bias gradients: sum over batch
    // and sequence). Blocks of 64 columns per thread, rows walked in order:
    // contiguous reads, and per column the same summation order as the
    // general loop below, so the bits do not depend on which loop ran.
    w.line("// leading dims reduced: [" + str(redN) + ", " + str(outN) +
           "] -> [" + str(outN) + "]");
    w.parallelFor(outN * redN);
    w.open("for (int64_t cb = 0; cb < " + str(outN) + "; cb += 64)");
    w.line("const int64_t ce = cb + 64 < " + str(outN) + " ? cb + 64 : " +
           str(outN) + ";");
    w.line(acc + " part[64] = {0};");
    w.open("for (int64_t r = 0; r < " + str(redN) + "; ++r)");
    w.line("for (int64_t o = cb; o < ce; ++o) part[o - cb] += " + w.ptr(in) +
           "[r * " + str(outN) + " + o];");
    w.close();
    w.line("for (int64_t o = cb; o < ce; ++o) " + w.ptr(out) + "[o] = (" + t +
           ")part[o - cb];");
    w.close();
    return success();
  }
  if (outN > 1)
    w.parallelFor(outN * redN);
  w.open("for (int64_t o = 0; o < " + str(outN) + "; ++o)");
  // A row of the input only when the reduced dims are the trailing ones.
  bool trailing = !reduced.empty() && (kept.empty() || kept.back() < reduced.front());
  if (trailing)
    w.beginRow("o", redN);
  w.line("const int64_t base = " + base + ";");
  w.line(acc + " acc = 0;");
  w.open("for (int64_t r = 0; r < " + str(redN) + "; ++r)");
  w.line("acc += " + w.ptr(in) + "[base + " + off + "];");
  w.close();
  w.line(w.ptr(out) + "[o] = (" + t + ")acc;");
  w.close();
  return success();
}

// out[i] = in[index of the permuted coordinates of i]
// out[i] = one input element (codegen/DataMovement.h)
LogicalResult emitDataMovement(Operation *op, KernelSourceWriter &w) {
  Value out = op->getResult(0);
  int64_t n = numElements(shapeOf(out));
  std::string element = movedElement(op, w, "i");
  w.parallelFor(n);
  w.open("for (int64_t i = 0; i < " + str(n) + "; ++i)");
  w.line(w.ptr(out) + "[i] = " + element + ";");
  w.close();
  return success();
}

// out[n, :] = table[indices[n], :] (zeros for an out-of-range index)
LogicalResult emitEmbedding(Operation *op, KernelSourceWriter &w) {
  Value table = op->getOperand(0), indices = op->getOperand(1);
  Value out = op->getResult(0);
  auto [v, d] = rowsAndColumns(table);
  int64_t n = numElements(shapeOf(indices));
  std::string t = w.cType(out);
  w.line("// gather rows of the [" + str(v) + ", " + str(d) + "] table for " +
         str(n) + " indices");
  w.parallelFor(n * d);
  w.open("for (int64_t n = 0; n < " + str(n) + "; ++n)");
  w.line("const int64_t row = (int64_t)" + w.ptr(indices) + "[n];");
  w.line(t + "* dst = " + w.ptr(out) + " + n * " + str(d) + ";");
  w.open("if (row < 0 || row >= " + str(v) + ")");
  w.line("for (int64_t c = 0; c < " + str(d) + "; ++c) dst[c] = 0;");
  w.line("continue;");
  w.close();
  w.line("const " + t + "* src = " + w.ptr(table) + " + row * " + str(d) +
         ";");
  w.line("for (int64_t c = 0; c < " + str(d) + "; ++c) dst[c] = src[c];");
  w.close();
  return success();
}

// out = zeros [V, D] (or acc, whose buffer out is); out[indices[n], :] +=
// grad[n, :] for n in order. Threads own disjoint column blocks, so there
// are no races and each element accumulates in the same order on every run.
LogicalResult emitEmbeddingGrad(Operation *op, KernelSourceWriter &w) {
  auto scatter = cast<k::EmbeddingGradOp>(op);
  Value indices = scatter.getIndices(), grad = scatter.getGrad();
  Value out = op->getResult(0);
  auto [v, d] = rowsAndColumns(out);
  int64_t n = numElements(shapeOf(indices));
  int64_t blocks = (d + 63) / 64;
  std::string t = w.cType(out);
  w.line("// scatter-add " + str(n) + " rows of grad into [" + str(v) + ", " +
         str(d) + "]" + (scatter.getAcc() ? ", which holds acc" : ""));
  if (!scatter.getAcc()) {
    w.parallelFor(v * d);
    w.line("for (int64_t e = 0; e < " + str(v * d) + "; ++e) " + w.ptr(out) +
           "[e] = 0;");
  }
  w.parallelFor(n * d);
  w.open("for (int64_t b = 0; b < " + str(blocks) + "; ++b)");
  w.line("const int64_t c0 = b * 64;");
  w.line("const int64_t c1 = c0 + 64 < " + str(d) + " ? c0 + 64 : " + str(d) +
         ";");
  w.open("for (int64_t n = 0; n < " + str(n) + "; ++n)");
  w.line("const int64_t row = (int64_t)" + w.ptr(indices) + "[n];");
  w.line("if (row < 0 || row >= " + str(v) + ") continue;");
  w.line(t + "* dst = " + w.ptr(out) + " + row * " + str(d) + ";");
  w.line("const " + t + "* src = " + w.ptr(grad) + " + n * " + str(d) + ";");
  w.line("for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];");
  w.close();
  w.close();
  return success();
}

// Per row of [R, C]: layer norm: mean, rstd = 1/sqrt(var + eps) (biased
// variance), y = (x - mean) * rstd * weight + bias; RMS norm: rstd =
// 1/sqrt(mean(x^2) + eps), y = x * rstd * weight.
LogicalResult emitNorm(Operation *op, KernelSourceWriter &w) {
  NormValues n = normValues(op);
  auto [r, c] = rowsAndColumns(n.x);
  std::string cs = str(c);
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") + " norm over rows of [" +
         str(r) + ", " + cs + "]");
  w.parallelFor(r * c);
  w.open("for (int64_t r = 0; r < " + str(r) + "; ++r)");
  w.beginRow("r", c);
  w.line("const float* x = " + w.ptr(n.x) + " + r * " + cs + ";");
  if (n.centered) {
    w.line("double sum = 0;");
    w.line("for (int64_t c = 0; c < " + cs + "; ++c) sum += x[c];");
    w.line("const double m = sum / " + cs + ";");
  } else {
    w.line("const double m = 0;");
  }
  w.line("double var = 0;");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.line("const double dx = x[c] - m;");
  w.line("var += dx * dx;");
  w.close();
  w.line("var /= " + cs + ";");
  w.line("const double rs = 1.0 / sqrt(var + (double)" +
         floatAttrLiteral(op, "epsilon") + ");");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.rowElement(n.y, "r * " + cs + " + c",
               "(float)((x[c] - m) * rs) * " + w.ptr(n.weight) + "[c]" +
                   (n.centered ? " + " + w.ptr(n.bias) + "[c]" : std::string()));
  w.close();
  if (n.centered)
    w.line(w.ptr(n.mean) + "[r] = (float)m;");
  w.line(w.ptr(n.rstd) + "[r] = (float)rs;");
  w.endRow("r", c);
  w.close();
  return success();
}

// With xhat = (x - mean) * rstd (mean 0 for RMS norm) and dxhat = grad *
// weight, per row:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// (RMS norm: without the mean(dxhat) term), and per column: dweight =
// sum_rows(grad * xhat), dbias = sum_rows(grad) (layer norm).
LogicalResult emitNormGrad(Operation *op, KernelSourceWriter &w) {
  NormValues n = normValues(op);
  auto [r, c] = rowsAndColumns(n.x);
  std::string cs = str(c), rs = str(r);
  std::string mean = n.centered ? w.ptr(n.mean) + "[r]" : std::string("0.0");
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") +
         " norm backward over rows of [" + rs + ", " + cs + "]");
  w.parallelFor(r * c);
  w.open("for (int64_t r = 0; r < " + rs + "; ++r)");
  w.beginRow("r", c);
  w.line("const float* x = " + w.ptr(n.x) + " + r * " + cs + ";");
  w.line("const float* g = " + w.ptr(n.grad) + " + r * " + cs + ";");
  w.line("const double m = " + mean + ";");
  w.line("const double s = " + w.ptr(n.rstd) + "[r];");
  // RMS norm has no mean(dxhat) term: it neither sums nor subtracts one.
  w.line(n.centered ? "double sumDxhat = 0, sumDxhatXhat = 0;" : "double sumDxhatXhat = 0;");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.line("const double xhat = (x[c] - m) * s;");
  w.line("const double dxhat = (double)g[c] * " + w.ptr(n.weight) + "[c];");
  if (n.centered)
    w.line("sumDxhat += dxhat;");
  w.line("sumDxhatXhat += dxhat * xhat;");
  w.close();
  if (n.centered)
    w.line("const double mean1 = sumDxhat / " + cs + ";");
  w.line("const double mean2 = sumDxhatXhat / " + cs + ";");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.line("const double xhat = (x[c] - m) * s;");
  w.line("const double dxhat = (double)g[c] * " + w.ptr(n.weight) + "[c];");
  w.rowElement(n.dx, "r * " + cs + " + c",
               std::string("(float)(s * (dxhat - ") + (n.centered ? "mean1 - " : "") +
                   "xhat * mean2))");
  w.close();
  w.endRow("r", c);
  w.close();
  // Column sums in blocks of 64 columns, rows in order inside each block.
  int64_t blocks = (c + 63) / 64;
  w.parallelFor(r * c);
  w.open("for (int64_t b = 0; b < " + str(blocks) + "; ++b)");
  w.line("const int64_t c0 = b * 64;");
  w.line("const int64_t c1 = c0 + 64 < " + cs + " ? c0 + 64 : " + cs + ";");
  w.line("double accW[64] = {0}, accB[64] = {0};");
  w.open("for (int64_t r = 0; r < " + rs + "; ++r)");
  w.line("const double m = " + mean + ";");
  w.line("const double s = " + w.ptr(n.rstd) + "[r];");
  w.open("for (int64_t c = c0; c < c1; ++c)");
  w.line("const double g = " + w.ptr(n.grad) + "[r * " + cs + " + c];");
  w.line("accW[c - c0] += g * ((" + w.ptr(n.x) + "[r * " + cs +
         " + c] - m) * s);");
  w.line("accB[c - c0] += g;");
  w.close();
  w.close();
  w.open("for (int64_t c = c0; c < c1; ++c)");
  w.line(w.ptr(n.dweight) + "[c] = (float)accW[c - c0];");
  if (n.centered)
    w.line(w.ptr(n.dbias) + "[c] = (float)accB[c - c0];");
  w.close();
  w.close();
  return success();
}

// Per row: y = exp(x - max) / sum(exp(x - max)).
LogicalResult emitSoftmax(Operation *op, KernelSourceWriter &w) {
  Value x = op->getOperand(0), y = op->getResult(0);
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c);
  w.line("// softmax over rows of [" + str(r) + ", " + cs + "]");
  w.parallelFor(r * c);
  w.open("for (int64_t r = 0; r < " + str(r) + "; ++r)");
  w.beginRow("r", c);
  w.line("const float* x = " + w.ptr(x) + " + r * " + cs + ";");
  w.line("float* y = " + w.ptr(y) + " + r * " + cs + ";");
  w.line("float mx = -INFINITY;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) mx = x[c] > mx ? x[c] : mx;");
  w.line("double sum = 0;");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.line("const float e = mx == -INFINITY ? 0.0f : expf(x[c] - mx);");
  w.line("y[c] = e;");
  w.line("sum += e;");
  w.close();
  w.line("const float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) y[c] *= inv;");
  w.endRow("r", c);
  w.close();
  return success();
}

// Per row: dx = y * (dy - sum(dy * y)).
LogicalResult emitSoftmaxGrad(Operation *op, KernelSourceWriter &w) {
  Value y = op->getOperand(0), dy = op->getOperand(1), dx = op->getResult(0);
  auto [r, c] = rowsAndColumns(y);
  std::string cs = str(c);
  w.line("// softmax backward over rows of [" + str(r) + ", " + cs + "]");
  w.parallelFor(r * c);
  w.open("for (int64_t r = 0; r < " + str(r) + "; ++r)");
  w.beginRow("r", c);
  w.line("const float* y = " + w.ptr(y) + " + r * " + cs + ";");
  w.line("const float* dy = " + w.ptr(dy) + " + r * " + cs + ";");
  w.line("float* dx = " + w.ptr(dx) + " + r * " + cs + ";");
  w.line("double dot = 0;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) dot += (double)dy[c] * y[c];");
  w.line("const float d = (float)dot;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) dx[c] = y[c] * (dy[c] - d);");
  w.endRow("r", c);
  w.close();
  return success();
}

// loss = mean over rows n of logsumexp(logits[n, :C]) - logits[n, target[n]]
// over the C valid classes (C = V unless padded). Row losses go to a scratch
// array and are summed serially (deterministic).
LogicalResult emitCrossEntropy(Operation *op, KernelSourceWriter &w) {
  Value logits = op->getOperand(0), targets = op->getOperand(1);
  Value loss = op->getResult(0);
  auto [n, v] = rowsAndColumns(logits);
  // Logit c of row x: bf16 logits (mixed precision) widened as read.
  auto x = [&](const std::string &c) { return loadElement(logits, "x[" + c + "]"); };
  std::string vs = str(v), ns = str(n), cs = str(validClasses(op, v));
  w.line("// mean cross entropy of [" + ns + ", " + vs + "] logits, classes < " +
         cs);
  w.line("double* rowLoss = (double*)malloc(" + ns + " * sizeof(double));");
  w.parallelFor(n * v);
  w.open("for (int64_t n = 0; n < " + ns + "; ++n)");
  w.beginRow("n", v);
  w.line("const " + w.cType(logits) + "* x = " + w.ptr(logits) + " + n * " + vs + ";");
  w.line("float mx = -INFINITY;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) mx = " + x("c") + " > mx ? " + x("c") + " : mx;");
  w.line("double sum = 0;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) sum += expf(" + x("c") + " - mx);");
  w.line("const int64_t t = (int64_t)" + w.ptr(targets) + "[n];");
  w.line("rowLoss[n] = (t < 0 || t >= " + cs +
         ") ? 0.0 : log(sum) + (double)mx - (double)" + x("t") + ";");
  w.close();
  w.line("double total = 0;");
  w.line("for (int64_t n = 0; n < " + ns + "; ++n) total += rowLoss[n];");
  w.line("free(rowLoss);");
  w.line(w.ptr(loss) + "[0] = (float)(total / " + ns + ");");
  return success();
}

// dlogits[n, c] = (softmax(logits[n, :C])[c] - (c == target[n])) * grad / N
// for the C valid classes; exactly 0 for classes >= C (padding).
LogicalResult emitCrossEntropyGrad(Operation *op, KernelSourceWriter &w) {
  Value logits = op->getOperand(0), targets = op->getOperand(1),
        grad = op->getOperand(2);
  Value out = op->getResult(0);
  auto [n, v] = rowsAndColumns(logits);
  // Logit c of row x: bf16 logits (mixed precision) widened as read.
  auto x = [&](const std::string &c) { return loadElement(logits, "x[" + c + "]"); };
  std::string vs = str(v), ns = str(n), cs = str(validClasses(op, v));
  w.line("// cross entropy backward of [" + ns + ", " + vs +
         "] logits, classes < " + cs);
  w.line("const float scale = " + w.ptr(grad) + "[0] / " + ns + ".0f;");
  // With a loss result: each row's loss as cross_entropy's kernel computes
  // it (the same statistics), summed after the parallel loop in row order.
  Value loss = op->getNumResults() > 1 ? op->getResult(1) : Value();
  if (loss)
    w.line("double* rowLoss = (double*)malloc(" + ns + " * sizeof(double));");
  w.parallelFor(n * v);
  w.open("for (int64_t n = 0; n < " + ns + "; ++n)");
  w.beginRow("n", v);
  w.line("const " + w.cType(logits) + "* x = " + w.ptr(logits) + " + n * " + vs + ";");
  // dx is f32, or bf16 (each element rounded once) where mixed precision
  // made the gradient its GEMMs' bf16 operand.
  Type dxType = cast<RankedTensorType>(out.getType()).getElementType();
  auto store = [&](const std::string &value) {
    return storeElement(dxType, "dx[c]", value);
  };
  w.line(w.cType(out) + "* dx = " + w.ptr(out) + " + n * " + vs + ";");
  w.line("for (int64_t c = " + cs + "; c < " + vs + "; ++c) " + store("0.0f"));
  w.line("float mx = -INFINITY;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) mx = " + x("c") + " > mx ? " + x("c") + " : mx;");
  w.line("double sum = 0;");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) sum += expf(" + x("c") + " - mx);");
  w.line("const float inv = (float)(1.0 / sum);");
  w.line("const int64_t t = (int64_t)" + w.ptr(targets) + "[n];");
  if (loss)
    w.line("rowLoss[n] = (t < 0 || t >= " + cs +
           ") ? 0.0 : log(sum) + (double)mx - (double)" + x("t") + ";");
  // A target outside [0, C) contributes a constant 0 to the forward loss,
  // so its row's gradient is 0 too.
  w.open("if (t < 0 || t >= " + cs + ")");
  w.line("for (int64_t c = 0; c < " + cs + "; ++c) " + store("0.0f"));
  w.close();
  w.open("else");
  w.open("for (int64_t c = 0; c < " + cs + "; ++c)");
  w.line("const float p = expf(" + x("c") + " - mx) * inv;");
  w.line(store("(p - (c == t ? 1.0f : 0.0f)) * scale"));
  w.close();
  w.close();
  w.endRow("n", v);
  w.close();
  if (loss) {
    w.line("double total = 0;");
    w.line("for (int64_t n = 0; n < " + ns + "; ++n) total += rowLoss[n];");
    w.line("free(rowLoss);");
    w.line(w.ptr(loss) + "[0] = (float)(total / " + ns + ");");
  }
  return success();
}

} // namespace

bool hasBespokeCpuKernel(Operation *op) {
  return isDataMovement(op) ||
         isa<k::ReduceSumOp, k::EmbeddingOp, k::EmbeddingGradOp, k::LayerNormOp, k::LayerNormGradOp,
             k::RmsNormOp, k::RmsNormGradOp, k::RopeOp, k::SoftmaxOp,
             k::SoftmaxGradOp, k::CrossEntropyOp, k::CrossEntropyGradOp>(op) ||
         hasOptimizerCpuKernel(op) || hasAttentionCpuKernel(op);
}

LogicalResult emitBespokeCpuKernel(Operation *op, KernelSourceWriter &w) {
  if (hasOptimizerCpuKernel(op))
    return emitOptimizerCpuKernel(op, w);
  if (hasAttentionCpuKernel(op))
    return emitAttentionCpuKernel(op, w);
  using Emitter = LogicalResult (*)(Operation *, KernelSourceWriter &);
  Emitter emitter = llvm::TypeSwitch<Operation *, Emitter>(op)
                        .Case<k::ReduceSumOp>([](auto) { return emitReduceSum; })
                        .Case<k::TransposeOp, k::SliceOp, k::PadOp,
                              k::ConcatOp>(
                            [](auto) { return emitDataMovement; })
                        .Case<k::EmbeddingOp>([](auto) { return emitEmbedding; })
                        .Case<k::EmbeddingGradOp>(
                            [](auto) { return emitEmbeddingGrad; })
                        .Case<k::LayerNormOp, k::RmsNormOp>(
                            [](auto) { return emitNorm; })
                        .Case<k::LayerNormGradOp, k::RmsNormGradOp>(
                            [](auto) { return emitNormGrad; })
                        .Case<k::RopeOp>([](auto) { return emitRopeCpu; })
                        .Case<k::SoftmaxOp>([](auto) { return emitSoftmax; })
                        .Case<k::SoftmaxGradOp>(
                            [](auto) { return emitSoftmaxGrad; })
                        .Case<k::CrossEntropyOp>(
                            [](auto) { return emitCrossEntropy; })
                        .Case<k::CrossEntropyGradOp>(
                            [](auto) { return emitCrossEntropyGrad; })
                        .Default([](Operation *) { return nullptr; });
  if (!emitter)
    return op->emitError() << "codegen has no CPU kernel for '"
                           << op->getName() << "'";
  return emitter(op, w);
}

} // namespace kiln
