//===- CudaRowKernels.cpp - CUDA kernels of the row ops -------------------===//
//
// Layer norm, RMS norm, softmax and cross entropy, forward and backward: ops
// that work on rows of [rows, C] (C the last dimension).
//
// Shapes of parallelism:
//   - one block per row, rows strided by the grid; the row's sums and maxima
//     by kiln_block_sum / kiln_block_max (cross entropy's max and sum of
//     exponentials in one pass: kiln_online_add, then kiln_block_max_sum);
//     rows wider than 8192 (logits) get up to 1024 threads;
//   - cross entropy reads its f32 rows in runs of 8 columns (32-byte loads)
//     and writes a bf16 gradient 16 bytes at a time where C % 8 == 0;
//   - column sums of the norms' weight/bias gradients: blocks of 32-column
//     tiles over chunks of rows, the chunks' partials added in order by the
//     last block (emitColumnSums);
//   - the mean loss: block partials in a __device__ scratch array, combined
//     in block order by the last block (kiln_last_block).
// Fused row kernels: the emitters call beginRow/endRow (CudaBespokeKernels.h)
// at the top and bottom of each row; layer_norm_grad's column blocks
// recompute the prologue instead of reading what the row blocks store in
// the same launch.
// Numerics: float accumulation, every sum in a fixed order, so a kernel gives
// the same bits on every run.
// Perf note: the norms reread their row from global memory instead of
// keeping it in registers or shared memory.
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

// "768.0f": a column count as a float literal (for means).
std::string countLiteral(int64_t v) { return str(v) + ".0f"; }

double floatAttr(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<FloatAttr>(name);
  return attr ? attr.getValueAsDouble() : 0.0;
}

// Opens the loop of a row kernel: `for (r = blockIdx.x; r < rows; r +=
// gridDim.x)`, one block per row; sets the launch.
void openRowLoop(KernelSourceWriter &w, int64_t rows, int64_t columns,
                 CudaLaunch &launch) {
  launch = {cudaGridFor(rows, 1, kCudaMaxRowGrid), cudaRowThreads(columns), 0};
  w.line("// one block of " + str(launch.block) + " threads per row");
  w.open("for (int64_t r = blockIdx.x; r < " + str(rows) +
         "; r += gridDim.x)");
}

// `for (int64_t c = threadIdx.x; c < C; c += blockDim.x)`: a row's columns.
std::string columnLoop(int64_t columns) {
  return "for (int64_t c = threadIdx.x; c < " + str(columns) +
         "; c += blockDim.x)";
}

// A row of `columns` f32 read (or bf16 written) in runs of 8 columns per
// thread (kiln_lanes8): 32- and 16-byte accesses instead of 4 and 2, so a
// vocabulary-wide row keeps enough bytes in flight. Needs whole runs: every
// row then starts 32-byte aligned.
bool columnRuns(int64_t columns) { return columns % 8 == 0; }
// `for (int64_t c8 = threadIdx.x; c8 < C / 8; c8 += blockDim.x)`, with
// `const int64_t c0 = c8 * 8;` the run's first column.
void openColumnRunLoop(KernelSourceWriter &w, int64_t columns) {
  w.open("for (int64_t c8 = threadIdx.x; c8 < " + str(columns / 8) +
         "; c8 += blockDim.x)");
  w.line("const int64_t c0 = c8 * 8;");
}

// The online max and sum of row `x`'s first `valid` of `columns` elements
// into the thread's `mx` and `sum` (declared here), in runs of 8 where
// columnRuns allows, one element per thread otherwise.
void emitOnlineMaxSum(KernelSourceWriter &w, int64_t columns, int64_t valid) {
  w.line("float mx = -INFINITY, sum = 0.0f;");
  if (!columnRuns(columns)) {
    w.line(columnLoop(valid) + " kiln_online_add(x[c], mx, sum);");
    return;
  }
  openColumnRunLoop(w, columns);
  w.line("const kiln_lanes8<float> xs = kiln_load_lanes8(x + c0);");
  w.line("KILN_UNROLL for (int j = 0; j < 8; ++j) " +
         std::string(valid < columns ? "if (c0 + j < " + str(valid) + ") " : "") +
         "kiln_online_add(xs.v[j], mx, sum);");
  w.close();
}

