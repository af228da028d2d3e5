//===- KernelSourceWriter.h - Building the text of one C++ kernel ---------===//
//
// Internal to codegen/: the bookkeeping every kernel emitter (CPU and CUDA)
// shares — buffer pointer declarations (inputs then outputs, with their tensor
// types in comments), indentation, OpenMP pragmas for large CPU loops,
// static-shape index arithmetic, file-scope declarations (CUDA scratch), the
// entry signature of the target, and the final entry name
// `k_<ops>_<hash of the source>`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELSOURCEWRITER_H
#define KILN_CODEGEN_KERNELSOURCEWRITER_H

#include "codegen/CpuKernelEmitter.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <functional>
#include <string>

namespace kiln {

// Loops with at least this many scalar operations get `#pragma omp parallel for`.
constexpr int64_t kParallelWork = 1 << 15;

// Static shape helpers over ranked tensor values.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);
int64_t numElements(llvm::ArrayRef<int64_t> shape);
llvm::SmallVector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape);
// "[4, 8]" (or "[]" for a scalar).
std::string shapeString(llvm::ArrayRef<int64_t> shape);
// The index arithmetic of a reduction over `dims` of `input`: the kept and
// reduced dims (in order), their element counts, and the input offsets of
// output element `outIndex` (base) and of reduced element `redIndex` within
// it (offset), as C expressions; input index = base + offset.
struct ReductionLayout {
  llvm::ArrayRef<int64_t> shape, dims;
  llvm::SmallVector<int64_t> kept, reduced;
  int64_t outputs = 1, reducedCount = 1;
  std::string base, offset;
};
ReductionLayout reductionLayout(mlir::Value input, llvm::ArrayRef<int64_t> dims,
                                llvm::StringRef outIndex,
                                llvm::StringRef redIndex);

// The classes a cross_entropy / cross_entropy_grad over `classes` logits
// takes part in: all of them, or valid_classes when pad-dims padded the
// class dimension (the rest are masked: probability 0, gradient 0).
int64_t validClasses(mlir::Operation *op, int64_t classes);
// The C type of an element type ("float", "int32_t", "int64_t"), or "" when
// the CPU backend does not support it.
std::string cElementType(mlir::Type elementType);

// bf16 in kernels. A bf16 buffer holds raw bits (uint16_t); a kernel computes
// on its elements in float: every load widens (exact) and every store rounds
// to nearest even (NaN stays NaN), both through the prelude's
// kiln_bf16_to_f32 / kiln_f32_to_bf16, on CPU and CUDA alike. A value of bf16
// type held in a register is a float that is exactly a bf16 number.
//
// The expression reading `element` ("in0[i]") of a buffer of `elementType`,
// widened to float when the buffer is bf16.
std::string loadElement(mlir::Type elementType, llvm::StringRef element);
// The same for an element of tensor `v`'s type ("x[c]" of a logits row).
std::string loadElement(mlir::Value v, llvm::StringRef element);
// The statement `element = value;` storing a float (or integer) `value` into
// a buffer of `elementType`, rounded to bf16 when the buffer is bf16.
std::string storeElement(mlir::Type elementType, llvm::StringRef element,
                         llvm::StringRef value);
// The C type a kernel computes a value of `elementType` in: float for bf16
// (and f32), the storage type otherwise.
std::string computeType(mlir::Type elementType);
// `value` (a float expression) rounded to the nearest bf16, as a float.
std::string roundToBf16(llvm::StringRef value);

// `(index / stride) % size` with the trivial parts left out; `outermost`
// means the index never reaches size * stride, so no modulo is needed.
std::string coordinate(llvm::StringRef index, int64_t stride, int64_t size,
                       bool outermost);
// Appends `term * factor` to a sum expression (skipping zero terms).
void addTerm(std::string &sum, const std::string &term, int64_t factor);

// Which ABI a kernel is written for: the CPU's `extern "C" void entry(void*
// const* buffers)` or CUDA's `extern "C" __global__ void entry(void* const*
// __restrict__ buffers)` (a device array of device pointers).
enum class KernelTarget { Cpu, Cuda };

// Stands for the entry name in kernel text until `nameKernel` hashes it
// (every occurrence: file-scope names derived from it stay unique).
constexpr llvm::StringLiteral kEntryPlaceholder = "KILN_KERNEL_ENTRY";

// Names a finished kernel `k_<prefix>_<hash of text>` and substitutes the name
// for kEntryPlaceholder in `text`, so identical kernels get identical names.
CpuKernel nameKernel(std::string text, llvm::StringRef prefix,
                     std::string ops);

