//===- CudaNormKernels.cpp - CUDA kernels of the norms and their backwards ===//
//
// kiln.layer_norm and kiln.rms_norm, forward and backward (RowGroup.h's
// NormValues), alone or with a fused kernel's pointwise prologue and
// epilogue (CudaRowFusion). A block per row, rows strided by the grid, in
// one of two shapes:
//   - registers, where the row allows (registerRow): the block's threads
//     hold the row between them, 8 adjacent columns each (one kiln_lanes8
//     run: 16-byte loads and stores), for the whole row: loaded once (a
//     fused prologue computed lane by lane into the same registers), summed
//     (each thread its 8 in order, then kiln_block_sum), and the result
//     computed, handed to the epilogue and stored from the registers. A
//     GPT-2 row (768 columns) is 96 threads, a Llama-3 row (2048) 256.
//   - columns: one column per thread, strided by the block, the row reread
//     from global memory in each pass (C % 8 != 0, C > 8192, or a buffer of
//     1-byte elements); a prologue is stored first and read back after a
//     barrier (beginRow).
// Either way result 0 (y, dx) goes through emitRowElement: a fused
// epilogue reads it from a register, and it is stored only when the kernel
// writes it (RowOpInterface::hasElementEpilogue: only its epilogue reads
// it, the fp32 row never reaches memory).
// Backward: one launch in chunks of rows, each chunk's row blocks (dx) then
// its column blocks, which sum the weight and bias gradients over the
// chunk's rows in 32-column tiles while those rows are still in L2 (each
// tile's chunk partials added in order by its last block), and recompute a fused
// prologue instead of reading what the row blocks store in the same launch.
// Numerics: float accumulation, every sum in a fixed order, so a kernel
// gives the same bits on every run.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"
#include "codegen/PointwiseStatements.h"
#include "codegen/RowGroup.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/OpCost.h"

#include "llvm/ADT/SetVector.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

// ---- registers ----------------------------------------------------------

constexpr int64_t kRunLanes = 8;

// The threads of a register row of `columns`: one per run of 8, in whole
// warps (kiln_block_sum's slots are per warp).
uint32_t registerRowThreads(int64_t columns) {
  return static_cast<uint32_t>((columns / kRunLanes + 31) / 32 * 32);
}

// Whether `op` (the row op of `rows` when fused) keeps its rows in
// registers: C a multiple of 8 (every row starts 32-byte aligned) and at
// most 8 x 1024, and every buffer of the kernel 2, 4 or 8 bytes an element,
// so each run is a whole number of 16-byte aligned vectors (buffers start
// on kArenaAlignment).
bool registerRow(Operation *op, CudaRowFusion *rows, int64_t columns) {
  if (columns % kRunLanes != 0 || columns / kRunLanes > 1024)
    return false;
  auto wide = [](Value v) {
    Type t = elementOf(v);
    if (!t.isIntOrFloat())
      return false;
    unsigned bits = t.getIntOrFloatBitWidth();
    return bits == 16 || bits == 32 || bits == 64;
  };
  if (rows)
    return llvm::all_of(rows->group->inputs, wide) &&
           llvm::all_of(rows->group->outputs, wide);
  return llvm::all_of(op->getOperands(), wide) && llvm::all_of(op->getResults(), wide);
}

// Element j of the thread's run of `v`: its register copy.
std::string laneElement(const KernelSourceWriter &w, Value v) {
  return PointwiseBody::laneCopy(w.ptr(v)) + ".v[j]";
}

// A thread's run at flat index `base`: `loads` read whole into register
// copies, `writes` declared, then the unrolled loop over its lanes j
// (closeRun stores the writes whole).
void openRun(KernelSourceWriter &w, ArrayRef<Value> loads, ArrayRef<Value> writes,
             StringRef base) {
  for (Value v : loads)
    w.line("const kiln_lanes8<" + w.cType(v) + "> " + PointwiseBody::laneCopy(w.ptr(v)) +
           " = kiln_load_lanes8(" + w.ptr(v) + " + " + base + ");");
  for (Value v : writes)
    w.line("kiln_lanes8<" + w.cType(v) + "> " + PointwiseBody::laneCopy(w.ptr(v)) + ";");
  w.open("KILN_UNROLL for (int j = 0; j < " + str(kRunLanes) + "; ++j)");
}

