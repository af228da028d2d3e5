//===- CudaBespokeKernels.cpp - CUDA kernels for non-pointwise ops --------===//
//
// (The optimizer ops' kernels are in CudaOptimizerKernels.cpp.)
//
// Shapes of parallelism:
//   - flat ops (transpose, embedding): grid-stride over the output;
//   - row ops (layer norm, softmax, cross entropy, ...): one block per row of
//     [rows, C] (C the last dimension), rows strided by the grid, the row's
//     sums and maxima by kiln_block_sum / kiln_block_max (cross entropy's
//     max and sum of exponentials in one pass: kiln_online_add, then
//     kiln_block_max_sum);
//   - column sums of layer norm weight/bias gradients: blocks of 32-column
//     tiles over chunks of rows, the chunks' partials added in order by the
//     last block (emitColumnSums); leading-dim reduce_sum: one thread per
//     column walking the rows in order;
//   - whole-tensor sums (cross entropy's mean, one-output reduce_sum): block
//     partials in a __device__ scratch array, combined in block order by the
//     last block (kiln_last_block).
// Fused row kernels (kiln.fusion row): a row emitter given a
// CudaRowFusion writes the prologue at the top of each row (beginRow: the
// row's threads compute and store it, then a barrier) and the epilogue at
// the bottom (endRow: a barrier, then the row's threads apply it);
// layer_norm_grad's column blocks recompute the prologue instead of reading
// what the row blocks store in the same launch.
// Numerics: float accumulation, every sum in a fixed order (no
// floating-point atomics), so a kernel gives the same bits on every run.
// Perf notes: leading-dim reduce_sum and embedding_grad use few threads per element
// (a two-pass split over rows, or sorting indices, would add parallelism);
// row kernels reread their row from global memory instead of keeping it in
// registers or shared memory.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/CudaAttentionKernels.h"

#include "codegen/DataMovement.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/RopeKernel.h"
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

// Splits a shape into [rows, C] with C the last dimension.
std::pair<int64_t, int64_t> rowsAndColumns(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  int64_t c = shape.empty() ? 1 : shape.back();
  return {numElements(shape) / c, c};
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

// How the threads of a row kernel share a row: a whole block (barrier
// __syncthreads) or one warp (__syncwarp; warps of a block run different
// rows, so a block-wide barrier would be wrong).
enum class RowLanes { Block, Warp };

// The fused prologue of row `row`: its elements computed and stored by the
// row's threads, then a barrier before the row op reads them.
LogicalResult beginRow(KernelSourceWriter &w, CudaRowFusion *rows,
                       StringRef row, int64_t length, RowLanes lanes) {
  if (!rows)
    return success();
  rows->began = true;
  if (rows->parts.prologue.empty())
    return success();
  bool block = lanes == RowLanes::Block;
  w.line("// fused prologue, " + str(rows->parts.prologue.size()) + " ops");
  if (failed(emitRowPart(w, *rows->group, rows->parts.prologue, row, length,
                         block ? "threadIdx.x" : "(threadIdx.x & 31)",
                         block ? "blockDim.x" : "32")))
    return failure();
  w.line(block ? "__syncthreads();" : "__syncwarp();");
  return success();
}

// The fused epilogue of row `row`, after a barrier (the row op's stores of
// the row are then visible to every thread of the row).
LogicalResult endRow(KernelSourceWriter &w, CudaRowFusion *rows, StringRef row,
                     int64_t length) {
  if (!rows)
    return success();
  rows->ended = true;
  if (rows->parts.epilogue.empty())
    return success();
  w.line("// fused epilogue, " + str(rows->parts.epilogue.size()) + " ops");
  w.line("__syncthreads();");
  return emitRowPart(w, *rows->group, rows->parts.epilogue, row, length,
                     "threadIdx.x", "blockDim.x");
}

} // namespace

void beginGridTotal(KernelSourceWriter &w, CudaLaunch &launch, int64_t items) {
  uint32_t grid = cudaGridFor(items, kCudaBlock);
  launch = {grid, kCudaBlock, 0};
  w.global("__device__ float " + kEntryPlaceholder + "_partial[" + str(grid) + "];");
  w.global("__device__ unsigned int " + kEntryPlaceholder + "_done = 0u;");
  w.line("float acc = 0.0f;");
}