// Per row of [R, C]: layer norm: mean, rstd = 1/sqrt(var + eps) (biased
// variance, two passes), y = (x - mean) * rstd * weight + bias; RMS norm
// (NormValues.centered false): rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd
// * weight.
LogicalResult emitNorm(Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                       CudaRowFusion *rows) {
  NormValues n = normValues(op);
  Value x = n.x, weight = n.weight, y = n.y, rstd = n.rstd;
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c), cf = countLiteral(c);
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") + " norm over rows of [" +
         str(r) + ", " + cs + "]");
  openRowLoop(w, r, c, launch);
  if (failed(beginRow(w, rows, "r", c, RowLanes::Block)))
    return failure();
  w.line("const float* x = " + w.ptr(x) + " + r * " + cs + ";");
  w.line("float* y = " + w.ptr(y) + " + r * " + cs + ";");
  if (n.centered) {
    w.line("float sum = 0.0f;");
    w.line(columnLoop(c) + " sum += x[c];");
    w.line("const float m = kiln_block_sum(sum) / " + cf + ";");
  } else {
    w.line("const float m = 0.0f;");
  }
  w.line("float var = 0.0f;");
  w.open(columnLoop(c));
  w.line("const float dx = x[c] - m;");
  w.line("var += dx * dx;");
  w.close();
  w.line("const float rs = 1.0f / sqrtf(kiln_block_sum(var) / " + cf + " + " +
         ScalarExprEmitter::floatLiteral(floatAttr(op, "epsilon")) + ");");
  w.line(columnLoop(c) + " y[c] = (x[c] - m) * rs * " + w.ptr(weight) + "[c]" +
         (n.centered ? " + " + w.ptr(n.bias) + "[c]" : std::string()) + ";");
  w.open("if (threadIdx.x == 0)");
  if (n.centered)
    w.line(w.ptr(n.mean) + "[r] = m;");
  w.line(w.ptr(rstd) + "[r] = rs;");
  w.close();
  if (failed(endRow(w, rows, "r", c)))
    return failure();
  w.close();
  return success();
}

// Per-column sums over the rows of an [R, C] tensor, in blocks of a launch
// from block `first` on: a block sums a tile of 32 columns over a chunk of
// rows (a warp reads 32 adjacent columns of one row; the block's warps take
// every blockDim/32-th row of the chunk, then add up in warp order), stores
// the chunk's partial sums, and the last block to finish adds the chunks in
// order. Enough chunks that the launch fills the GPU; the same bits on every
// run.
struct ColumnSumPlan {
  int64_t rows = 0, columns = 0, tiles = 0, chunks = 0, chunkRows = 0;
  uint32_t blocks = 0;
};

ColumnSumPlan planColumnSums(int64_t rows, int64_t columns, uint32_t threads) {
  constexpr int64_t kTargetBlocks = 1024; // a few waves on 132 SMs
  ColumnSumPlan p;
  p.rows = rows;
  p.columns = columns;
  p.tiles = (columns + 31) / 32;
  int64_t warps = threads / 32;
  // A chunk gives each warp at least 4 rows.
  int64_t maxChunks = std::max<int64_t>(1, rows / (4 * warps));
  p.chunks = std::clamp<int64_t>((kTargetBlocks + p.tiles - 1) / p.tiles, 1,
                                 maxChunks);
  p.chunkRows = (rows + p.chunks - 1) / p.chunks;
  p.chunks = (rows + p.chunkRows - 1) / p.chunkRows;
  p.blocks = static_cast<uint32_t>(p.tiles * p.chunks);
  return p;
}