void closeRun(KernelSourceWriter &w, ArrayRef<Value> writes, StringRef base) {
  w.close();
  for (Value v : writes)
    w.line("kiln_store_lanes8(" + w.ptr(v) + " + " + base + ", " +
           PointwiseBody::laneCopy(w.ptr(v)) + ");");
}

// The buffers pointwise `ops` read at the element's own index (a dry run of
// their statements); `inRegister`, if given, is held in a register.
FailureOr<SmallVector<Value>> plainReads(KernelSourceWriter &w, ArrayRef<Operation *> ops,
                                         Value inRegister) {
  PointwiseStatements dry;
  if (inRegister)
    dry.vars[inRegister] = "rv";
  if (failed(emitPointwiseStatements(ops, "i", [&](Value v) { return w.ptr(v); }, dry)))
    return failure();
  return dry.plainReads;
}

// The thread's run of the row op's row operands (`operands`: value, float
// array [8] to fill) at flat index `base`: a value of the fused prologue
// from its lane-by-lane statements (the prologue values the kernel writes
// stored whole), any other loaded whole.
LogicalResult emitRunOperands(KernelSourceWriter &w, CudaRowFusion *rows, StringRef base,
                              ArrayRef<std::pair<Value, std::string>> operands) {
  ArrayRef<Operation *> prologue;
  if (rows) {
    rows->began = true;
    prologue = rows->parts.prologue;
  }
  FailureOr<SmallVector<Value>> reads = plainReads(w, prologue, Value());
  if (failed(reads))
    return failure();
  llvm::SetVector<Value> loads(reads->begin(), reads->end());
  SmallVector<Value> writes;
  for (Operation *op : prologue)
    if (llvm::is_contained(rows->group->outputs, op->getResult(0)))
      writes.push_back(op->getResult(0));
  auto computed = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && llvm::is_contained(prologue, def);
  };
  for (const auto &[v, array] : operands)
    if (!computed(v))
      loads.insert(v);
  openRun(w, loads.getArrayRef(), writes, base);
  PointwiseStatements code;
  if (!prologue.empty()) {
    if (failed(emitPointwiseStatements(
            prologue, "(" + base.str() + " + j)", [&](Value v) { return w.ptr(v); }, code,
            [&](Value v) { return laneElement(w, v); })))
      return failure();
    for (const std::string &line : code.lines)
      w.line(line);
    for (Value v : writes)
      w.line(storeElement(elementOf(v), laneElement(w, v), code.vars[v]));
  }
  for (const auto &[v, array] : operands)
    w.line(array + "[j] = " +
           (computed(v) ? code.vars[v] : loadElement(elementOf(v), laneElement(w, v))) + ";");
  closeRun(w, writes, base);
  return success();
}

// Result 0 of the row op over the thread's run at flat index `base`: each
// lane runs `laneLines`, then result 0 is `value` there, handed to
// emitRowElement with the run's register copies (the epilogue's reads
// loaded whole, what the kernel writes stored whole).
LogicalResult emitRunResult(KernelSourceWriter &w, CudaRowFusion *rows, Value result,
                            StringRef base, ArrayRef<std::string> laneLines,
                            StringRef value) {
  ArrayRef<Operation *> epilogue;
  if (rows) {
    rows->ended = true;
    if (!rows->parts.epilogue.empty() && !rows->parts.elementEpilogue)
      return rows->parts.rowOp->emitError()
             << "has an epilogue that register rows cannot run element by element";
    epilogue = rows->parts.epilogue;
  }
  FailureOr<SmallVector<Value>> loads = plainReads(w, epilogue, result);
  if (failed(loads))
    return failure();
  SmallVector<Value> writes;
  if (!rows || llvm::is_contained(rows->group->outputs, result))
    writes.push_back(result);
  for (Operation *op : epilogue)
    if (llvm::is_contained(rows->group->outputs, op->getResult(0)))
      writes.push_back(op->getResult(0));
  openRun(w, *loads, writes, base);
  for (const std::string &line : laneLines)
    w.line(line);
  RowElementAccess at{"(" + base.str() + " + j)",
                      [&](Value v) { return laneElement(w, v); },
                      [&](Value v, StringRef text) {
                        return storeElement(elementOf(v), laneElement(w, v), text);
                      }};
  if (failed(emitRowElement(w, rows ? rows->group : nullptr, epilogue, result, value, at)))
    return failure();
  closeRun(w, writes, base);
  return success();
}

