//===- CudaAttentionKernels.h - Flash attention kernels for CUDA ----------===//
//
// Internal to codegen/: the CUDA kernels of kiln.attention (forward: bf16 on
// mma.sync with every tile product in registers, CudaAttentionMma.cpp; fp32
// on CUDA cores, CudaAttentionKernels.cpp) and kiln.attention_grad
// (backward, CudaAttentionBackward.cpp), one kernel per op with its score
// and mask regions inlined (codegen/AttentionRegionEmitter, shared with the
// CPU), and the tile machinery they use: the tile plan (block sizes per head
// dim so the shared memory fits), the dynamic shared memory layout, tile
// loads and tile matrix products (tensor cores through nvcuda::wmma for
// bf16, a CUDA-core loop for fp32 so fp32 stays fp32).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDAATTENTIONKERNELS_H
#define KILN_CODEGEN_CUDAATTENTIONKERNELS_H

#include "codegen/AttentionDims.h"
#include "codegen/AttentionRegionEmitter.h"
#include "codegen/CudaKernelEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

class KernelSourceWriter;

// kiln.attention and kiln.attention_grad.
bool hasAttentionCudaKernel(mlir::Operation *op);

// How much dynamic shared memory an attention kernel's tiles may take in an
// artifact for `archs` (Artifact.archs): the smallest opt-in limit among
// them (runtime/schema/CudaSharedMemory.h) less kStaticSharedReserve.
//
// Why one plan for the artifact's smallest arch rather than per-arch kernel
// variants picked at load time: an artifact lists the archs it is compiled
// and checked for, so a plan that fits all of them makes every kernel
// launchable wherever the artifact may run, with one source per kernel (one
// JIT cache entry, one compile check, no schema change). The fast path is
// kept by targeting: kilnc's default archs (sm_80, sm_90a) keep the 163 KiB
// plan H100s have always run, `--cuda-arch=sm_90a` alone gets H100's 227 KiB,
// and adding sm_86 / sm_89 / sm_120 buys launchability on 99 KiB parts with
// smaller tiles for the largest head dims.
int64_t attentionSharedBudget(const std::vector<std::string> &archs);
// The budget of kilnc's default archs (sm_80, sm_90a): 163 KiB less the
// reserve.
int64_t defaultAttentionSharedBudget();

// Writes the kernel body and its launch (grid, 128 threads, dynamic shared
// bytes at most `sharedBudget`); emits an error on the op on failure.
mlir::LogicalResult emitAttentionCudaKernel(mlir::Operation *op,
                                            KernelSourceWriter &w,
                                            CudaLaunch &launch,
                                            int64_t sharedBudget);

