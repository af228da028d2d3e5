//===- CudaBespokeKernels.cpp - CUDA kernels for non-pointwise ops --------===//
//
// (The optimizer ops' kernels are in CudaOptimizerKernels.cpp, the row ops'
// (norms, softmax, cross entropy) in CudaRowKernels.cpp.)
//
// Shapes of parallelism:
//   - flat ops (transpose, slice, pad, concat, embedding): grid-stride over
//     the output;
//   - reduce_sum: one output: block partials in a __device__ scratch array,
//     combined in block order by the last block (kiln_last_block); trailing
//     dims reduced: one warp per output; leading dims reduced: one thread per
//     column walking the rows in order;
//   - embedding_grad: one block per range of the table's rows (about a
//     thousand blocks): it zeroes its rows, then walks the indices in tiles,
//     compacts the ones in its range in order (a block scan) and adds their
//     grad rows, threads over the columns;
// Fused row kernels (kiln.fusion row): a row emitter given a CudaRowFusion
// writes the prologue at the top of each row (beginRow: the row's threads
// compute and store it, then a barrier) and the epilogue at the bottom
// (endRow: a barrier, then the row's threads apply it).
// Numerics: float accumulation, every sum in a fixed order (no
// floating-point atomics), so a kernel gives the same bits on every run.
// Perf notes: leading-dim reduce_sum uses few threads per element (a
// two-pass split over rows would add parallelism); embedding_grad's blocks
// each read every index, and a row hit many times is summed by one block.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/CudaAttentionKernels.h"

#include "codegen/DataMovement.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/RopeKernel.h"
#include "codegen/RowGroup.h"

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

// Splits a shape into [rows, C] with C the last dimension.
std::pair<int64_t, int64_t> rowsAndColumns(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  int64_t c = shape.empty() ? 1 : shape.back();
  return {numElements(shape) / c, c};
}

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
  if (rows->parts.epilogue.empty() || rows->parts.elementEpilogue)
    return success();
  w.line("// fused epilogue, " + str(rows->parts.epilogue.size()) + " ops");
  w.line("__syncthreads();");
  return emitRowPart(w, *rows->group, rows->parts.epilogue, row, length,
                     "threadIdx.x", "blockDim.x");
}

LogicalResult rowElement(KernelSourceWriter &w, CudaRowFusion *rows, Value result,
                         StringRef index, StringRef value) {
  if (!rows) {
    w.line(w.store(result, index, value));
    return success();
  }
  return emitRowElement(w, rows->group,
                        rows->parts.elementEpilogue ? ArrayRef<Operation *>(rows->parts.epilogue)
                                                    : ArrayRef<Operation *>(),
                        result, value, RowElementAccess{index.str(), nullptr, nullptr});
}

void emitSegmentLookup(KernelSourceWriter &w, ArrayRef<std::string> rows, size_t columns,
                       StringRef what, StringRef names) {
  std::string table = (kEntryPlaceholder + "_segments").str();
  std::string text = "__constant__ unsigned int " + table + "[" + str(rows.size()) + "][" +
                     str(columns) + "] = {";
  for (auto [i, row] : llvm::enumerate(rows))
    text += (i ? ",\n    " : "\n    ") + row;
  w.global(text + "};");
  w.line("// " + what.str() + ", each on a segment of the grid (" + table + ": " +
         names.str() + ")");
  w.line("int lo = 0, hi = " + str(rows.size() - 1) + ";");
  w.open("while (lo < hi)");
  w.line("const int mid = (lo + hi + 1) / 2;");
  w.line("if (" + table + "[mid][0] <= blockIdx.x) lo = mid; else hi = mid - 1;");
  w.close();
  w.line("const unsigned int* row = " + table + "[lo];");
}

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