// A [C] parameter's run at the thread's columns (c0), as float lanes `name`.
void loadParameterRun(KernelSourceWriter &w, Value v, StringRef name) {
  w.line("const kiln_lanes8<" + w.cType(v) + "> " + name + " = kiln_load_lanes8(" +
         w.ptr(v) + " + c0);");
}

std::string parameterLane(Value v, StringRef name) {
  return loadElement(elementOf(v), name.str() + ".v[j]");
}

// The row loop of a register row kernel: `for (r ...)` with the thread's
// first column c0; `guard` is the test of a thread that holds columns ("" when
// every thread does).
std::string openRegisterRow(KernelSourceWriter &w, int64_t columns, uint32_t threads,
                            StringRef rowLoop) {
  w.open(rowLoop);
  w.line("const int64_t c0 = (int64_t)threadIdx.x * " + str(kRunLanes) + ";");
  return threads * kRunLanes > static_cast<uint64_t>(columns)
             ? "if (c0 < " + str(columns) + ")"
             : std::string();
}

// `body` inside the guard of a register row (a block of its own either
// way, so runs may reuse their register copies' names).
template <typename Body> LogicalResult guarded(KernelSourceWriter &w, StringRef guard, Body body) {
  w.open(guard);
  LogicalResult result = body();
  w.close();
  return result;
}

// The forward with the row in registers (registerRow).
LogicalResult emitRegisterNorm(Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                               CudaRowFusion *rows) {
  NormValues n = normValues(op);
  auto [r, c] = rowsAndColumns(n.x);
  std::string cs = str(c), cf = countLiteral(c), base = "r * " + str(c) + " + c0";
  uint32_t threads = registerRowThreads(c);
  launch = {cudaGridFor(r, 1, kCudaMaxRowGrid), threads, 0};
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") + " norm over rows of [" +
         str(r) + ", " + cs + "]: a block of " + str(threads) +
         " threads per row, 8 columns a thread in registers");
  std::string guard = openRegisterRow(
      w, c, threads, "for (int64_t r = blockIdx.x; r < " + str(r) + "; r += gridDim.x)");
  w.line("float xv[" + str(kRunLanes) + "];");
  if (failed(guarded(w, guard, [&] { return emitRunOperands(w, rows, base, {{n.x, "xv"}}); })))
    return failure();
  std::string lanes = "KILN_UNROLL for (int j = 0; j < " + str(kRunLanes) + "; ++j)";
  if (n.centered) {
    w.line("float sum = 0.0f;");
    (void)guarded(w, guard, [&] {
      w.line(lanes + " sum += xv[j];");
      return success();
    });
    w.line("const float m = kiln_block_sum(sum) / " + cf + ";");
  } else {
    w.line("const float m = 0.0f;");
  }
  w.line("float var = 0.0f;");
  (void)guarded(w, guard, [&] {
    w.line(lanes + " var += (xv[j] - m) * (xv[j] - m);");
    return success();
  });
  w.line("const float rs = 1.0f / sqrtf(kiln_block_sum(var) / " + cf + " + " +
         ScalarExprEmitter::floatLiteral(floatAttr(op, "epsilon")) + ");");
  if (failed(guarded(w, guard, [&] {
        loadParameterRun(w, n.weight, "wl");
        if (n.centered)
          loadParameterRun(w, n.bias, "bl");
        return emitRunResult(w, rows, n.y, base, {},
                             "(xv[j] - m) * rs * " + parameterLane(n.weight, "wl") +
                                 (n.centered ? " + " + parameterLane(n.bias, "bl")
                                             : std::string()));
      })))
    return failure();
  w.open("if (threadIdx.x == 0)");
  if (n.centered)
    w.line(w.ptr(n.mean) + "[r] = m;");
  w.line(w.ptr(n.rstd) + "[r] = rs;");
  w.close();
  w.close();
  return success();
}

