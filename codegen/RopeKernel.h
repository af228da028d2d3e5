//===- RopeKernel.h - kiln.rope's kernel on both targets ------------------===//
//
// Internal to codegen/: one element loop over x [..., T, D], each element
// rotated with its pair (i, i + D/2) by t * inv_freq[i mod D/2] (t the index
// along dim -2; the angle negated for `inverse`), the frequencies a constant
// table in the kernel source (computed by kilnc, never per step). The CPU
// walks the elements with its parallel loop, CUDA with a grid-stride loop;
// the element statements are the same text. A rope given permutations by
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