namespace cuda_attention {

// Threads per block of every attention kernel: 4 warps.
constexpr int64_t kThreads = 128;
constexpr int64_t kWarps = kThreads / 32;
// Shared memory left out of the dynamic budget for the kernels' static
// __shared__ variables (kiln_last_of's flag, a few bytes; ptxas reports them
// and kiln-run --compile-only checks static + dynamic against the arch).
constexpr int64_t kStaticSharedReserve = 1024;

// The op's dims and row addressing (AttentionDims.h).
using Dims = AttentionDims;
inline Dims dimsOf(mlir::Operation *op) { return attentionDims(op); }

// How a kernel computes: element type of q/k/v and the tile shapes.
struct TilePlan {
  bool bf16 = false;   // bf16 tiles and tensor cores; else fp32 on CUDA cores
  int64_t Br = 64;     // query rows per tile
  int64_t Bc = 64;     // keys per tile
  int64_t Dp = 0, Dvp = 0; // D and Dv rounded up to 16 (zero padded)
  // Backward only: role A's fp32 dK/dV accumulators in a Workspace slice
  // per block (global memory) instead of shared memory. Chosen only when no
  // tile fits the budget otherwise (fp32 head dim 256 on 99 KiB parts):
  // slower, but launchable.
  bool dkvInWorkspace = false;
  std::string elem() const { return bf16 ? "uint16_t" : "float"; }
  int64_t elemBytes() const { return bf16 ? 2 : 4; }
};

// Named regions of one block's dynamic shared memory, each 32-byte aligned
// (wmma loads and stores need 256-bit aligned pointers).
class SharedLayout {
public:
  // Reserves `count` elements of C type `type` (`bytes` each); returns the
  // region's byte offset.
  int64_t add(const std::string &name, const std::string &type, int64_t count,
              int64_t bytes);
  // Regions added after `mark` start again at `mark` (a union of the two
  // roles' regions); `size()` stays the maximum.
  int64_t mark() const { return end; }
  void rewind(int64_t offset) { end = offset; }
  int64_t size() const { return peak; }
  // `T* name = (T*)(smem + offset);` for every region.
  void declare(KernelSourceWriter &w) const;

private:
  struct Region {
    std::string name, type;
    int64_t offset;
  };
  std::vector<Region> regions;
  int64_t end = 0, peak = 0;
};

// Declares `unsigned char* smem`: the kernel's dynamic shared memory (a
// static buffer under the test-only host emulation).
void declareDynamicShared(KernelSourceWriter &w);

// `#include <mma.h>` (once per artifact thanks to its guard; nothing under
// the host emulation, which defines its own test-only nvcuda::wmma).
void includeWmma(KernelSourceWriter &w);

// Loads rows [row0, row0 + rows) of a global matrix of `cols` columns at
// `src` (element offset `base` of the first row of the whole matrix, rows
// `rowStride` elements apart: AttentionDims::headOffset / rowStride) into
// the shared tile `dst` [rows, colsPadded]; rows at or past `limit` and
// columns past `cols` are zero.
void emitLoadTile(KernelSourceWriter &w, const TilePlan &plan,
                  const std::string &dst, const std::string &src,
                  const std::string &base, int64_t rowStride,
                  const std::string &row0, int64_t limit, int64_t rows,
                  int64_t cols, int64_t colsPadded);

// An operand of a tile product: element (r, c) of the logical matrix is
// base[r * ld + c] (row major) or base[c * ld + r] (column major).
struct TileOperand {
  std::string base;
  bool colMajor;
  int64_t ld;
};

// c[M, N] (float, row major, dense) (+)= a[M, K] b[K, N] over the whole
// block: wmma 16x16x16 tiles spread over the warps (bf16), or one thread per
// output element summing k in order (fp32). M, N, K are multiples of 16.
// Callers put a barrier between producing a or b and this, and between this
// and reading c.
void emitTileMatmul(KernelSourceWriter &w, const TilePlan &plan, int64_t M,
                    int64_t N, int64_t K, const TileOperand &a,
                    const TileOperand &b, const std::string &c,
                    bool accumulate);

// Statements setting `int kept` (declared by the caller) to whether the
// mask keeps (i, j); with no mask, `kept = 1`. With `tileAllKept` (a
// variable emitBlockSkip declared) the mask is evaluated only where the
// tile is not kept whole. Emits an error on failure.
mlir::LogicalResult emitMaskTest(KernelSourceWriter &w, mlir::Operation *op,
                                 mlir::Region &mask,
                                 const AttentionRegionInputs &in,
                                 const std::string &tileAllKept = "");

// Statements declaring `float s` (the op's scale times `product`, the
// pair's Q K^T) and `float score` (the score region's value, or s). The
// region's statements free of s, i and j are left out: emitScoreInvariants
// writes them once, in an enclosing scope.
mlir::LogicalResult emitScore(KernelSourceWriter &w, mlir::kiln::AttentionOp op,
                              const AttentionRegionInputs &in,
                              const std::string &product);
// The score region's statements that are the same for every pair of one
// (b, h) (AttentionRegionEmitter::emitForwardHoisted), once per block.
mlir::LogicalResult emitScoreInvariants(KernelSourceWriter &w,
                                        mlir::kiln::AttentionOp op,
                                        const AttentionRegionInputs &in);
// Writes those statements (nothing when there are none).
void writeScoreInvariants(KernelSourceWriter &w,
                          llvm::ArrayRef<std::string> invariant);

// The block-skip test at the top of a key/query block pair over the (i, j)
// pairs of the [rows, cols] tile (i = i0 + r < T, j = j0 + c < S); `onSkip`
// runs when nothing is kept. A mask of tests linear in i and j
// (linearMaskTests) is decided at the tile's four corners by every thread
// alike, then a barrier; any other mask is evaluated by every thread on its
// share of the pairs and the block agrees with __syncthreads_or. With
// `tileAllKept`, it then declares `const int <tileAllKept>`: whether every
// in-range pair is kept (a linear mask: when that follows from the corners),
// so the pairs' own tests can be skipped (the tiles below a causal
// diagonal). Nothing is emitted when the op has no mask (every in-range pair
// is kept; callers then pass no tileAllKept to emitMaskTest either).
mlir::LogicalResult emitBlockSkip(KernelSourceWriter &w, mlir::Operation *op,
                                  mlir::Region &mask,
                                  const AttentionRegionInputs &in,
                                  const Dims &n, int64_t rows, int64_t cols,
                                  const std::string &onSkip,
                                  const std::string &tileAllKept = "");
// Whether emitBlockSkip over `mask` meets a block barrier (every mask but
// none: the corner test's __syncthreads, the pair test's __syncthreads_or).
inline bool blockSkipSyncs(mlir::Region &mask) { return !mask.empty(); }

std::string str(int64_t v);
void lines(KernelSourceWriter &w, llvm::ArrayRef<std::string> text);
int64_t roundUp16(int64_t v);

// The tile plan of a forward or backward kernel (`pass`): q/k/v's element
// type, D and Dv padded to 16, and the first of the `tiles` (Br x Bc;
// by default 64x64, 64x32, 32x32, 32x16, 16x16, largest first) whose shared
// memory, as `layoutOf` lays it out, fits `sharedBudget` bytes; for the
// backward, when none does, the same again with dkvInWorkspace. When none
// fits: an error on `op`.
struct PlannedTiles {
  TilePlan plan;
  SharedLayout layout;
};
inline constexpr std::pair<int64_t, int64_t> kTileCandidates[] = {
    {64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}};
mlir::FailureOr<PlannedTiles>
chooseTiles(mlir::Operation *op, const Dims &n, llvm::StringRef pass,
            int64_t sharedBudget,
            llvm::function_ref<SharedLayout(const TilePlan &)> layoutOf,
            llvm::ArrayRef<std::pair<int64_t, int64_t>> tiles = kTileCandidates);

// The shared memory layouts of the two kernels (exposed for tests of the
// tile choice per budget).
SharedLayout forwardLayout(const TilePlan &p);
SharedLayout backwardLayout(const TilePlan &p);

// log2(e) and ln(2) as float literals: the bf16 kernels keep scores and
// lse in base 2, so that each probability is one exp2.
inline constexpr const char *kLog2eLiteral = "1.44269504f";
inline constexpr const char *kLn2Literal = "0.693147181f";

// The mma.sync helpers of the bf16 kernels (kiln_mma_bf16, kiln_ld_pair,
// ldmatrix, cp.async, 16-byte chunk loads, KILN_UNROLL), once per artifact thanks to a guard;
// under the host emulation the device-only ones come from
// test/sim/CudaHostIntrinsics.h.
void includeMma(KernelSourceWriter &w);

// Building blocks of the mma.sync kernels (CudaAttentionMma.cpp), for
// 128-thread blocks whose code names the lane's group g = lane / 4 and
// position t = lane % 4.
//
// Row stride of a shared bf16 tile with `cols` columns: padded by 8
// elements (16 bytes) so that the 8 rows of a fragment read start in
// different banks.
int64_t paddedStride(int64_t cols);
// `const bool name`: whether bf16 rows of `cols` elements at `ptr` allow
// 16-byte loads (cols a multiple of 8 and ptr 16-byte aligned).
void emitVectorFlag(KernelSourceWriter &w, const std::string &name,
                    const std::string &ptr, int64_t cols);
// Loads rows [row0, row0 + rows) of the bf16 global matrix `src` of `cols`
// columns (element offset `base` of its first row, rows `rowStride` elements
// apart) into shared memory, row major into `dst` (stride
// paddedStride(colsPadded)), zero past row `limit` and column `cols`, up to
// column `colsPadded`; 16 bytes at a time where the kernel variable `vec`
// (emitVectorFlag) holds and the chunk is inside the matrix.
void emitLoadTile16(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                    const std::string &base, int64_t rowStride, const std::string &row0,
                    const std::string &vec, int64_t limit, int64_t rows, int64_t cols,
                    int64_t colsPadded);
// Sets `uint32_t dst[4]` to the A fragment (16x16, row major) whose element
// (m, k) is tile[(row + m) * ld + col + k], by one ldmatrix (`row` and `col`
// the same for the whole warp, multiples of 8; rows 16-byte aligned).
void emitFragmentA(KernelSourceWriter &w, const std::string &dst,
                   const std::string &tile, const std::string &row,
                   const std::string &col, int64_t ld);
// acc0, acc1 (16x8 fp32 each) += a b0, a b1 where b0's element (k, n) is
// tile[(row + n) * ld + col + k] and b1's tile[(row + 8 + n) * ld + col + k]
// (two 8-row slices of a row-major tile as B's columns), both read by one
// ldmatrix. `row` and `col` multiples of 8, rows 16-byte aligned.
void emitMmaBPair(KernelSourceWriter &w, const std::string &acc0, const std::string &acc1,
                  const std::string &a, const std::string &tile, const std::string &row,
                  const std::string &col, int64_t ld);
// The same with b0's element (k, n) at tile[(row + k) * ld + col + n] and
// b1's at tile[(row + k) * ld + col + 8 + n]: 16 rows of a row-major tile
// as B's depth, two 8-column slices as its columns (ldmatrix.trans).
void emitMmaBPairTransposed(KernelSourceWriter &w, const std::string &acc0,
                            const std::string &acc1, const std::string &a,
                            const std::string &tile, const std::string &row,
                            const std::string &col, int64_t ld);
// emitLoadTile16's row-major copy by cp.async: it lands at the kernel's
// next kiln_cp_async_wait that retires its group (rows past `limit`
// zero-filled by the copy; unaligned sources and padding columns stored at
// once instead).
void emitAsyncTile16(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                     const std::string &base, int64_t rowStride, const std::string &row0,
                     const std::string &vec, int64_t limit, int64_t rows, int64_t cols,
                     int64_t colsPadded);
// `count` floats src[first + r] to dst[r] by 4-byte cp.async, 0 where
// row0 + r >= limit.
void emitAsyncFloats(KernelSourceWriter &w, const std::string &dst, const std::string &src,
                     const std::string &first, const std::string &row0, int64_t count,
                     int64_t limit);
// Advances `var` (an int64_t the caller declared, the tile corner `corner`,
// "i0" or "j0", of a rows x cols tile) by whole tiles to the first tile at
// or after it that `mask` keeps a pair of, or to `limit`; `allVar`, when
// given, set to whether the mask keeps that tile whole. Each tile is
// decided by emitBlockSkip, the same for every thread: a software pipeline
// knows the next tile to copy before computing the current one.
mlir::LogicalResult emitNextKeptTile(KernelSourceWriter &w, mlir::Operation *op,
                                     mlir::Region &mask, const AttentionRegionInputs &in,
                                     const Dims &n, int64_t rows, int64_t cols,
                                     const std::string &var, const std::string &corner,
                                     int64_t limit, const std::string &allVar);
// A loop over the tiles of one side (queries: corner "i0"; keys: "j0") that
// copies each kept tile into shared memory by cp.async and computes on it:
// with two stages the next kept tile's copies are issued before this one's
// computation, so they overlap it; with one, each tile is copied, then
// computed. The loop keeps `int stage` (the stage of the current tile) and
// declares `allKept` (when not empty) from findKept's verdict.
struct TilePipeline {
  std::string corner;
  int64_t limit = 0, step = 0, stages = 2;
  std::string allKept;
  // Advances the int64_t named by its first argument to a kept tile
  // (emitNextKeptTile), setting the int named by the second when not empty.
  std::function<mlir::LogicalResult(const std::string &, const std::string &)> findKept;
  // Whether findKept's loop meets a block barrier at every tile it tries (a
  // block-skip test over a mask): then, with two stages, that barrier already
  // orders this tile's reads of a stage before the next issue into it.
  bool findKeptSyncs = false;
  // Issues the copies of the tile at the corner expression into the stage
  // expression (no commit).
  std::function<void(const std::string &, const std::string &)> issue;
  // The computation on the tile at `corner` in `stage`.
  std::function<mlir::LogicalResult()> body;
};
mlir::LogicalResult emitTilePipeline(KernelSourceWriter &w, const TilePipeline &pl);
// The pipeline over key tiles of `cols` keys (corner j0) for blocks of
// `rows` query rows: the block-skip test of `mask`, K and V (pointers `k`
// and `v`, kernel flags vecK / vecV) copied into the stages of the shared
// tiles `kTile` and `vTile`. The caller sets the body.
TilePipeline keyTilePipeline(KernelSourceWriter &w, mlir::Operation *op, mlir::Region &mask,
                             const AttentionRegionInputs &in, const Dims &n, int64_t rows,
                             int64_t cols, int64_t stages, const std::string &allKept,
                             const std::string &k, const std::string &v,
                             const std::string &kTile, const std::string &vTile, int64_t Dp,
                             int64_t Dvp);
// The A fragment (an initializer of uint32_t[4]) of 16 columns of a warp's
// fp32 accumulators `acc[tile][4]`: slices 2 kc and 2 kc + 1, rounded to
// bf16 (the accumulator layout of two 8-column slices is the A layout of
// one 16-column step).
std::string packedA(const std::string &acc, const std::string &kc);

// The bf16 forward (CudaAttentionMma.cpp); emitForward calls it for bf16.
mlir::LogicalResult emitForwardMma(mlir::Operation *op, KernelSourceWriter &w,
                                   CudaLaunch &launch, int64_t sharedBudget);
mlir::LogicalResult emitForward(mlir::Operation *op, KernelSourceWriter &w,
                                CudaLaunch &launch, int64_t sharedBudget);
mlir::LogicalResult emitBackward(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch, int64_t sharedBudget);

} // namespace cuda_attention
} // namespace kiln

#endif // KILN_CODEGEN_CUDAATTENTIONKERNELS_H
