//===- CudaBespokeKernels.h - CUDA kernels for non-pointwise ops ----------===//
//
// Internal to codegen/: the CUDA twins of CpuBespokeKernels.h. Each emitter
// writes the body of a single-op kernel into a KernelSourceWriter (target
// Cuda) whose buffers are the op's distinct operands followed by its results,
// and sets the launch configuration the body was written for. Also the
// helpers CudaBespokeKernels.cpp, CudaRowKernels.cpp and
// CudaOptimizerKernels.cpp share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDABESPOKEKERNELS_H
#define KILN_CODEGEN_CUDABESPOKEKERNELS_H

#include "codegen/CudaKernelEmitter.h"
#include "codegen/RowGroup.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <string>

namespace kiln {

class KernelSourceWriter;

// Threads per block of flat (grid-stride) kernels.
constexpr uint32_t kCudaBlock = 256;
// Most blocks a grid-stride kernel is launched with: a few waves of the
// largest GPUs (132 SMs x 8 blocks of 256 threads), so more blocks would only
// add scheduling; also bounds the per-block scratch of reductions.
constexpr uint32_t kCudaMaxGrid = 2048;
// Most blocks of a row kernel (one block per row, rows strided by the grid).
constexpr uint32_t kCudaMaxRowGrid = 65535;

// ceil(items / perBlock) clamped to [1, maxGrid].
uint32_t cudaGridFor(int64_t items, uint32_t perBlock,
                     uint32_t maxGrid = kCudaMaxGrid);
// Threads per block of a row kernel over rows of `columns` elements: a
// multiple of the warp size (block reductions need it), at most 256, or up to
// 1024 for rows wider than 8192.
uint32_t cudaRowThreads(int64_t columns);

// Opens `for (int64_t <index> = global thread; index < n; index += threads)`;
// with `index32`, an `int` index (the caller knows that every index it forms
// from it stays below 2^31: indexFitsInt32).
void openGridStrideLoop(KernelSourceWriter &w, int64_t n,
                        llvm::StringRef index = "i", bool index32 = false);
// Whether every buffer of `group` has fewer than 2^31 elements, so that a
// pointwise loop's element indices (flat, broadcast or moved: each below its
// buffer's size) fit an int.
bool indexFitsInt32(const KernelGroup &group);

// The optimizer ops (accumulate, grad_scale, adam, sgd, sgd_momentum), in
// CudaOptimizerKernels.cpp.
bool hasOptimizerCudaKernel(mlir::Operation *op);
mlir::LogicalResult emitOptimizerCudaKernel(mlir::Operation *op,
                                            KernelSourceWriter &w,
                                            CudaLaunch &launch);

// One kernel updating every parameter of `group` (the adam, sgd and
// sgd_momentum ops of a kiln.fusion optimizer), each on a segment of the
// grid listed in a table in the source, in place; sets the launch. Reads the
// buffers through `buffers[]` itself (no declareBuffers). In
// CudaOptimizerKernels.cpp.
mlir::LogicalResult emitMultiTensorUpdateCudaKernel(const KernelGroup &group,
                                                    KernelSourceWriter &w,
                                                    CudaLaunch &launch);

// True for the ops with a bespoke CUDA emitter (optimizer ops included).
bool hasBespokeCudaKernel(mlir::Operation *op);

// The pointwise prologue and epilogue of a fused row kernel (a kiln.fusion
// "row", split by RowGroup) that the CUDA row emitters write inside their
// row loop: the prologue's elements of the row, computed by the row's
// threads and stored to the buffers the row op reads, then a barrier; at the
// end of the row a barrier, then the epilogue's elements. Column passes
// that read a prologue value across rows (layer_norm_grad's weight and bias
// sums, run by other blocks) recompute it instead: other blocks' stores are
// not visible within one launch.
struct CudaRowFusion {
  const KernelGroup *group = nullptr;
  RowGroup parts;
  bool began = false, ended = false; // set by the row emitter
};

// Splits a shape into [rows, C] with C the last dimension.
std::pair<int64_t, int64_t> rowsAndColumns(mlir::Value v);

// How the threads of a row kernel share a row: a whole block (barrier
// __syncthreads) or one warp (__syncwarp; warps of a block run different
// rows, so a block-wide barrier would be wrong).
enum class RowLanes { Block, Warp };

// The fused prologue of row `row` (no-op without `rows`): its elements
// computed and stored by the row's threads, then a barrier before the row op
// reads them.
mlir::LogicalResult beginRow(KernelSourceWriter &w, CudaRowFusion *rows,
                             llvm::StringRef row, int64_t length,
                             RowLanes lanes);
// The fused epilogue of row `row` (no-op without `rows`), after a barrier
// (the row op's stores of the row are then visible to every thread of it).
mlir::LogicalResult endRow(KernelSourceWriter &w, CudaRowFusion *rows,
                           llvm::StringRef row, int64_t length);

// Result 0 of a row op with an element epilogue (the norms) at flat index
// `index` of row `row`'s loop, `value` a float C expression: stored, and
// with `rows` handed to the fused epilogue in a register (emitRowElement;
// endRow then has nothing left to do).
mlir::LogicalResult rowElement(KernelSourceWriter &w, CudaRowFusion *rows,
                               mlir::Value result, llvm::StringRef index,
                               llvm::StringRef value);

// A multi-tensor kernel's segment table (the optimizer updates, the global
// norm's sums): `rows` ("{first block, ...}", sorted by first block, each
// `columns` wide) as a __constant__ array `<entry>_segments`, then the
// block's binary search for its row, ending with `const unsigned int* row`
// (its row) in scope. `what` says what the segments run and `names` names
// the columns, in a comment.
void emitSegmentLookup(KernelSourceWriter &w, llvm::ArrayRef<std::string> rows,
                       size_t columns, llvm::StringRef what, llvm::StringRef names);

// Helpers of the row kernels (CudaRowKernels.cpp, CudaNormKernels.cpp).
// "768.0f": a column count as a float literal (for means).
std::string countLiteral(int64_t v);
// Op attribute `name` as a double (0 when absent).
double floatAttr(mlir::Operation *op, llvm::StringRef name);
// Opens the loop of a row kernel: `for (r = blockIdx.x; r < rows; r +=
// gridDim.x)`, one block of cudaRowThreads per row; sets the launch.
void openRowLoop(KernelSourceWriter &w, int64_t rows, int64_t columns,
                 CudaLaunch &launch);
// `for (int64_t c = threadIdx.x; c < C; c += blockDim.x)`: a row's columns.
std::string columnLoop(int64_t columns);

// The norms (layer_norm, rms_norm) and their backwards, CudaNormKernels.cpp.
mlir::LogicalResult emitNormCudaKernel(mlir::Operation *op, KernelSourceWriter &w,
                                       CudaLaunch &launch, CudaRowFusion *rows);
mlir::LogicalResult emitNormGradCudaKernel(mlir::Operation *op,
                                           KernelSourceWriter &w,
                                           CudaLaunch &launch,
                                           CudaRowFusion *rows);

// The row ops (layer_norm, rms_norm, softmax, cross_entropy and their
// gradients), in CudaRowKernels.cpp; with `rows`, the row op of a fused row
// kernel.
bool hasRowCudaKernel(mlir::Operation *op);
mlir::LogicalResult emitRowCudaKernel(mlir::Operation *op,
                                      KernelSourceWriter &w,
                                      CudaLaunch &launch,
                                      CudaRowFusion *rows = nullptr);

// The sum of `n` f32 elements into out[0] (a whole-tensor kiln.reduce_sum):
// a grid-stride loop in which `element()` writes the statements of element
// `e` and returns the expression to add, block sums, and the last block's
// sum of those; sets `launch`. Its halves, for a caller writing its own
// loop over `items` (threads' work items) that adds to `float acc`:
// beginGridTotal sets `launch` and declares `acc`; endGridTotal sums.
void beginGridTotal(KernelSourceWriter &w, CudaLaunch &launch, int64_t items);
void endGridTotal(KernelSourceWriter &w, const CudaLaunch &launch,
                  const std::string &out);
void emitGridTotal(KernelSourceWriter &w, CudaLaunch &launch, int64_t n,
                   const std::string &out, llvm::function_ref<std::string()> element);

// Writes the kernel body of `op` and its launch; with `rows`, `op` is the
// row op of a fused row kernel and the emitter writes `rows`' prologue and
// epilogue into its row loop. Emits an error on failure.
mlir::LogicalResult emitBespokeCudaKernel(mlir::Operation *op,
                                          KernelSourceWriter &w,
                                          CudaLaunch &launch,
                                          CudaRowFusion *rows = nullptr);

} // namespace kiln

#endif // KILN_CODEGEN_CUDABESPOKEKERNELS_H
