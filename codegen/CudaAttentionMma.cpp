//===- CudaAttentionMma.cpp - bf16 flash attention forward on mma.sync ----===//
//
// The bf16 forward of kiln.attention, FlashAttention-2 style: everything a
// warp computes stays in its registers, in the fragment layout of the
// tensor cores' mma.sync.m16n8k16 (bf16 in, fp32 accumulate). The fp32
// forward (CudaAttentionKernels.cpp) keeps CUDA cores so fp32 stays fp32.
//
// One block of 4 warps per (b, h, tile of 64 query rows), grid
// B * H * ceil(T / 64); warp w owns rows [16 w, 16 w + 16) of the tile:
//  1. The Q tile goes to shared memory once and, for head dims up to 128,
//     into the warp's A fragments (registers) for the whole key loop; larger
//     head dims read the fragments from shared memory at each use.
//  2. For each tile of Bc keys (skipped when the mask keeps none of its
//     pairs, as in the other kernels), software-pipelined over two shared
//     stages: while the warps compute on one tile, the next kept tile's K
//     [Bc, Dp] and V [Bc, Dvp] (both row major) travel to the other stage
//     by cp.async (no registers; rows past the keys zero-filled by the
//     copy), so the loads of a tile overlap the tensor-core work of the one
//     before. B fragments come from shared memory by ldmatrix: K's as
//     stored, V's transposed by ldmatrix.trans (four 8x8 matrices, the
//     fragments of two mma.sync, per instruction).
//     S = Q K^T in the warp's accumulators: thread (g = lane / 4,
//     t = lane % 4) holds rows g and g + 8, columns 8 n + 2 t, 8 n + 2 t + 1
//     of each 8-key slice n. The score and mask regions run per element
//     on those coordinates (the mask only in tiles the block-skip test did
//     not find kept whole; bounds tests only where T or S is not a whole
//     number of tiles), the score is kept in base 2 (times log2 e, so each
//     probability is one exp2), the row max is a shuffle over the 4 threads
//     of a row, and p = exp2(score - m) rounded to bf16 is already the A
//     fragment of P V (the accumulator layout of two 8-key slices is the
//     A layout of one 16-key step), so P never leaves the registers; O is
//     rescaled by exp2(m_old - m_new) and accumulated in registers.
//  3. out = O / l and lse = m ln 2 + log l as in the fp32 kernel (a row that
//     keeps no key: out 0, lse -inf); each thread's partial l is summed over
//     its row's 4 threads at the end.
//
// Shared rows are padded by 8 elements (16 bytes) so that the 8 rows a
// fragment read touches start in different banks.
//
// Tiles: Bc = 64 keys when Dv <= 128, else 16 (the registers of S and O:
// head dim 256 leaves 128 per thread to O; the cuda-kernels-attention-*
// ctest entries check that no arch spills); 32 or 16 when the shared
// budget allows nothing larger.
//
// The mma.sync fragment layouts (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"): A 16x16 row major, registers
// a0..a3 hold (row g, cols 2t, 2t+1), (g + 8, 2t..), (g, 2t + 8..),
// (g + 8, 2t + 8..); B 16x8 "col": b0 (k 2t, 2t+1; col g), b1 (k 2t + 8..);
// C 16x8: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g + 8). The lower
// 16 bits of a register hold the lower index. The host emulation
// (test/sim/CudaHostIntrinsics.h) computes the same product from the same
// layout, so the kernel unit tests and the device simulator check this
// kernel's indexing.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaAttentionKernels.h"

#include <cassert>