// The backward's row blocks with the row in registers (registerRow): x and
// the gradient loaded once, dx from the registers.
LogicalResult emitRegisterNormGradRows(Operation *op, KernelSourceWriter &w,
                                       uint32_t threads, StringRef rowLoop,
                                       CudaRowFusion *rows) {
  NormValues n = normValues(op);
  auto [r, c] = rowsAndColumns(n.x);
  std::string cf = countLiteral(c), base = "r * " + str(c) + " + c0";
  std::string guard = openRegisterRow(w, c, threads, rowLoop);
  w.line("float xv[" + str(kRunLanes) + "], gv[" + str(kRunLanes) + "];");
  if (failed(guarded(w, guard, [&] {
        return emitRunOperands(w, rows, base, {{n.x, "xv"}, {n.grad, "gv"}});
      })))
    return failure();
  w.line("const float m = " +
         (n.centered ? w.ptr(n.mean) + "[r]" : std::string("0.0f")) + ";");
  w.line("const float s = " + w.ptr(n.rstd) + "[r];");
  std::vector<std::string> laneLines{"const float xhat = (xv[j] - m) * s;",
                                     "const float dxhat = gv[j] * " +
                                         parameterLane(n.weight, "wl") + ";"};
  // RMS norm has no mean(dxhat) term: it neither sums nor subtracts one.
  w.line(n.centered ? "float sumDxhat = 0.0f, sumDxhatXhat = 0.0f;"
                    : "float sumDxhatXhat = 0.0f;");
  (void)guarded(w, guard, [&] {
    loadParameterRun(w, n.weight, "wl");
    w.open("KILN_UNROLL for (int j = 0; j < " + str(kRunLanes) + "; ++j)");
    for (const std::string &line : laneLines)
      w.line(line);
    if (n.centered)
      w.line("sumDxhat += dxhat;");
    w.line("sumDxhatXhat += dxhat * xhat;");
    w.close();
    return success();
  });
  if (n.centered)
    w.line("const float mean1 = kiln_block_sum(sumDxhat) / " + cf + ";");
  w.line("const float mean2 = kiln_block_sum(sumDxhatXhat) / " + cf + ";");
  if (failed(guarded(w, guard, [&] {
        loadParameterRun(w, n.weight, "wl");
        return emitRunResult(w, rows, n.dx, base, laneLines,
                             std::string("s * (dxhat - ") +
                                 (n.centered ? "mean1 - " : "") + "xhat * mean2)");
      })))
    return failure();
  w.close();
  return success();
}

// ---- columns ------------------------------------------------------------

