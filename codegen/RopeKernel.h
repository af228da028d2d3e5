//===- RopeKernel.h - kiln.rope's kernel on both targets ------------------===//
//
// Internal to codegen/: one loop over the pairs (i, i + D/2) of x [..., T,
// D], each pair rotated by t * inv_freq[i mod D/2] (t the index along dim
// -2; the angle negated for `inverse`; one cosine and one sine per pair),
// the frequencies a table in the kernel source (computed by kilnc, never per
// step). The CPU walks the pairs with its parallel loop, CUDA with a
// grid-stride loop (consecutive lanes, consecutive pairs: coalesced); the
// pair statements are the same text. A rope given permutations by
// --kiln-fuse-rope reads its input and writes its result at the permuted
// offsets (the feature dim stays contiguous in both), and loads / stores
// through the input's and result's element types (bf16 widened / rounded).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ROPEKERNEL_H
#define KILN_CODEGEN_ROPEKERNEL_H

#include "codegen/CudaKernelEmitter.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace kiln {

class KernelSourceWriter;

mlir::LogicalResult emitRopeCpu(mlir::Operation *op, KernelSourceWriter &w);
mlir::LogicalResult emitRopeCuda(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch);

} // namespace kiln

#endif // KILN_CODEGEN_ROPEKERNEL_H