#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {
namespace cuda_attention {

void includeMma(KernelSourceWriter &w) {
  for (const char *line : {
           "#ifndef KILN_MMA_HELPERS",
           "#define KILN_MMA_HELPERS",
           "#ifndef KILN_HOST_EMULATION",
           "// d (16x8 fp32) += a (16x16 bf16, row major) b (16x8 bf16, col "
           "major)",
           "__device__ __forceinline__ void kiln_mma_bf16(float* d, const "
           "uint32_t* a, uint32_t b0, uint32_t b1) {",
           "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16."
           "f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, "
           "%3};\"",
           "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), "
           "\"+f\"(d[3])",
           "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), "
           "\"r\"(a[3]), \"r\"(b0), \"r\"(b1));",
           "}",
           "// two consecutive bf16 (4-byte aligned) as one register",
           "__device__ __forceinline__ uint32_t kiln_ld_pair(const uint16_t* "
           "p) { return *(const uint32_t*)p; }",
           "// the shared-window address of a generic pointer into shared "
           "memory",
           "__device__ __forceinline__ uint32_t kiln_shared_address(const "
           "void* p) {",
           "  uint32_t a;",
           "  asm(\"{ .reg .u64 s; cvta.to.shared.u64 s, %1; cvt.u32.u64 %0, "
           "s; }\" : \"=r\"(a) : \"l\"(p));",
           "  return a;",
           "}",
           "// four 8x8 bf16 matrices from shared memory, lane l giving row l "
           "% 8 of matrix l / 8; lane 4 g + t gets (g, 2t..2t+1) of each",
           "__device__ __forceinline__ void kiln_ldmatrix_x4(uint32_t* r, "
           "const uint16_t* row) {",
           "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, "
           "%1, %2, %3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), "
           "\"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(kiln_shared_address(row)));",
           "}",
           "// the same, each matrix transposed: lane 4 g + t gets (2t, g), "
           "(2t + 1, g)",
           "__device__ __forceinline__ void kiln_ldmatrix_x4_trans(uint32_t* "
           "r, const uint16_t* row) {",
           "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
           "{%0, %1, %2, %3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), "
           "\"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(kiln_shared_address(row)));",
           "}",
           "// 16 bytes global -> shared without registers, the bytes past "
           "`bytes` (0 or 16) zeroed; lands by kiln_cp_async_wait",
           "__device__ __forceinline__ void kiln_cp_async16(void* dst, const "
           "void* src, int bytes) {",
           "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" "
           ":: \"r\"(kiln_shared_address(dst)), \"l\"(src), \"r\"(bytes) "
           ": \"memory\");",
           "}",
           "// 4 bytes the same way (cp.async.ca: 16 bytes is .cg's only size)",
           "__device__ __forceinline__ void kiln_cp_async4(void* dst, const "
           "void* src, int bytes) {",
           "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" "
           ":: \"r\"(kiln_shared_address(dst)), \"l\"(src), \"r\"(bytes) "
           ": \"memory\");",
           "}",
           "__device__ __forceinline__ void kiln_cp_async_commit() { asm "
           "volatile(\"cp.async.commit_group;\" ::: \"memory\"); }",
           "// every committed group but the newest `pending` has landed (for "
           "this thread: a barrier follows)",
           "template <int pending> __device__ __forceinline__ void "
           "kiln_cp_async_wait() { asm volatile(\"cp.async.wait_group %0;\" "
           ":: \"n\"(pending) : \"memory\"); }",
           "typedef uint4 kiln_chunk; // 8 bf16",
           "__device__ __forceinline__ kiln_chunk kiln_load_chunk(const "
           "uint16_t* p) { return *(const uint4*)p; }",
           "__device__ __forceinline__ void kiln_store_chunk(uint16_t* p, "
           "kiln_chunk c) { *(uint4*)p = c; }",
           "#endif",
           "__device__ __forceinline__ uint32_t kiln_pack_bf16(float lo, "
           "float hi) {",
           "  return (uint32_t)kiln_f32_to_bf16(lo) | "
           "((uint32_t)kiln_f32_to_bf16(hi) << 16);",
           "}",
           "#endif",
       })
    w.global(line);
}

int64_t paddedStride(int64_t cols) { return cols + 8; }

namespace {

// emitLoadTile16 (at once) or emitAsyncTile16 (by cp.async): thread e
// copies chunk (r, c8) = (e / chunks, e % chunks), so 8 threads write one
// row's 128 bytes (no bank conflict). A chunk that is not a whole 16 bytes
// of an aligned source (or, copied at once, lies past `limit`) is stored
// element by element, zero outside the matrix.
void emitTileCopy(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                  const std::string &base, int64_t rowStride, const std::string &row0,
                  const std::string &vec, int64_t limit, int64_t rows, int64_t cols,
                  int64_t colsPadded, bool async) {
  const int64_t chunks = colsPadded / 8, ld = paddedStride(colsPadded);
  w.open("for (int e = threadIdx.x; e < " + str(rows * chunks) + "; e += " + str(kThreads) + ")");
  w.line("const int r = e / " + str(chunks) + ", c8 = (e % " + str(chunks) + ") * 8;");
  w.line("const int64_t row = " + row0 + " + r;");
  w.line("const uint16_t* from = " + src + " + " + base + " + row * " + str(rowStride) + " + c8;");
  w.line("uint16_t* to = " + dst + " + r * " + str(ld) + " + c8;");
  if (async) {
    // Rows past `limit` are zero-filled by the copy itself.
    w.open("if (" + vec + " && c8 + 8 <= " + str(cols) + ")");
    w.line("const bool inside = row < " + str(limit) + ";");
    w.line("kiln_cp_async16(to, inside ? from : " + src + ", inside ? 16 : 0);");
  } else {
    w.open("if (" + vec + " && row < " + str(limit) + " && c8 + 8 <= " + str(cols) + ")");
    w.line("kiln_store_chunk(to, kiln_load_chunk(from));");
  }
  w.close();
  w.open("else KILN_UNROLL for (int q = 0; q < 8; ++q)");
  w.line("to[q] = row < " + str(limit) + " && c8 + q < " + str(cols) +
         " ? from[q] : (uint16_t)0;");
  w.close();
  w.close();
}

// The address of the row lane l gives an ldmatrix.x4 reading the 16 x 16
// block at (row, col) of a row-major tile: row l % 8 of matrix l / 8, the
// matrices ordered by rows first (0: rows 0-7, 1: rows 8-15, of columns
// 0-7, then of 8-15) or, with `columnsFirst`, by columns first.
std::string ldmatrixRow(const std::string &tile, const std::string &row, const std::string &col,
                        int64_t ld, bool columnsFirst) {
  const std::string rowBit = columnsFirst ? "(lane >> 4)" : "((lane >> 3) & 1)",
                    colBit = columnsFirst ? "((lane >> 3) & 1)" : "(lane >> 4)";
  return tile + " + ((" + row + ") + " + rowBit + " * 8 + (lane & 7)) * " + str(ld) + " + " +
         col + " + " + colBit + " * 8";
}

// acc0, acc1 += a times the two B fragments one ldmatrix (`instruction`)
// reads at `address`.
void emitMmaPairFrom(KernelSourceWriter &w, const std::string &acc0, const std::string &acc1,
                     const std::string &a, const std::string &instruction,
                     const std::string &address) {
  w.open("");
  w.line("uint32_t bf[4];");
  w.line(instruction + "(bf, " + address + ");");
  w.line("kiln_mma_bf16(" + acc0 + ", " + a + ", bf[0], bf[1]);");
  w.line("kiln_mma_bf16(" + acc1 + ", " + a + ", bf[2], bf[3]);");
  w.close();
}

} // namespace

void emitLoadTile16(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                    const std::string &base, int64_t rowStride, const std::string &row0,
                    const std::string &vec, int64_t limit, int64_t rows, int64_t cols,
                    int64_t colsPadded) {
  emitTileCopy(w, dst, src, base, rowStride, row0, vec, limit, rows, cols, colsPadded, false);
}

void emitAsyncTile16(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                     const std::string &base, int64_t rowStride, const std::string &row0,
                     const std::string &vec, int64_t limit, int64_t rows, int64_t cols,
                     int64_t colsPadded) {
  emitTileCopy(w, dst, src, base, rowStride, row0, vec, limit, rows, cols, colsPadded, true);
}

void emitVectorFlag(KernelSourceWriter &w, const std::string &name,
                    const std::string &ptr, int64_t cols) {
  w.line("const bool " + name + " = " +
         (cols % 8 == 0 ? "((unsigned long long)" + ptr + " & 15) == 0"
                        : std::string("false")) +
         ";");
}

void emitFragmentA(KernelSourceWriter &w, const std::string &dst,
                   const std::string &tile, const std::string &row,
                   const std::string &col, int64_t ld) {
  // Matrices 0..3: rows 0-7 / 8-15 of columns 0-7, then of columns 8-15:
  // registers a0..a3 of the A layout.
  w.line("kiln_ldmatrix_x4(" + dst + ", " + ldmatrixRow(tile, row, col, ld, false) + ");");
}

std::string packedA(const std::string &acc, const std::string &kc) {
  auto pair = [&](const std::string &tile, const char *e0, const char *e1) {
    return "kiln_pack_bf16(" + acc + "[" + tile + "][" + e0 + "], " + acc +
           "[" + tile + "][" + e1 + "])";
  };
  std::string lo = "2 * " + kc, hi = "2 * " + kc + " + 1";
  return "{" + pair(lo, "0", "1") + ", " + pair(lo, "2", "3") + ", " +
         pair(hi, "0", "1") + ", " + pair(hi, "2", "3") + "}";
}

void emitMmaBPair(KernelSourceWriter &w, const std::string &acc0, const std::string &acc1,
                  const std::string &a, const std::string &tile, const std::string &row,
                  const std::string &col, int64_t ld) {
  // Matrices: rows 0-7 of columns 0-7 and 8-15 (b0, b1 of acc0), then rows
  // 8-15 (acc1's).
  emitMmaPairFrom(w, acc0, acc1, a, "kiln_ldmatrix_x4", ldmatrixRow(tile, row, col, ld, true));
}

void emitMmaBPairTransposed(KernelSourceWriter &w, const std::string &acc0,
                            const std::string &acc1, const std::string &a,
                            const std::string &tile, const std::string &row,
                            const std::string &col, int64_t ld) {
  // Matrices: rows 0-7 and 8-15 of columns 0-7 (b0, b1 of acc0, transposed),
  // then of columns 8-15 (acc1's).
  emitMmaPairFrom(w, acc0, acc1, a, "kiln_ldmatrix_x4_trans",
                  ldmatrixRow(tile, row, col, ld, false));
}

void emitAsyncFloats(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                     const std::string &first, const std::string &row0, int64_t count,
                     int64_t limit) {
  w.open("for (int r = threadIdx.x; r < " + str(count) + "; r += " + str(kThreads) + ")");
  w.line("const bool inside = " + row0 + " + r < " + str(limit) + ";");
  w.line("kiln_cp_async4(" + dst + " + r, inside ? " + src + " + " + first + " + r : " + src +
         ", inside ? 4 : 0);");
  w.close();
}

LogicalResult emitNextKeptTile(KernelSourceWriter &w, Operation *op, Region &mask,
                               const AttentionRegionInputs &in, const Dims &n, int64_t rows,
                               int64_t cols, const std::string &var, const std::string &corner,
                               int64_t limit, const std::string &allVar) {
  const int64_t step = corner == "i0" ? rows : cols;
  w.open("for (; " + var + " < " + str(limit) + "; " + var + " += " + str(step) + ")");
  w.line("const int64_t " + corner + " = " + var + ";");
  w.line("(void)" + corner + ";");
  if (failed(emitBlockSkip(w, op, mask, in, n, rows, cols, "continue;",
                           allVar.empty() ? "" : "keptWhole")))
    return failure();
  if (!allVar.empty())
    w.line(allVar + " = keptWhole;");
  w.line("break;");
  w.close();
  return success();
}

LogicalResult emitTilePipeline(KernelSourceWriter &w, const TilePipeline &pl) {
  const std::string c = pl.corner, next = c + "Next", limit = str(pl.limit);
  const bool twoStages = pl.stages == 2, all = !pl.allKept.empty();
  auto findNext = [&] { return pl.findKept(next, all ? "nextAllKept" : ""); };
  w.line(twoStages ? "// tiles software-pipelined over two stages: the next kept tile is "
                     "copied while this one is computed"
                   : "// one stage: each tile copied, then computed");
  w.line("int64_t " + next + " = 0;");
  if (all)
    w.line("int nextAllKept = 1;");
  if (failed(findNext()))
    return failure();
  if (twoStages) {
    w.open("if (" + next + " < " + limit + ")");
    pl.issue(next, "0");
    w.close();
    w.line("kiln_cp_async_commit();");
  }
  w.line(twoStages ? "int stage = 0;" : "const int stage = 0;");
  w.open("for (int64_t " + c + " = " + next + "; " + c + " < " + limit + "; " + c + " = " + next +
         (twoStages ? ", stage ^= 1)" : ")"));
  if (all)
    w.line("const int " + pl.allKept + " = nextAllKept;");
  w.line(next + " = " + c + " + " + str(pl.step) + ";");
  if (twoStages) {
    if (failed(findNext()))
      return failure();
    w.open("if (" + next + " < " + limit + ")");
    pl.issue(next, "(stage ^ 1)");
    w.close();
  } else {
    pl.issue(c, "0");
  }
  w.line("kiln_cp_async_commit();");
  w.line(twoStages ? "kiln_cp_async_wait<1>(); // this tile's copies have landed"
                   : "kiln_cp_async_wait<0>();");
  w.line("__syncthreads(); // ... every thread's");
  if (failed(pl.body()))
    return failure();
  // The next iteration's issue writes the stage this one read: a barrier
  // between, here or (two stages) the one findKept meets before the issue.
  if (twoStages && pl.findKeptSyncs)
    w.line("// every warp is done with this stage at the next tile's block-skip barrier");
  else
    w.line("__syncthreads(); // every warp is done with this stage");
  if (!twoStages && failed(findNext()))
    return failure();
  w.close();
  w.line("kiln_cp_async_wait<0>();");
  return success();
}

TilePipeline keyTilePipeline(KernelSourceWriter &w, Operation *op, Region &mask,
                             const AttentionRegionInputs &in, const Dims &n, int64_t rows,
                             int64_t cols, int64_t stages, const std::string &allKept,
                             const std::string &k, const std::string &v,
                             const std::string &kTile, const std::string &vTile, int64_t Dp,
                             int64_t Dvp) {
  TilePipeline pl;
  pl.corner = "j0";
  pl.limit = n.S;
  pl.step = cols;
  pl.stages = stages;
  pl.allKept = allKept;
  pl.findKept = [&w, op, &mask, in, n, rows, cols](const std::string &var,
                                                   const std::string &allVar) {
    return emitNextKeptTile(w, op, mask, in, n, rows, cols, var, "j0", n.S, allVar);
  };
  pl.findKeptSyncs = blockSkipSyncs(mask);
  const int64_t stageK = cols * paddedStride(Dp), stageV = cols * paddedStride(Dvp);
  pl.issue = [=, &w](const std::string &j, const std::string &stage) {
    emitAsyncTile16(w, kTile + " + " + stage + " * " + str(stageK), k,
                    n.headOffset(true, "b", "kvh", n.D), n.rowStride(true, n.D), j, "vecK", n.S,
                    cols, n.D, Dp);
    emitAsyncTile16(w, vTile + " + " + stage + " * " + str(stageV), v,
                    n.headOffset(true, "b", "kvh", n.Dv), n.rowStride(true, n.Dv), j, "vecV", n.S,
                    cols, n.Dv, Dvp);
  };
  return pl;
}

namespace {

// Key tiles in flight: the one computed on and the next one, copied
// meanwhile.
constexpr int64_t kForwardStages = 2;

// The shared layout of the forward: Q, and kForwardStages K and V tiles,
// all row major, rows padded.
SharedLayout mmaForwardLayout(const TilePlan &p) {
  SharedLayout l;
  l.add("sQ", "uint16_t", p.Br * paddedStride(p.Dp), 2);
  l.add("sK", "uint16_t", kForwardStages * p.Bc * paddedStride(p.Dp), 2);
  l.add("sV", "uint16_t", kForwardStages * p.Bc * paddedStride(p.Dvp), 2);
  return l;
}

} // namespace

LogicalResult emitForwardMma(Operation *operation, KernelSourceWriter &w,
                             CudaLaunch &launch, int64_t sharedBudget) {
  auto op = cast<k::AttentionOp>(operation);
  Dims n = dimsOf(op);
  // Br: 16 rows per warp. Bc: 64 keys, 32, 16; past Dv = 128 only 16 (the
  // registers: O takes Dvp / 2 per thread, S Bc / 2).
  SmallVector<std::pair<int64_t, int64_t>> tiles;
  for (int64_t bc : {64, 32, 16})
    if (bc == 16 || roundUp16(n.Dv) <= 128)
      tiles.push_back({kWarps * 16, bc});
  FailureOr<PlannedTiles> planned =
      chooseTiles(op, n, "forward", sharedBudget, mmaForwardLayout, tiles);
  if (failed(planned))
    return failure();
  const TilePlan &p = planned->plan;
  const SharedLayout &layout = planned->layout;
  const int64_t qTiles = (n.T + p.Br - 1) / p.Br;
  const int64_t kSteps = p.Dp / 16, nS = p.Bc / 8, pSteps = p.Bc / 16,
                nO = p.Dvp / 8;
  const int64_t ldQ = paddedStride(p.Dp), ldK = paddedStride(p.Dp), ldV = paddedStride(p.Dvp);
  const bool qInRegisters = p.Dp <= 128;
  // Tiles the mask keeps whole skip the per-pair mask tests.
  const std::string allKept = op.getMask().empty() ? "" : "tileAllKept";
  launch = {static_cast<uint32_t>(n.B * n.H * qTiles),
            static_cast<uint32_t>(kThreads),
            static_cast<uint32_t>(layout.size())};
  includeMma(w);

  AttentionRegionInputs in = attentionLoopInputs(w, op.getCaptures());
  AttentionDropout drop = emitAttentionDropout(
      w, op.getDropoutProbability(), op.getRngState(), "cuda");
  std::string q = w.ptr(op.getQ()), k = w.ptr(op.getK()),
              v = w.ptr(op.getV());
  w.line("// flash attention forward: q [" + str(n.B) + ", " + str(n.H) +
         ", " + str(n.T) + ", " + str(n.D) + "], k/v [" + str(n.B) + ", " +
         str(n.KVH) + ", " + str(n.S) + ", " + str(n.D) + "/" + str(n.Dv) +
         "], " + str(n.G) + " query heads per kv head; tiles " + str(p.Br) +
         " x " + str(p.Bc) + ", bf16 mma.sync, Q fragments in " +
         (qInRegisters ? "registers" : "shared memory") + ", " +
         str(layout.size()) + " shared bytes");
  declareDynamicShared(w);
  layout.declare(w);
  lines(w, {
               "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;",
               "const int g = lane >> 2, t = lane & 3;",
               "const int64_t bh = blockIdx.x / " + str(qTiles) + ";",
               "const int64_t b = bh / " + str(n.H) + ", h = bh % " +
                   str(n.H) + ", kvh = h / " + str(n.G) + ";",
               "const int64_t i0 = (blockIdx.x % " + str(qTiles) + ") * " +
                   str(p.Br) + ";",
               "// this thread's two rows of the tile",
               "const int64_t iRow[2] = {i0 + warp * 16 + g, i0 + warp * 16 "
               "+ g + 8};",
               "(void)b; (void)h; // read only by some regions",
           });
  if (failed(emitScoreInvariants(w, op, in)))
    return failure();
  emitVectorFlag(w, "vecQ", q, n.D);
  emitVectorFlag(w, "vecK", k, n.D);
  emitVectorFlag(w, "vecV", v, n.Dv);
  emitLoadTile16(w, "sQ", q, n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D), "i0", "vecQ", n.T,
                 p.Br, n.D, p.Dp);
  w.line("__syncthreads();");