// The forward, one column per thread (strided by the block), the row
// reread from global memory in each pass.
LogicalResult emitColumnNorm(Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
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
  w.open(columnLoop(c));
  if (failed(rowElement(w, rows, y, "r * " + cs + " + c",
                        "(x[c] - m) * rs * " + w.ptr(weight) + "[c]" +
                            (n.centered ? " + " + w.ptr(n.bias) + "[c]" : std::string()))))
    return failure();
  w.close();
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

// The backward's launch, in chunks of rows: for each chunk, one block per
// row (dx), then the blocks of its column sums: a block sums a tile of 32
// columns over the chunk's rows (a warp reads 32 adjacent columns of one
// row; the block's warps take every blockDim/32-th row, then add up in warp
// order) and stores the chunk's partial sums; the last block of each tile
// to finish adds the tile's chunks in order (the same bits on every run).
//
// Why chunks, and their size: the column sums read x and the gradient
// again, which the row blocks have just read. Blocks start in about the
// order of their index, so a chunk's column blocks run right after its row
// blocks, while those rows' bytes are still in L2 -- when a chunk's x and
// gradient (kChunkBytes) are a small part of it (50 MB on an H100 or H200):
// they then cost L2 reads, not a second pass over memory. (With every
// column block after every row block, the sums reread all of x and the
// gradient from memory: Llama-3's RMS norm backward, 1,152 MiB a call read
// or written once, then read 512 MiB more.) And at least 4 chunks where the
// rows allow, so that column sums run beside later rows' blocks rather than
// all after the last row.
struct ColumnSumPlan {
  int64_t rows = 0, columns = 0, tiles = 0, chunks = 0, chunkRows = 0;
  // The blocks of one chunk: chunkRows row blocks, then `tiles` column ones.
  int64_t blocksPerChunk() const { return chunkRows + tiles; }
  uint32_t launchBlocks() const { return static_cast<uint32_t>(chunks * blocksPerChunk()); }
};

// `readBytesPerRow`: what one row of x and the gradient take; `sums`: the
// column sums (1 or 2).
ColumnSumPlan planColumnSums(int64_t rows, int64_t columns, uint32_t threads,
                             int64_t readBytesPerRow, int64_t sums) {
  constexpr int64_t kChunkBytes = 4ll << 20;
  // The chunks' partial sums are a __device__ array of the kernel's module,
  // outside the memory plan: at most kScratchBytes (longer chunks past that;
  // Llama-3's [16, 2048] needs 1 MiB).
  constexpr int64_t kScratchBytes = 2ll << 20;
  ColumnSumPlan p;
  p.rows = rows;
  p.columns = columns;
  p.tiles = (columns + 31) / 32;
  int64_t warps = threads / 32;
  constexpr int64_t kMinChunks = 4;
  // A chunk's bytes under kChunkBytes and at least kMinChunks chunks, but
  // the partial sums at most kScratchBytes and each warp at least 4 rows of
  // a chunk.
  int64_t byBytes = kChunkBytes / std::max<int64_t>(1, readBytesPerRow);
  int64_t maxChunks = std::max<int64_t>(1, kScratchBytes / (columns * sums * 4));
  int64_t byScratch = (rows + maxChunks - 1) / maxChunks;
  p.chunkRows = std::clamp<int64_t>(
      std::max(byScratch, std::min(byBytes, (rows + kMinChunks - 1) / kMinChunks)),
      std::min<int64_t>(rows, 4 * warps), rows);
  p.chunks = (rows + p.chunkRows - 1) / p.chunkRows;
  return p;
}

// `const int64_t chunk = ...; const int64_t local = ...;`: block b's chunk
// and its place in it (a row block below chunkRows, a column block after).
void emitChunkOfBlock(KernelSourceWriter &w, const ColumnSumPlan &p) {
  std::string per = str(p.blocksPerChunk());
  w.line("const int64_t chunk = (int64_t)blockIdx.x / " + per + ";");
  w.line("const int64_t local = (int64_t)blockIdx.x % " + per + ";");
}

// A column block (emitChunkOfBlock's chunk and local >= chunkRows). `body`
// emits the lines that add row r's term of column c (element i = r * C + c)
// to each accumulator it is given; the sums go to `outputs` (one per
// accumulator, float pointers of C elements).
LogicalResult emitColumnSums(
    KernelSourceWriter &w, const ColumnSumPlan &p,
    ArrayRef<std::string> outputs,
    function_ref<LogicalResult(ArrayRef<std::string>)> body) {
  std::string cs = str(p.columns), k = str(outputs.size());
  std::string partial = (kEntryPlaceholder + "_colsum").str();
  std::string done = (kEntryPlaceholder + "_coldone").str();
  w.global("__device__ float " + partial + "[" +
           str(p.chunks * p.columns * static_cast<int64_t>(outputs.size())) +
           "];");
  w.global("__device__ unsigned int " + done + "[" + str(p.tiles) + "];");
  w.line("// column sums: " + str(p.tiles) + " tiles of 32 columns x " +
         str(p.chunks) + " chunks of " + str(p.chunkRows) + " rows");
  w.line("const int64_t tile = local - " + str(p.chunkRows) + ";");
  w.line("const int64_t c = tile * 32 + (threadIdx.x & 31);");
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
  // The tile's last block adds its chunks' partials in chunk order: a
  // counter per tile, so the tiles finish apart and the last one has 32
  // columns to add, not all of them.
  w.line("if (!kiln_last_of(&" + done + "[tile], " + str(p.chunks) + "u)) return;");
  w.open("if (warp == 0 && c < " + cs + ")");
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

// The backward's row blocks, one column per thread.
LogicalResult emitColumnNormGradRows(Operation *op, KernelSourceWriter &w,
                                     StringRef rowLoop, CudaRowFusion *rows) {
  NormValues n = normValues(op);
  Value x = n.x, weight = n.weight, rstd = n.rstd, grad = n.grad, dx = n.dx;
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c), cf = countLiteral(c);
  std::string rowMean = n.centered ? w.ptr(n.mean) + "[r]" : std::string("0.0f");
  w.open(rowLoop);
  if (failed(beginRow(w, rows, "r", c, RowLanes::Block)))
    return failure();
  w.line("const float* x = " + w.ptr(x) + " + r * " + cs + ";");
  w.line("const float* g = " + w.ptr(grad) + " + r * " + cs + ";");
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
  if (failed(rowElement(w, rows, dx, "r * " + cs + " + c",
                        std::string("s * (dxhat - ") + (n.centered ? "mean1 - " : "") +
                            "xhat * mean2)")))
    return failure();
  w.close();
  if (failed(endRow(w, rows, "r", c)))
    return failure();
  w.close();
  return success();
}

} // namespace

