//===- RowGroup.h - A row op with its pointwise prologue and epilogue -----===//
//
// Internal to codegen/: the backend-neutral half of a fused row kernel (a
// kiln.fusion row). Splits a group into its one row op (layer_norm(_grad),
// rms_norm(_grad), softmax(_grad), cross_entropy(_grad), reduce_sum over
// trailing dims), the
// pointwise ops before it (prologue: computed per row before the row op
// reads them) and after it (epilogue: computed per row from the row just
// produced), and checks what both emitters rely on: every pointwise op
// covers the row op's input element for element, and every value a part or
// the row op reads from outside its part is a buffer of the kernel. The CPU
// and CUDA emitters only differ in how they walk a row's elements.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ROWGROUP_H
#define KILN_CODEGEN_ROWGROUP_H

#include "codegen/CpuKernelEmitter.h"

#include <functional>
#include <string>

namespace kiln {
class KernelSourceWriter;
}

namespace kiln {

struct RowGroup {
  mlir::Operation *rowOp = nullptr;
  llvm::SmallVector<mlir::Operation *> prologue, epilogue; // in order
  // The row op computes its epilogue element by element
  // (RowOpInterface::hasElementEpilogue, emitRowElement): its result 0 may
  // then be a value of no buffer (only the epilogue reads it).
  bool elementEpilogue = false;

  // Splits `group` (one non-pointwise op, the rest pointwise); emits an
  // error on the offending op when it is not a legal row kernel.
  static mlir::FailureOr<RowGroup> split(const KernelGroup &group);
};

// Writes the pointwise ops `ops` (a prologue or an epilogue) for row `row`
// (a C expression) of `length` elements, each element of the row visited
// once by the loop `for (e = first; e < length; e += step)`:
//   for (int64_t e = <first>; e < <length>; e += <step>) {
//     const int64_t i = row * length + e;   // flat index of the element
//     <statements>; out<k>[i] = v<j>;       // values the kernel writes
//   }
// The CPU walks a row with one thread (first 0, step 1), CUDA with the
// threads of a block (threadIdx.x, blockDim.x) or the lanes of a warp.
mlir::LogicalResult emitRowPart(KernelSourceWriter &w, const KernelGroup &group,
                                llvm::ArrayRef<mlir::Operation *> ops,
                                llvm::StringRef row, int64_t length,
                                llvm::StringRef first, llvm::StringRef step);

// Where a row op that computes its result 0 element by element puts one
// element: `index` is its flat index (a C expression); `element` gives the
// text of another buffer's element there, as stored (default:
// `pointer[index]`; a CUDA kernel's register copy of the thread's elements),
// and `store` the statement writing a float value to an output's element
// (default: KernelSourceWriter::store at `index`).
struct RowElementAccess {
  std::string index;
  std::function<std::string(mlir::Value)> element;
  std::function<std::string(mlir::Value, llvm::StringRef)> store;
};

// Inside a row op's loop over the elements of a row: result 0 of the row op
// at one element is `value` (a float C expression). Holds it in a register
// (`rv`, rounded to bf16 when result 0 is bf16, and kept from being
// contracted into the next operation, so it is exactly what a store and a
// reload would give), stores it when `group` is null or writes result 0,
// then computes `epilogue` (empty, or all of a fused row kernel's epilogue
// with RowGroup::elementEpilogue) for that element, reading result 0 from
// the register, and stores what the group writes.
mlir::LogicalResult emitRowElement(KernelSourceWriter &w, const KernelGroup *group,
                                   llvm::ArrayRef<mlir::Operation *> epilogue,
                                   mlir::Value result, llvm::StringRef value,
                                   const RowElementAccess &at);

// The operands and results of a norm and of its backward, by role, for both
// targets' norm kernels: layer_norm(x, weight, bias) -> (y, mean, rstd)
// centers the row and adds a bias; rms_norm(x, weight) -> (y, rstd) does
// neither (bias, mean null). layer_norm_grad(x, weight, mean, rstd, grad)
// -> (dx, dweight, dbias); rms_norm_grad(x, weight, rstd, grad) -> (dx,
// dweight).
struct NormValues {
  mlir::Value x, weight, bias, mean, rstd, grad, y, dx, dweight, dbias;
  bool centered = false;
};
NormValues normValues(mlir::Operation *op);

} // namespace kiln

#endif // KILN_CODEGEN_ROWGROUP_H