// `body` emits the lines that add row r's term of column c (element i = r *
// C + c) to each accumulator it is given; the sums go to `outputs` (one per
// accumulator, float pointers of C elements).
LogicalResult emitColumnSums(
    KernelSourceWriter &w, const ColumnSumPlan &p, StringRef first,
    ArrayRef<std::string> outputs,
    function_ref<LogicalResult(ArrayRef<std::string>)> body) {
  std::string cs = str(p.columns), k = str(outputs.size());
  std::string partial = (kEntryPlaceholder + "_colsum").str();
  std::string done = (kEntryPlaceholder + "_coldone").str();
  w.global("__device__ float " + partial + "[" +
           str(p.chunks * p.columns * static_cast<int64_t>(outputs.size())) +
           "];");
  w.global("__device__ unsigned int " + done + " = 0u;");
  w.line("// column sums: " + str(p.tiles) + " tiles of 32 columns x " +
         str(p.chunks) + " chunks of " + str(p.chunkRows) + " rows");
  w.line("const int64_t b = (int64_t)blockIdx.x - " + first.str() + ";");
  w.line("const int64_t chunk = b / " + str(p.tiles) + ";");
  w.line("const int64_t c = (b % " + str(p.tiles) + ") * 32 + (threadIdx.x & 31);");
  w.line("const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;");
  w.line("const int64_t r0 = chunk * " + str(p.chunkRows) + ";");
  w.line("const int64_t r1 = r0 + " + str(p.chunkRows) + " < " + str(p.rows) +
         " ? r0 + " + str(p.chunkRows) + " : " + str(p.rows) + ";");
  SmallVector<std::string> acc;
  for (size_t a = 0; a < outputs.size(); ++a) {
    acc.push_back("acc" + str(a));
    w.line("float " + acc.back() + " = 0.0f;");
  }
  w.open("if (c < " + cs + ")");
  w.open("for (int64_t r = r0 + warp; r < r1; r += warps)");
  w.line("const int64_t i = r * " + cs + " + c;");
  if (failed(body(acc)))
    return failure();
  w.close();
  w.close();
  w.line("__shared__ float kiln_column_slots[" + k + "][32][32];");
  for (size_t a = 0; a < outputs.size(); ++a)
    w.line("kiln_column_slots[" + str(a) + "][warp][threadIdx.x & 31] = " +
           acc[a] + ";");
  w.line("__syncthreads();");
  w.open("if (warp == 0 && c < " + cs + ")");
  w.open("for (int a = 0; a < " + k + "; ++a)");
  w.line("float s = 0.0f;");
  w.line("for (int l = 0; l < warps; ++l) s += kiln_column_slots[a][l][threadIdx.x];");
  w.line(partial + "[(chunk * " + k + " + a) * " + cs + " + c] = s;");
  w.close();
  w.close();
  w.line("if (!kiln_last_of(&" + done + ", " + str(p.blocks) + "u)) return;");
  w.open(columnLoop(p.columns));
  for (size_t a = 0; a < outputs.size(); ++a) {
    w.line("float t" + str(a) + " = 0.0f;");
    w.line("for (int64_t q = 0; q < " + str(p.chunks) + "; ++q) t" + str(a) +
           " += __ldcg(&" + partial + "[(q * " + k + " + " + str(a) + ") * " +
           cs + " + c]);");
    w.line(outputs[a] + "[c] = t" + str(a) + ";");
  }
  w.close();
  return success();
}