// Per row of [R, C]: layer norm: mean, rstd = 1/sqrt(var + eps) (biased
// variance, two passes), y = (x - mean) * rstd * weight + bias; RMS norm
// (NormValues.centered false): rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd
// * weight.
LogicalResult emitNormCudaKernel(Operation *op, KernelSourceWriter &w, CudaLaunch &launch,
                                 CudaRowFusion *rows) {
  int64_t c = rowsAndColumns(op->getOperand(0)).second;
  return registerRow(op, rows, c) ? emitRegisterNorm(op, w, launch, rows)
                                  : emitColumnNorm(op, w, launch, rows);
}

// With xhat = (x - mean) * rstd (mean 0 for RMS norm) and dxhat = grad *
// weight, per row:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// (RMS norm: without the mean(dxhat) term), and per column: dweight =
// sum_rows(grad * xhat), dbias = sum_rows(grad) (layer norm). One launch in
// chunks of rows (ColumnSumPlan): each chunk's row blocks, then its column
// blocks (emitColumnSums; both only read the inputs).
LogicalResult emitNormGradCudaKernel(Operation *op, KernelSourceWriter &w,
                                     CudaLaunch &launch, CudaRowFusion *rows) {
  NormValues n = normValues(op);
  Value x = n.x, rstd = n.rstd, grad = n.grad, dw = n.dweight;
  auto [r, c] = rowsAndColumns(x);
  std::string cs = str(c), rs = str(r);
  bool registers = registerRow(op, rows, c);
  uint32_t threads = registers ? registerRowThreads(c) : cudaRowThreads(c);
  ColumnSumPlan columns =
      planColumnSums(r, c, threads, (mlir::kiln::tensorBytes(x) + mlir::kiln::tensorBytes(grad)) / r,
                     n.centered ? 2 : 1);
  launch = {columns.launchBlocks(), threads, 0};
  std::string cr = str(columns.chunkRows);
  std::string rowMean = n.centered ? w.ptr(n.mean) + "[r]" : std::string("0.0f");
  w.line(std::string("// ") + (n.centered ? "layer" : "RMS") +
         " norm backward over rows of [" + rs + ", " + cs + "]: " +
         str(columns.chunks) + " chunks of " + cr + " row blocks" +
         (registers ? " (8 columns a thread in registers)" : "") + " and " +
         str(columns.tiles) + " column blocks");
  emitChunkOfBlock(w, columns);
  w.open("if (local < " + cr + ")");
  // One row: the block's, when the last chunk has it.
  std::string rowLoop = "for (int64_t r = chunk * " + cr + " + local; r < " + rs + "; r += " +
                        rs + ")";
  if (failed(registers ? emitRegisterNormGradRows(op, w, threads, rowLoop, rows)
                       : emitColumnNormGradRows(op, w, rowLoop, rows)))
    return failure();
  w.line("return;");
  w.close();
  // x and grad at element i: a fused prologue's values are recomputed here
  // (the row blocks that store them run concurrently with this block).
  std::vector<std::string> outputs{w.ptr(dw)};
  if (n.centered)
    outputs.push_back(w.ptr(n.dbias));
  return emitColumnSums(
      w, columns, outputs, [&](ArrayRef<std::string> acc) -> LogicalResult {
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
          return it != prologue.vars.end() ? it->second : w.load(v, "i");
        };
        w.line("const float g = " + at(grad) + ";");
        w.line(acc[0] + " += g * ((" + at(x) + " - " + rowMean + ") * " +
               w.ptr(rstd) + "[r]);");
        if (n.centered)
          w.line(acc[1] + " += g;");
        return success();
      });
}

} // namespace kiln