class KernelSourceWriter {
public:
  explicit KernelSourceWriter(const KernelGroup &group,
                              KernelTarget target = KernelTarget::Cpu)
      : group(group), target(target) {}

  // Declares `in<i>` / `out<i>` pointers for every input and output. Emits an
  // error on the group's first op for unsupported element types.
  mlir::LogicalResult declareBuffers();

  // A scratch buffer after the outputs (declare it after declareBuffers):
  // declares `cType* name = (cType*)buffers[slot];` and records it for the
  // kernel (CpuKernel::scratch). Returns `name`.
  std::string scratch(const std::string &name, const std::string &cType,
                      const KernelScratch &buffer);

  // The pointer variable of an input or output value ("in0", "out1").
  std::string ptr(mlir::Value v) const;
  // The C element type of a value.
  std::string cType(mlir::Value v) const;
  // Element `index` of input or output `v`, as a value to compute with
  // (widened to float when `v` is bf16).
  std::string load(mlir::Value v, llvm::StringRef index) const;
  // The statement storing `value` into element `index` of output `v`
  // (rounded when `v` is bf16).
  std::string store(mlir::Value v, llvm::StringRef index,
                    llvm::StringRef value) const;

  // Appends one line at the current indentation.
  void line(const llvm::Twine &text);
  // `text {` (a bare `{` for empty text) and one more level of indentation / `}` and one less.
  void open(const llvm::Twine &text);
  void close();
  // `}` followed by `suffix` (e.g. "();" to call a lambda just written).
  void close(const llvm::Twine &suffix);
  // The OpenMP pragma for a loop doing `work` scalar operations (none if
  // small, none on CUDA).
  void parallelFor(int64_t work);
  // Appends one line at file scope, before the entry point (CUDA's
  // `__device__` scratch arrays); kEntryPlaceholder in it becomes the entry.
  void global(const llvm::Twine &text);

  // Row fusion. A row emitter calls beginRow right after opening its row
  // loop and endRow right before closing it (before any `continue`), with the
  // loop variable and the row's length in elements; a fused kernel's hooks
  // write its pointwise prologue / epilogue for that row there.
  using RowHook = std::function<void(llvm::StringRef row, int64_t length)>;
  void setRowHooks(RowHook prologue, RowHook epilogue) {
    rowPrologue = std::move(prologue);
    rowEpilogue = std::move(epilogue);
  }
  void beginRow(llvm::StringRef row, int64_t length) {
    if (rowPrologue)
      rowPrologue(row, length);
  }
  void endRow(llvm::StringRef row, int64_t length) {
    if (rowEpilogue)
      rowEpilogue(row, length);
  }
  // A row op whose epilogue runs element by element
  // (RowOpInterface::hasElementEpilogue) calls rowElement in its loop over a
  // row instead of storing result 0: `value` (a float C expression) is
  // result 0 at flat index `index`. Without a hook it is stored; a fused
  // kernel's hook stores it if the kernel writes result 0 and applies the
  // epilogue to it there (emitRowElement).
  using RowElementHook = std::function<void(mlir::Value result, llvm::StringRef index,
                                            llvm::StringRef value)>;
  void setRowElementHook(RowElementHook hook) { rowElementHook = std::move(hook); }
  void rowElement(mlir::Value result, llvm::StringRef index, llvm::StringRef value) {
    if (rowElementHook)
      rowElementHook(result, index, value);
    else
      line(store(result, index, value));
  }

  // The finished kernel: header comment, entry point and body, named after
  // `ops` and the hash of the text. `blockThreads`, on CUDA: the block size
  // the kernel is launched with; over 256 it is declared as the kernel's
  // __launch_bounds__, so that ptxas keeps the registers within what a block
  // of that size may use (a 1024-thread block over 64 registers a thread
  // would fail every launch). Up to 256 threads, even 255 registers fit, and
  // the bound would only make ptxas trade registers for occupancy.
  CpuKernel finish(uint32_t blockThreads = 0) const;

private:
  const KernelGroup &group;
  KernelTarget target;
  llvm::DenseMap<mlir::Value, std::string> pointers;
  std::string globals;
  std::string declarations;
  std::vector<KernelScratch> scratchBuffers;
  std::string body;
  int indent = 1;
  RowHook rowPrologue, rowEpilogue;
  RowElementHook rowElementHook;
};

} // namespace kiln

#endif // KILN_CODEGEN_KERNELSOURCEWRITER_H
