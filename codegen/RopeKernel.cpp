//===- RopeKernel.cpp - kiln.rope's kernel on both targets ----------------===//

#include "codegen/RopeKernel.h"

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

// The statements for element `i` (a loop variable over the rotated space)
// of `rope`, reading the table `freq`.
void writeElement(mlir::kiln::RopeOp rope, KernelSourceWriter &w, llvm::StringRef freq) {
  llvm::SmallVector<int64_t> shape = rope.getRotatedShape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = shape.back(), t = shape[rank - 2], half = d / 2;
  mlir::Value x = rope.getInput(), y = rope.getResult();
  w.line("const int64_t f = i % " + str(d) + ";");
  std::string in = "i", out = "i", position = "(i / " + str(d) + ") % " + str(t);
  std::optional<llvm::ArrayRef<int64_t>> inPerm = rope.getInputPermutation(),
                                         outPerm = rope.getResultPermutation();
  if (inPerm || outPerm) {
    // Coordinates in the rotated space; the input and the result are read
    // and written where the permutations put them.
    llvm::SmallVector<int64_t> rotated = rowMajorStrides(shape);
    for (int64_t k = 0; k + 1 < rank; ++k)
      w.line("const int64_t c" + str(k) + " = (i / " + str(rotated[k]) + ") % " +
             str(shape[k]) + ";");
    llvm::SmallVector<int64_t> identity = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    // Rotated dim k is input dim inPerm[k]; result dim j is rotated dim
    // outPerm[j], so rotated dim k is result dim j where outPerm[j] = k.
    llvm::SmallVector<int64_t> resultDimOf(rank);
    for (int64_t j = 0; j < rank; ++j)
      resultDimOf[outPerm ? (*outPerm)[j] : j] = j;
    w.line("const int64_t in = " +
           rowOffset(rowMajorStrides(shapeOf(x)), inPerm ? *inPerm : llvm::ArrayRef(identity)) +
           ";");
    w.line("const int64_t out = " + rowOffset(rowMajorStrides(shapeOf(y)), resultDimOf) + ";");
    in = "in";
    out = "out";
    position = "c" + str(rank - 2);
  }
  w.line("const bool low = f < " + str(half) + ";");
  w.line("const float a = (float)(" + position + ") * " + freq.str() + "[low ? f : f - " +
         str(half) + "];");
  w.line("const float c = cosf(a), s = " + std::string(rope.getInverse() ? "-" : "") +
         "sinf(a);");
  w.line("const float xi = " + w.load(x, in) + ";");
  w.line("const float xp = low ? " + w.load(x, in + " + " + str(half)) + " : " +
         w.load(x, in + " - " + str(half)) + ";");
  w.line(w.store(y, out, "low ? xi * c - xp * s : xi * c + xp * s"));
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
  int64_t n = numElements(rope.getRotatedShape());
  w.line(describe(rope));
  w.line("static const float freq[" + str(rope.getInvFreq().size()) + "] = " +
         frequencyTable(rope) + ";");
  w.parallelFor(n);
  w.open("for (int64_t i = 0; i < " + str(n) + "; ++i)");
  writeElement(rope, w, "freq");
  w.close();
  return mlir::success();
}

mlir::LogicalResult emitRopeCuda(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t n = numElements(rope.getRotatedShape());
  std::string freq = std::string(kEntryPlaceholder) + "_freq";
  // In constant memory: every thread of a warp reads the same few entries.
  w.global("__constant__ float " + freq + "[" + str(rope.getInvFreq().size()) + "] = " +
           frequencyTable(rope) + ";");
  launch = {cudaGridFor(n, kCudaBlock), kCudaBlock, 0};
  w.line(describe(rope));
  openGridStrideLoop(w, n);
  writeElement(rope, w, freq);
  w.close();
  return mlir::success();
}

} // namespace kiln