  if (qInRegisters) {
    w.line("uint32_t qa[" + str(kSteps) + "][4];");
    w.open("KILN_UNROLL for (int kc = 0; kc < " + str(kSteps) + "; ++kc)");
    emitFragmentA(w, "qa[kc]", "sQ", "warp * 16", "kc * 16", ldQ);
    w.close();
  }
  lines(w, {
               "float o[" + str(nO) + "][4];",
               "KILN_UNROLL for (int d = 0; d < " + str(nO) +
                   "; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;",
               "float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};",
           });

  // The key tiles, software-pipelined (emitTilePipeline): while the warps
  // compute on one stage, the next kept tile's K and V are on their way to
  // the other by cp.async.
  const int64_t stageK = p.Bc * ldK, stageV = p.Bc * ldV;
  TilePipeline pipeline = keyTilePipeline(w, op, op.getMask(), in, n, p.Br, p.Bc,
                                          kForwardStages, allKept, k, v, "sK", "sV", p.Dp, p.Dvp);
  pipeline.body = [&]() -> LogicalResult {
    w.line("const uint16_t* sKs = sK + stage * " + str(stageK) + ";");
    w.line("const uint16_t* sVs = sV + stage * " + str(stageV) + ";");

    w.line("// S = Q K^T: this warp's 16 rows, " + str(p.Bc) +
           " keys; each ldmatrix gives the B fragments of two 8-key slices");
    w.line("float st[" + str(nS) + "][4];");
    w.line("KILN_UNROLL for (int c = 0; c < " + str(nS) +
           "; ++c) st[c][0] = st[c][1] = st[c][2] = st[c][3] = 0.0f;");
    w.open("KILN_UNROLL for (int kc = 0; kc < " + str(kSteps) + "; ++kc)");
    std::string qFrag = "qa[kc]";
    if (!qInRegisters) {
      w.line("uint32_t qf[4];");
      emitFragmentA(w, "qf", "sQ", "warp * 16", "kc * 16", ldQ);
      qFrag = "qf";
    }
    w.open("KILN_UNROLL for (int cc = 0; cc < " + str(nS / 2) + "; ++cc)");
    emitMmaBPair(w, "st[2 * cc]", "st[2 * cc + 1]", qFrag, "sKs", "cc * 16", "kc * 16", ldK);
    w.close();
    w.close();

    // Bounds tests only where a tile can pass the end of the queries or keys.
    std::string inBounds;
    if (n.T % p.Br != 0)
      inBounds = "i < " + str(n.T);
    if (n.S % p.Bc != 0)
      inBounds += (inBounds.empty() ? "" : " && ") + std::string("j < ") + str(n.S);
    w.line("// score and mask per element; -inf where not kept. Scores are kept "
           "in base 2 (times log2 e) so that each probability is one exp2");
    w.line("float rowMax[2] = {-INFINITY, -INFINITY};");
    w.open("KILN_UNROLL for (int c = 0; c < " + str(nS) + "; ++c)");
    w.open("KILN_UNROLL for (int e = 0; e < 4; ++e)");
    w.line("const int i = (int)iRow[e >> 1], j = (int)j0 + c * 8 + 2 * t + (e & 1);");
    w.line("(void)i; (void)j; // read only by some regions");
    w.line("float val = -INFINITY;");
    w.open(inBounds.empty() ? std::string() : "if (" + inBounds + ")");
    w.line("int kept = 0;");
    if (failed(emitMaskTest(w, op, op.getMask(), in, allKept)))
      return failure();
    w.open("if (kept)");
    if (failed(emitScore(w, op, in, "st[c][e]")))
      return failure();
    w.line("val = score * " + std::string(kLog2eLiteral) + ";");
    w.close();
    w.close();
    w.line("st[c][e] = val;");
    w.line("rowMax[e >> 1] = fmaxf(rowMax[e >> 1], val);");
    w.close();
    w.close();

    w.line("// online softmax: a row's 4 threads agree on its max");
    w.line("float corr[2];");
    w.open("KILN_UNROLL for (int r = 0; r < 2; ++r)");
    w.line("rowMax[r] = fmaxf(rowMax[r], __shfl_xor_sync(0xffffffffu, "
           "rowMax[r], 1));");
    w.line("rowMax[r] = fmaxf(rowMax[r], __shfl_xor_sync(0xffffffffu, "
           "rowMax[r], 2));");
    w.line("const float mNew = fmaxf(m[r], rowMax[r]);");
    w.line("// no kept key so far: p = 0 and nothing to rescale");
    w.line("corr[r] = mNew == -INFINITY ? 1.0f : exp2f(m[r] - mNew);");
    w.line("m[r] = mNew;");
    w.line("l[r] *= corr[r];");
    w.close();
    w.open("KILN_UNROLL for (int c = 0; c < " + str(nS) + "; ++c)");
    w.open("KILN_UNROLL for (int e = 0; e < 4; ++e)");
    w.line("const float val = st[c][e];");
    w.line("const float pv = val == -INFINITY ? 0.0f : exp2f(val - m[e >> 1]);");
    w.line("l[e >> 1] += pv;");
    // Dropout (the same Philox draw as the CPU kernel and the backward)
    // weights v by p z; l and lse sum every p.
    if (drop.enabled) {
      w.line("const int64_t i = iRow[e >> 1], j = j0 + c * 8 + 2 * t + (e & 1);");
      w.line("st[c][e] = pv > 0.0f ? pv * " + drop.factor("bh", "i", "j") +
             " : 0.0f;");
    } else {
      w.line("st[c][e] = pv;");
    }
    w.close();
    w.close();
    w.open("KILN_UNROLL for (int d = 0; d < " + str(nO) + "; ++d)");
    w.line("o[d][0] *= corr[0]; o[d][1] *= corr[0];");
    w.line("o[d][2] *= corr[1]; o[d][3] *= corr[1];");
    w.close();

    w.line("// O += P V: two 8-key slices of P are one A fragment; each "
           "ldmatrix.trans gives the B fragments of two 8-column slices of V");
    w.open("KILN_UNROLL for (int kc = 0; kc < " + str(pSteps) + "; ++kc)");
    w.line("const uint32_t pa[4] = " + packedA("st", "kc") + ";");
    w.open("KILN_UNROLL for (int dd = 0; dd < " + str(nO / 2) + "; ++dd)");
    emitMmaBPairTransposed(w, "o[2 * dd]", "o[2 * dd + 1]", "pa", "sVs", "kc * 16", "dd * 16",
                           ldV);
    w.close();
    w.close();
    return success();
  };
  if (failed(emitTilePipeline(w, pipeline)))
    return failure();