// With xhat = (x - mean) * rstd (mean 0 for RMS norm) and dxhat = grad *
// weight, per row:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// (RMS norm: without the mean(dxhat) term), and per column: dweight =
// sum_rows(grad * xhat), dbias = sum_rows(grad) (layer norm). One launch:
// the first `rowBlocks` blocks do the rows, the others the column sums
// (emitColumnSums; both only read the inputs).
LogicalResult emitNormGrad(Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                           CudaRowFusion *rows) {
  NormValues n = normValues(op);
  Value x = n.x, weight = n.weight, rstd = n.rstd, grad = n.grad, dx = n.dx,
        dw = n.dweight;
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c), rs = str(r), cf = countLiteral(c);
  uint32_t threads = cudaRowThreads(c);
  uint32_t rowBlocks = cudaGridFor(r, 1, kCudaMaxRowGrid);
  ColumnSumPlan columns = planColumnSums(r, c, threads);
  uint32_t columnBlocks = columns.blocks;
  launch = {rowBlocks + columnBlocks, threads, 0};
  std::string rb = str(rowBlocks);
  std::string rowMean = n.centered ? w.ptr(n.mean) + "[r]" : std::string("0.0f");
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") +
         " norm backward over rows of [" + rs + ", " + cs + "]: " + rb +
         " row blocks, then " + str(columnBlocks) + " column blocks");
  w.open("if (blockIdx.x < " + rb + ")");
  w.open("for (int64_t r = blockIdx.x; r < " + rs + "; r += " + rb + ")");
  if (failed(beginRow(w, rows, "r", c, RowLanes::Block)))
    return failure();
  w.line("const float* x = " + w.ptr(x) + " + r * " + cs + ";");
  w.line("const float* g = " + w.ptr(grad) + " + r * " + cs + ";");
  w.line("float* dx = " + w.ptr(dx) + " + r * " + cs + ";");
  w.line("const float m = " + rowMean + ";");
  w.line("const float s = " + w.ptr(rstd) + "[r];");
  // RMS norm has no mean(dxhat) term: it neither sums nor subtracts one.
  w.line(n.centered ? "float sumDxhat = 0.0f, sumDxhatXhat = 0.0f;"
                    : "float sumDxhatXhat = 0.0f;");
  w.open(columnLoop(c));
  w.line("const float xhat = (x[c] - m) * s;");
  w.line("const float dxhat = g[c] * " + w.ptr(weight) + "[c];");
  if (n.centered)
    w.line("sumDxhat += dxhat;");
  w.line("sumDxhatXhat += dxhat * xhat;");
  w.close();
  if (n.centered)
    w.line("const float mean1 = kiln_block_sum(sumDxhat) / " + cf + ";");
  w.line("const float mean2 = kiln_block_sum(sumDxhatXhat) / " + cf + ";");
  w.open(columnLoop(c));
  w.line("const float xhat = (x[c] - m) * s;");
  w.line("const float dxhat = g[c] * " + w.ptr(weight) + "[c];");
  w.line(std::string("dx[c] = s * (dxhat - ") + (n.centered ? "mean1 - " : "") +
         "xhat * mean2);");
  w.close();
  if (failed(endRow(w, rows, "r", c)))
    return failure();
  w.close();
  w.line("return;");
  w.close();
  // x and grad at element i: a fused prologue's values are recomputed here
  // (the row blocks that store them run concurrently with this block).
  std::vector<std::string> outputs{w.ptr(dw)};
  if (n.centered)
    outputs.push_back(w.ptr(n.dbias));
  return emitColumnSums(
      w, columns, rb, outputs, [&](ArrayRef<std::string> acc) -> LogicalResult {
        PointwiseStatements prologue;
        if (rows && !rows->parts.prologue.empty()) {
          if (failed(emitPointwiseStatements(
                  rows->parts.prologue, "i",
                  [&](Value v) { return w.ptr(v); }, prologue)))
            return failure();
          w.line("// the fused prologue, recomputed");
          for (const std::string &line : prologue.lines)
            w.line(line);
        }
        auto at = [&](Value v) {
          auto it = prologue.vars.find(v);
          return it != prologue.vars.end() ? it->second : w.ptr(v) + "[i]";
        };
        w.line("const float g = " + at(grad) + ";");
        w.line(acc[0] + " += g * ((" + at(x) + " - " + rowMean + ") * " +
               w.ptr(rstd) + "[r]);");
        if (n.centered)
          w.line(acc[1] + " += g;");
        return success();
      });
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
  w.line("const float* x = " + w.ptr(logits) + " + r * " + vs + ";");
  // One pass: the online max and sum (kiln_online_add).
  emitOnlineMaxSum(w, v, valid);
  w.line("const KilnMaxSum stats = kiln_block_max_sum(mx, sum);");
  w.line("mx = stats.max;");
  w.line("sum = stats.sum;");
  w.line("const int64_t t = (int64_t)" + w.ptr(targets) + "[r];");
  w.line("blockLoss += (t < 0 || t >= " + cs +
         ") ? 0.0f : logf(sum) + mx - x[t];");
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
  w.line("const float* x = " + w.ptr(logits) + " + r * " + vs + ";");
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
  // Two passes over the row: the online max and sum, then the gradient.
  emitOnlineMaxSum(w, v, valid);
  w.line("const KilnMaxSum stats = kiln_block_max_sum(mx, sum);");
  w.line("mx = stats.max;");
  w.line("const float inv = 1.0f / stats.sum;");
  if (loss)
    w.line("blockLoss += logf(stats.sum) + mx - x[t];");
  auto gradient = [&](const std::string &c, const std::string &logit) {
    return (valid < v ? c + " < " + cs + " ? " : std::string()) + "(expf(" + logit +
           " - mx) * inv - (" + c + " == t ? 1.0f : 0.0f)) * scale" +
           (valid < v ? " : 0.0f" : "");
  };
  if (columnRuns(v)) {
    openColumnRunLoop(w, v);
    w.line("const kiln_lanes8<float> xs = kiln_load_lanes8(x + c0);");
    w.line("kiln_lanes8<" + w.cType(out) + "> ds;");
    w.line("KILN_UNROLL for (int j = 0; j < 8; ++j) " +
           storeElement(dxType, "ds.v[j]", gradient("c0 + j", "xs.v[j]")));
    w.line("kiln_store_lanes8(dx + c0, ds);");
    w.close();
  } else {
    w.line(columnLoop(v) + " " + store(gradient("c", "x[c]")));
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
          .Case<k::LayerNormOp, k::RmsNormOp>([](auto) { return emitNorm; })
          .Case<k::LayerNormGradOp, k::RmsNormGradOp>(
              [](auto) { return emitNormGrad; })
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
