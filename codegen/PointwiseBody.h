//===- PointwiseBody.h - Per-element statements of a pointwise group ------===//
//
// Internal to codegen/: the backend-neutral half of a pointwise kernel. Given
// a group of pointwise ops (ScalarExprEmitter's elementwise ops, broadcast,
// splat constant, iota, causal_mask) and the name of the flat output index,
// builds the statements that compute one output element and store it:
//
//   const float v0 = in0[(i / 128) % 4];   // kiln.broadcast
//   const float v1 = kiln_gelu((v0));      // kiln.gelu
//   out0[i] = v1;
//
// Values are computed in float; bf16 buffers are widened on load and
// rounded on store (`out0[i] = kiln_f32_to_bf16(v1);`).
//
// The CPU emitter wraps them in a `for` loop, the CUDA emitter in a
// grid-stride loop; the text is valid C++ and CUDA alike.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_POINTWISEBODY_H
#define KILN_CODEGEN_POINTWISEBODY_H

#include "codegen/KernelSourceWriter.h"

#include <string>

namespace kiln {

struct PointwiseBody {
  int64_t elements = 0;                       // output elements (loop trip count)
  llvm::SmallVector<std::string> statements;  // one `const T vN = ...;` per op
  llvm::SmallVector<std::string> stores;      // one `outK[i] = vN;` per output
                                              // (rounded for a bf16 output)

  // The group's inputs read at the element's own index, in first-read order,
  // and whether the statements compute with the index itself (broadcast
  // coordinates, iota, causal_mask).
  llvm::SmallVector<mlir::Value> plainInputs;
  bool usesIndex = false;

  // The name of the register copy of a buffer's elements that a lane-staged
  // body reads and writes: "in0_l" for "in0" (a kiln_lanes8 in CUDA).
  static std::string laneCopy(llvm::StringRef pointer);

  // True for the ops that may share one pointwise loop nest with others.
  static bool isPointwise(mlir::Operation *op);

  // kiln.fusion sum only: the variable holding the element the total adds
  // up, and the total (the whole-tensor kiln.reduce_sum's result, one f32).
  std::string summand;
  mlir::Value total;

  // The statements of `group` (all ops pointwise) over the flat output index
  // `index`, reading and writing the pointers `w` declared. Emits an error on
  // the offending op when the group cannot be one flat loop. With `lane` (a
  // C index, "j"), plain reads and the stores go to element `lane` of each
  // buffer's register copy (laneCopy) instead: the caller loads and stores
  // those copies whole (plainInputs, outputs), a few elements per thread.
  static mlir::FailureOr<PointwiseBody> build(const KernelGroup &group,
                                              const KernelSourceWriter &w,
                                              llvm::StringRef index,
                                              llvm::StringRef lane = {});
  // A "sum" group (pointwise ops, then a whole-tensor kiln.reduce_sum of a
  // value they compute): the loop over the sum's input elements, with the
  // stores of the group's other outputs, `summand` and `total` (`lane` as
  // for build).
  static mlir::FailureOr<PointwiseBody> buildSum(const KernelGroup &group,
                                                 const KernelSourceWriter &w,
                                                 llvm::StringRef index,
                                                 llvm::StringRef lane = {});
  // Whether `group` is such a group, or several such chains side by side
  // (a multi-tensor "sum" kernel: sumChains).
  static bool isSumGroup(const KernelGroup &group);
  // The chains of a "sum" group: each whole-tensor kiln.reduce_sum with the
  // ops of the group it reads, in group order, as a group of its own (its
  // inputs the values it reads from outside the chain, its outputs those of
  // `group`'s outputs it computes). One chain for a single sum.
  static llvm::SmallVector<KernelGroup> sumChains(const KernelGroup &group);
};

} // namespace kiln

#endif // KILN_CODEGEN_POINTWISEBODY_H