  w.line("// out = O / l (l summed over the row's 4 threads); rows with no "
         "kept key: out = 0, lse = -inf");
  w.open("KILN_UNROLL for (int r = 0; r < 2; ++r)");
  w.line("l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);");
  w.line("l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);");
  w.close();
  w.open("KILN_UNROLL for (int d = 0; d < " + str(nO) + "; ++d)");
  w.open("KILN_UNROLL for (int e = 0; e < 4; ++e)");
  w.line("const int64_t i = iRow[e >> 1];");
  w.line("const int dv = d * 8 + 2 * t + (e & 1);");
  w.line("if (i >= " + str(n.T) + " || dv >= " + str(n.Dv) + ") continue;");
  w.line("const float lr = l[e >> 1];");
  w.line(w.ptr(op.getOut()) + "[" + n.rowOffset(false, "b", "h", "i", n.Dv) +
         " + dv] = kiln_f32_to_bf16(lr > 0.0f ? o[d][e] / lr : 0.0f);");
  w.close();
  w.close();
  w.open("if (t == 0)");
  w.open("for (int r = 0; r < 2; ++r)");
  w.line("if (iRow[r] >= " + str(n.T) + ") continue;");
  w.line(w.ptr(op.getLse()) + "[bh * " + str(n.T) +
         " + iRow[r]] = l[r] > 0.0f ? m[r] * " + std::string(kLn2Literal) +
         " + logf(l[r]) : -INFINITY;");
  w.close();
  w.close();
  return success();
}

} // namespace cuda_attention
} // namespace kiln