// out = zeros [V, D] (or acc, whose buffer out is); out[indices[n], :] +=
// grad[n, :] for n in order.
// Deterministic without atomics: thread (slice s, column c) owns column c of
// the vocabulary rows [s * rows, (s + 1) * rows): it zeroes them, then walks
// all N indices in order and adds the rows that fall in its slice. Slices
// exist only to give the GPU enough threads (D alone is too few).
LogicalResult emitEmbeddingGrad(Operation *op, KernelSourceWriter &w,
                                CudaLaunch &launch, CudaRowFusion *rows) {
  auto scatter = cast<k::EmbeddingGradOp>(op);
  Value indices = scatter.getIndices(), grad = scatter.getGrad();
  Value out = op->getResult(0);
  auto [v, d] = rowsAndColumns(out);
  int64_t n = numElements(shapeOf(indices));
  // Blocks own disjoint row ranges, so every element has one writer and
  // sums its rows in index order. About a thousand blocks: each reads all
  // n indices (from L2), and a block's hits run in order over its columns.
  const int64_t blocks = std::min<int64_t>(v, 1024);
  const int64_t rowsPerBlock = (v + blocks - 1) / blocks;
  const int64_t perThread = 8, tile = kCudaBlock * perThread;
  launch = {static_cast<uint32_t>((v + rowsPerBlock - 1) / rowsPerBlock),
            kCudaBlock, 0};
  const std::string t = w.cType(out), ds = str(d), threads = str(kCudaBlock);
  w.line("// scatter-add " + str(n) + " rows of grad into [" + str(v) + ", " +
         ds + "]: block b owns rows [b * " + str(rowsPerBlock) +
         ", ...), zeroes them, then adds the grad rows indexed into them in "
         "index order (tiles of " + str(tile) +
         " indices, compacted by a block scan)");
  w.line("__shared__ int hits[" + str(tile) + "];");
  w.line("__shared__ int scan[" + threads + "];");
  w.line("const int64_t v0 = (int64_t)blockIdx.x * " + str(rowsPerBlock) +
         ";");
  w.line("const int64_t v1 = v0 + " + str(rowsPerBlock) + " < " + str(v) +
         " ? v0 + " + str(rowsPerBlock) + " : " + str(v) + ";");
  w.line("const " + w.cType(indices) + "* idx = " + w.ptr(indices) + ";");
  w.line(t + "* dst = " + w.ptr(out) + ";");
  if (scatter.getAcc()) {
    w.line("// dst holds acc: the rows are added onto it");
  } else {
    w.line("for (int64_t e = threadIdx.x; e < (v1 - v0) * " + ds +
           "; e += blockDim.x) dst[v0 * " + ds + " + e] = 0;");
    w.line("__syncthreads(); // zeroed before any thread adds to a row");
  }
  w.open("for (int64_t base = 0; base < " + str(n) + "; base += " +
         str(tile) + ")");
  w.line("// this thread's " + str(perThread) +
         " consecutive indices of the tile: how many are ours");
  w.line("const int64_t first = base + (int64_t)threadIdx.x * " +
         str(perThread) + ";");
  w.line("int count = 0;");
  w.line("KILN_UNROLL for (int k = 0; k < " + str(perThread) +
         "; ++k) if (first + k < " + str(n) + ") { const int64_t row = idx[first "
         "+ k]; count += row >= v0 && row < v1; }");
  w.line("// inclusive scan of the counts (Hillis-Steele)");
  w.line("scan[threadIdx.x] = count;");
  w.line("__syncthreads();");
  w.open("for (int offset = 1; offset < " + threads + "; offset <<= 1)");
  w.line("const int add = (int)threadIdx.x >= offset ? scan[threadIdx.x - "
         "offset] : 0;");
  w.line("__syncthreads();");
  w.line("scan[threadIdx.x] += add;");
  w.line("__syncthreads();");
  w.close();
  w.line("const int total = scan[" + str(kCudaBlock - 1) + "];");
  w.line("int at = scan[threadIdx.x] - count;");
  w.line("KILN_UNROLL for (int k = 0; k < " + str(perThread) +
         "; ++k) if (first + k < " + str(n) + ") { const int64_t row = idx[first "
         "+ k]; if (row >= v0 && row < v1) hits[at++] = (int)(first + k - base); "
         "}");
  w.line("__syncthreads();");
  w.open("for (int h = 0; h < total; ++h)");
  w.line("const int64_t m = base + hits[h], row = idx[m];");
  w.line("for (int64_t c = threadIdx.x; c < " + ds + "; c += blockDim.x) dst[row * " +
         ds + " + c] += " + w.ptr(grad) + "[m * " + ds + " + c];");
  w.close();
  w.line("__syncthreads(); // before the next tile rewrites hits and scan");
  w.close();
  return success();
}

} // namespace

bool hasBespokeCudaKernel(Operation *op) {
  return isDataMovement(op) ||
         isa<k::ReduceSumOp, k::EmbeddingOp, k::EmbeddingGradOp, k::RopeOp>(
             op) ||
         hasRowCudaKernel(op) || hasOptimizerCudaKernel(op) ||
         hasAttentionCudaKernel(op);
}

LogicalResult emitBespokeCudaKernel(Operation *op, KernelSourceWriter &w,
                                    CudaLaunch &launch, CudaRowFusion *rows) {
  if (hasOptimizerCudaKernel(op))
    return emitOptimizerCudaKernel(op, w, launch);
  if (hasAttentionCudaKernel(op))
    return emitAttentionCudaKernel(op, w, launch,
                                   defaultAttentionSharedBudget());
  if (hasRowCudaKernel(op))
    return emitRowCudaKernel(op, w, launch, rows);
  using Emitter = LogicalResult (*)(Operation *, KernelSourceWriter &,
                                    CudaLaunch &, CudaRowFusion *);
  Emitter emitter =
      llvm::TypeSwitch<Operation *, Emitter>(op)
          .Case<k::ReduceSumOp>([](auto) { return emitReduceSum; })
          .Case<k::TransposeOp, k::SliceOp, k::PadOp, k::ConcatOp>(
              [](auto) { return emitDataMovement; })
          .Case<k::EmbeddingOp>([](auto) { return emitEmbedding; })
          .Case<k::EmbeddingGradOp>([](auto) { return emitEmbeddingGrad; })
          .Case<k::RopeOp>([](auto) -> Emitter {
            return [](Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                      CudaRowFusion *) { return emitRopeCuda(op, w, launch); };
          })
          .Default([](Operation *) { return nullptr; });
  if (!emitter)
    return op->emitError() << "codegen has no CUDA kernel for '"
                           << op->getName() << "'";
  return emitter(op, w, launch, rows);
}

} // namespace kiln
