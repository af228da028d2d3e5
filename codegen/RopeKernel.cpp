//===- RopeKernel.cpp - kiln.rope's kernel on both targets ----------------===//

#include "codegen/RopeKernel.h"

#include "codegen/CpuKernelEmitter.h"
#include "codegen/CudaBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/Sequence.h"

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// `{f0, f1, ...}`: the frequency table as float literals.
std::string frequencyTable(mlir::kiln::RopeOp rope) {
  std::string list;
  for (float f : rope.getInvFreq())
    list += (list.empty() ? "" : ", ") + ScalarExprEmitter::floatLiteral(f);
  return "{" + list + "}";
}

// The offset, in a tensor whose strides are `strides`, of the element at
// rotated-space coordinates c0, c1, ... (all but the last dim; the caller
// adds the feature index f): dim k of the rotated space is dim `dimOf[k]`
// of that tensor.
std::string rowOffset(llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> dimOf) {
  std::string sum;
  for (size_t k = 0; k + 1 < dimOf.size(); ++k)
    sum += "c" + str(k) + " * " + str(strides[dimOf[k]]) + " + ";
  return sum + "f";
}

// The statements for pair `p` (a loop variable over the rotated space's
// n / 2 pairs) of `rope`, reading the table `freq`: pair p is element
// i = (p / (D/2)) * D + p % (D/2) and its partner i + D/2, rotated by one
// angle (one cosf and one sinf for both). `index` is the C type of the
// index arithmetic ("int" where every offset fits, else "int64_t").
void writePair(mlir::kiln::RopeOp rope, KernelSourceWriter &w, llvm::StringRef freq,
               llvm::StringRef index) {
  llvm::SmallVector<int64_t> shape = rope.getRotatedShape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = shape.back(), t = shape[rank - 2], half = d / 2;
  mlir::Value x = rope.getInput(), y = rope.getResult();
  const std::string ix = index.str();
  w.line("const " + ix + " f = p % " + str(half) + ";");
  w.line("const " + ix + " i = p / " + str(half) + " * " + str(d) + " + f;");
  std::string in = "i", out = "i", position = "(i / " + str(d) + ") % " + str(t);
  std::optional<llvm::ArrayRef<int64_t>> inPerm = rope.getInputPermutation(),
                                         outPerm = rope.getResultPermutation();
  if (inPerm || outPerm) {
    // Coordinates in the rotated space; the input and the result are read
    // and written where the permutations put them.
    llvm::SmallVector<int64_t> rotated = rowMajorStrides(shape);
    for (int64_t k = 0; k + 1 < rank; ++k)
      w.line("const " + ix + " c" + str(k) + " = (i / " + str(rotated[k]) + ") % " +
             str(shape[k]) + ";");
    llvm::SmallVector<int64_t> identity = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    // Rotated dim k is input dim inPerm[k]; result dim j is rotated dim
    // outPerm[j], so rotated dim k is result dim j where outPerm[j] = k.
    llvm::SmallVector<int64_t> resultDimOf(rank);
    for (int64_t j = 0; j < rank; ++j)
      resultDimOf[outPerm ? (*outPerm)[j] : j] = j;
    w.line("const " + ix + " in = " +
           rowOffset(rowMajorStrides(shapeOf(x)), inPerm ? *inPerm : llvm::ArrayRef(identity)) +
           ";");
    w.line("const " + ix + " out = " + rowOffset(rowMajorStrides(shapeOf(y)), resultDimOf) +
           ";");
    in = "in";
    out = "out";
    position = "c" + str(rank - 2);
  }
  std::string partner = " + " + str(half);
  w.line("const float a = (float)(" + position + ") * " + freq.str() + "[f];");
  w.line("const float c = cosf(a), s = " + std::string(rope.getInverse() ? "-" : "") +
         "sinf(a);");
  w.line("const float x0 = " + w.load(x, in) + ", x1 = " + w.load(x, in + partner) + ";");
  w.line(w.store(y, out, "x0 * c - x1 * s"));
  w.line(w.store(y, out + partner, "x1 * c + x0 * s"));
}

std::string describe(mlir::kiln::RopeOp rope) {
  std::string text = std::string("// rope") + (rope.getInverse() ? " (inverse)" : "") +
                     " over " + shapeString(rope.getRotatedShape()) + ", pairs (i, i + D/2)";
  if (std::optional<llvm::ArrayRef<int64_t>> perm = rope.getInputPermutation())
    text += ", input read transposed by " + shapeString(*perm);
  if (std::optional<llvm::ArrayRef<int64_t>> perm = rope.getResultPermutation())
    text += ", result written transposed by " + shapeString(*perm);
  return text;
}

} // namespace

mlir::LogicalResult emitRopeCpu(mlir::Operation *op, KernelSourceWriter &w) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t pairs = numElements(rope.getRotatedShape()) / 2;
  w.line(describe(rope));
  w.line("static const float freq[" + str(rope.getInvFreq().size()) + "] = " +
         frequencyTable(rope) + ";");
  w.parallelFor(2 * pairs);
  w.open("for (int64_t p = 0; p < " + str(pairs) + "; ++p)");
  writePair(rope, w, "freq", "int64_t");
  w.close();
  return mlir::success();
}

mlir::LogicalResult emitRopeCuda(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t pairs = numElements(rope.getRotatedShape()) / 2;
  std::string freq = std::string(kEntryPlaceholder) + "_freq";
  // In global memory, not __constant__: the lanes of a warp read different
  // entries (consecutive pairs), which the constant cache would serialize.
  w.global("__device__ const float " + freq + "[" + str(rope.getInvFreq().size()) + "] = " +
           frequencyTable(rope) + ";");
  launch = {cudaGridFor(pairs, kCudaBlock), kCudaBlock, 0};
  w.line(describe(rope));
  // 32-bit offsets where every buffer allows (openGridStrideLoop's bound).
  const bool index32 = 2 * pairs < (int64_t(1) << 30) && indexFitsInt32(KernelGroup::forOp(op));
  openGridStrideLoop(w, pairs, "p", index32);
  writePair(rope, w, freq, index32 ? "int" : "int64_t");
  w.close();
  return mlir::success();
}

} // namespace kiln