void endGridTotal(KernelSourceWriter &w, const CudaLaunch &launch,
                  const std::string &out) {
  const uint32_t grid = launch.grid;
  w.line("acc = kiln_block_sum(acc);");
  w.line("if (threadIdx.x == 0) " + kEntryPlaceholder + "_partial[blockIdx.x] = acc;");
  w.line("if (!kiln_last_block(&" + kEntryPlaceholder + "_done)) return;");
  w.line("float total = 0.0f;");
  w.line("for (int b = threadIdx.x; b < " + str(grid) + "; b += blockDim.x) total += __ldcg(&" +
         kEntryPlaceholder + "_partial[b]);");
  w.line("total = kiln_block_sum(total);");
  w.line("if (threadIdx.x == 0) " + out + "[0] = total;");
}

void emitGridTotal(KernelSourceWriter &w, CudaLaunch &launch, int64_t n,
                   const std::string &out, llvm::function_ref<std::string()> element) {
  beginGridTotal(w, launch, n);
  openGridStrideLoop(w, n, "e");
  std::string summand = element();
  w.line("acc += " + summand + ";");
  w.close();
  endGridTotal(w, launch, out);
}

namespace {

// sum over `dims` of input -> output [kept dims], three loop shapes:
//   one output:            block partials, combined by the last block;
//   trailing dims reduced: one warp per output, lanes strided over the row;
//   otherwise:             one thread per output, reduced elements in order
//                          (leading dims reduced: coalesced across threads).
LogicalResult emitReduceSum(Operation *op, KernelSourceWriter &w,
                            CudaLaunch &launch, CudaRowFusion *rows) {
  Value in = op->getOperand(0), out = op->getResult(0);
  ReductionLayout layout = reductionLayout(
      in, op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef(), "o",
      "e");
  ArrayRef<int64_t> shape = layout.shape, dims = layout.dims;
  const SmallVector<int64_t> &kept = layout.kept, &reduced = layout.reduced;
  int64_t outN = layout.outputs, redN = layout.reducedCount;
  std::string base = layout.base, off = layout.offset;
  if (kept.empty())
    off = "e"; // every dim reduced: the element index is the input index
  std::string t = w.cType(out);
  bool isFloat = t == "float";
  std::string acc = isFloat ? "float" : "int64_t";
  std::string x = w.ptr(in), y = w.ptr(out);
  w.line("// sum over dims " + shapeString(dims) + ": " + shapeString(shape) +
         " -> " + shapeString(shapeOf(out)));

  if (outN == 1 && isFloat) {
    emitGridTotal(w, launch, redN, y, [&] { return x + "[" + off + "]"; });
    return success();
  }
  bool trailingReduced = isFloat && !reduced.empty() &&
                         (kept.empty() || kept.back() < reduced.front());
  if (trailingReduced) {
    // Input is [outN, redN] row-major: a warp per output row.
    launch = {cudaGridFor(outN, kCudaBlock / 32), kCudaBlock, 0};
    w.line("// trailing dims reduced: [" + str(outN) + ", " + str(redN) +
           "] -> [" + str(outN) + "], one warp per output");
    w.line("const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);");
    w.open("for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + "
           "threadIdx.x) / 32; o < " + str(outN) + "; o += warps)");
    if (failed(beginRow(w, rows, "o", redN, RowLanes::Warp)))
      return failure();
    w.line("float acc = 0.0f;");
    w.line("for (int64_t e = threadIdx.x & 31; e < " + str(redN) +
           "; e += 32) acc += " + x + "[o * " + str(redN) + " + e];");
    w.line("acc = kiln_warp_sum(acc);");
    w.line("if ((threadIdx.x & 31) == 0) " + y + "[o] = acc;");
    w.close();
    return success();
  }
  launch = {cudaGridFor(outN, kCudaBlock), kCudaBlock, 0};
  openGridStrideLoop(w, outN, "o");
  w.line("const int64_t base = " + base + ";");
  w.line(acc + " acc = 0;");
  w.line("for (int64_t e = 0; e < " + str(redN) + "; ++e) acc += " + x +
         "[base + " + off + "];");
  w.line(y + "[o] = (" + t + ")acc;");
  w.close();
  return success();
}

// Elements per 16-byte chunk of a transpose that keeps its innermost dim in
// place (q/k/v's [B, T, H, D] <-> [B, H, T, D]): each 16 bytes of the
// output are 16 contiguous bytes of the input when that dim is a whole
// number of chunks; 0 otherwise.
int64_t transposeChunk(Operation *op) {
  auto transpose = dyn_cast<k::TransposeOp>(op);
  if (!transpose)
    return 0;
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t last = static_cast<int64_t>(perm.size()) - 1;
  auto type = cast<RankedTensorType>(transpose.getResult().getType());
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  if (last < 0 || perm[last] != last || bits % 8 != 0 || 128 % bits != 0)
    return 0;
  int64_t chunk = 128 / bits;
  return type.getShape()[last] % chunk == 0 ? chunk : 0;
}

// out[i] = one input element (codegen/DataMovement.h), in 32-bit index
// arithmetic where the buffers allow it; a transpose that keeps its
// innermost dim moves 16 bytes per thread and step (when both pointers are
// 16-byte aligned: a view may start anywhere).
// (Perf note: a tiled shared-memory transpose would coalesce both sides of
// the other transposes.)
LogicalResult emitDataMovement(Operation *op, KernelSourceWriter &w,
                               CudaLaunch &launch, CudaRowFusion *rows) {
  Value out = op->getResult(0);
  int64_t n = numElements(shapeOf(out));
  const bool index32 =
      n < (int64_t(1) << 30) && indexFitsInt32(KernelGroup::forOp(op));
  const std::string index = index32 ? "int" : "int64_t";
  std::string element = movedElement(op, w, "i");
  int64_t chunk = transposeChunk(op);
  if (chunk == 0) {
    launch = {cudaGridFor(n, kCudaBlock), kCudaBlock, 0};
    openGridStrideLoop(w, n, "i", index32);
    w.line(w.ptr(out) + "[i] = " + element + ";");
    w.close();
    return success();
  }
  launch = {cudaGridFor(n / chunk, kCudaBlock), kCudaBlock, 0};
  w.line("// " + str(n / chunk) + " chunks of " + str(chunk) +
         " elements (16 bytes): the innermost dim moves whole");
  w.open("if (((unsigned long long)" + w.ptr(op->getOperand(0)) +
         " & 15) == 0 && ((unsigned long long)" + w.ptr(out) + " & 15) == 0)");
  openGridStrideLoop(w, n / chunk, "k", index32);
  w.line("const " + index + " i = k * " + str(chunk) + ";");
  w.line("kiln_copy16(&" + w.ptr(out) + "[i], &" + element + ");");
  w.close();
  w.close();
  w.open("else");
  openGridStrideLoop(w, n, "i", index32);
  w.line(w.ptr(out) + "[i] = " + element + ";");
  w.close();
  w.close();
  return success();
}

// out[n, c] = table[indices[n], c] (zeros for an out-of-range index)
LogicalResult emitEmbedding(Operation *op, KernelSourceWriter &w,
                            CudaLaunch &launch, CudaRowFusion *rows) {
  Value table = op->getOperand(0), indices = op->getOperand(1);
  Value out = op->getResult(0);
  auto [v, d] = rowsAndColumns(table);
  int64_t n = numElements(shapeOf(indices));
  launch = {cudaGridFor(n * d, kCudaBlock), kCudaBlock, 0};
  w.line("// gather rows of the [" + str(v) + ", " + str(d) + "] table for " +
         str(n) + " indices");
  openGridStrideLoop(w, n * d);
  w.line("const int64_t row = (int64_t)" + w.ptr(indices) + "[i / " + str(d) +
         "];");
  w.line(w.ptr(out) + "[i] = (row < 0 || row >= " + str(v) + ") ? 0 : " +
         w.ptr(table) + "[row * " + str(d) + " + i % " + str(d) + "];");
  w.close();
  return success();
}

// out = zeros [V, D]; out[indices[n], :] += grad[n, :] for n in order.
// Deterministic without atomics: thread (slice s, column c) owns column c of
// the vocabulary rows [s * rows, (s + 1) * rows): it zeroes them, then walks
// all N indices in order and adds the rows that fall in its slice. Slices
// exist only to give the GPU enough threads (D alone is too few).
LogicalResult emitEmbeddingGrad(Operation *op, KernelSourceWriter &w,
                                CudaLaunch &launch, CudaRowFusion *rows) {
  Value indices = op->getOperand(0), grad = op->getOperand(1);
  Value out = op->getResult(0);
  auto [v, d] = rowsAndColumns(out);
  int64_t n = numElements(shapeOf(indices));
  int64_t slices = std::clamp<int64_t>((16384 + d - 1) / d, 1, v);
  int64_t rowsPerSlice = (v + slices - 1) / slices;
  int64_t threads = slices * d;
  launch = {cudaGridFor(threads, kCudaBlock, UINT32_MAX), kCudaBlock, 0};
  std::string t = w.cType(out);
  w.line("// scatter-add " + str(n) + " rows of grad into [" + str(v) + ", " +
         str(d) + "]: " + str(slices) + " slices of " + str(rowsPerSlice) +
         " rows x " + str(d) + " columns");
  w.line("const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;");
  w.line("if (tid >= " + str(threads) + ") return;");
  w.line("const int64_t c = tid % " + str(d) + ";");
  w.line("const int64_t v0 = (tid / " + str(d) + ") * " + str(rowsPerSlice) +
         ";");
  w.line("const int64_t v1 = v0 + " + str(rowsPerSlice) + " < " + str(v) +
         " ? v0 + " + str(rowsPerSlice) + " : " + str(v) + ";");
  w.line(t + "* dst = " + w.ptr(out) + ";");
  w.line("for (int64_t row = v0; row < v1; ++row) dst[row * " + str(d) +
         " + c] = 0;");
  w.open("for (int64_t n = 0; n < " + str(n) + "; ++n)");
  w.line("const int64_t row = (int64_t)" + w.ptr(indices) + "[n];");
  w.line("if (row < v0 || row >= v1) continue;");
  w.line("dst[row * " + str(d) + " + c] += " + w.ptr(grad) + "[n * " + str(d) +
         " + c];");
  w.close();
  return success();
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

bool hasBespokeCudaKernel(Operation *op) {
  return isDataMovement(op) ||
         isa<k::ReduceSumOp, k::EmbeddingOp, k::EmbeddingGradOp,
             k::LayerNormOp, k::LayerNormGradOp, k::RmsNormOp,
             k::RmsNormGradOp, k::RopeOp, k::SoftmaxOp, k::SoftmaxGradOp,
             k::CrossEntropyOp, k::CrossEntropyGradOp>(op) ||
         hasOptimizerCudaKernel(op) || hasAttentionCudaKernel(op);
}

LogicalResult emitBespokeCudaKernel(Operation *op, KernelSourceWriter &w,
                                    CudaLaunch &launch, CudaRowFusion *rows) {
  if (hasOptimizerCudaKernel(op))
    return emitOptimizerCudaKernel(op, w, launch);
  if (hasAttentionCudaKernel(op))
    return emitAttentionCudaKernel(op, w, launch,
                                   defaultAttentionSharedBudget());
  using Emitter = LogicalResult (*)(Operation *, KernelSourceWriter &,
                                    CudaLaunch &, CudaRowFusion *);
  Emitter emitter =
      llvm::TypeSwitch<Operation *, Emitter>(op)
          .Case<k::ReduceSumOp>([](auto) { return emitReduceSum; })
          .Case<k::TransposeOp, k::SliceOp, k::PadOp, k::ConcatOp>(
              [](auto) { return emitDataMovement; })
          .Case<k::EmbeddingOp>([](auto) { return emitEmbedding; })
          .Case<k::EmbeddingGradOp>([](auto) { return emitEmbeddingGrad; })
          .Case<k::LayerNormOp, k::RmsNormOp>([](auto) { return emitNorm; })
          .Case<k::LayerNormGradOp, k::RmsNormGradOp>([](auto) { return emitNormGrad; })
          .Case<k::RopeOp>([](auto) -> Emitter {
            return [](Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                      CudaRowFusion *) { return emitRopeCuda(op, w, launch); };
          })
          .Case<k::SoftmaxOp>([](auto) { return emitSoftmax; })
          .Case<k::SoftmaxGradOp>([](auto) { return emitSoftmaxGrad; })
          .Case<k::CrossEntropyOp>([](auto) { return emitCrossEntropy; })
          .Case<k::CrossEntropyGradOp>(
              [](auto) { return emitCrossEntropyGrad; })
          .Default([](Operation *) { return nullptr; });
  if (!emitter)
    return op->emitError() << "codegen has no CUDA kernel for '"
                           << op->getName() << "'";
  return emitter(op, w, launch, rows);
}

} // namespace kiln
