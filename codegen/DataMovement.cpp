//===- DataMovement.cpp - Kernels that only move elements -----------------===//

#include "codegen/DataMovement.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Output element `index` of a tensor seen as [outer, size, inner] around
// `dim`: its three coordinates as C expressions.
struct AroundDim {
  std::string outer, along, inner;
  int64_t innerCount = 1;
};

AroundDim splitAround(ArrayRef<int64_t> shape, int64_t dim,
                      StringRef index) {
  AroundDim a;
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d)
    a.innerCount *= shape[d];
  int64_t size = shape[dim];
  a.outer = coordinate(index, size * a.innerCount, numElements(shape), true);
  a.along = coordinate(index, a.innerCount, size, dim == 0);
  a.inner = a.innerCount == 1
                ? "0"
                : "(" + index.str() + " % " + str(a.innerCount) + ")";
  if (dim == 0)
    a.outer = "0";
  return a;
}

// The flat index of coordinate (outer, `along`, inner) in a tensor whose
// `dim` has `size` entries.
std::string flatIndex(const AroundDim &a, StringRef along, int64_t size) {
  std::string sum;
  addTerm(sum, a.outer, size * a.innerCount);
  addTerm(sum, along.str(), a.innerCount);
  addTerm(sum, a.inner, 1);
  return sum.empty() ? "0" : sum;
}

std::string transposeElement(k::TransposeOp op, KernelSourceWriter &w,
                             StringRef index) {
  ArrayRef<int64_t> shape = shapeOf(op.getResult());
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> outStrides = rowMajorStrides(shape);
  SmallVector<int64_t> inStrides = rowMajorStrides(shapeOf(op.getInput()));
  std::string source;
  for (size_t d = 0; d < shape.size(); ++d)
    addTerm(source, coordinate(index, outStrides[d], shape[d], d == 0),
            inStrides[perm[d]]);
  w.line("// permutation " + shapeString(perm) + ": " +
         shapeString(shapeOf(op.getInput())) + " -> " + shapeString(shape));
  return w.ptr(op.getInput()) + "[" + (source.empty() ? "0" : source) + "]";
}

std::string sliceElement(k::SliceOp op, KernelSourceWriter &w,
                         StringRef index) {
  int64_t dim = op.getDim(), start = op.getStart();
  ArrayRef<int64_t> inShape = shapeOf(op.getInput());
  AroundDim a = splitAround(shapeOf(op.getResult()), dim, index);
  std::string along = start ? "(" + a.along + " + " + str(start) + ")" : a.along;
  w.line("// slice [" + str(start) + ", " +
         str(start + shapeOf(op.getResult())[dim]) + ") of dim " + str(dim) +
         " of " + shapeString(inShape));
  return w.ptr(op.getInput()) + "[" + flatIndex(a, along, inShape[dim]) + "]";
}

std::string padElement(k::PadOp op, KernelSourceWriter &w, StringRef index) {
  int64_t dim = op.getDim(), before = op.getBefore();
  ArrayRef<int64_t> inShape = shapeOf(op.getInput());
  AroundDim a = splitAround(shapeOf(op.getResult()), dim, index);
  std::string along = "(" + a.along + " - " + str(before) + ")";
  w.line("// pad dim " + str(dim) + " of " + shapeString(inShape) + " to " +
         shapeString(shapeOf(op.getResult())) + " at offset " + str(before));
  return "((" + along + " >= 0 && " + along + " < " + str(inShape[dim]) +
         ") ? " + w.ptr(op.getInput()) + "[" +
         flatIndex(a, along, inShape[dim]) + "] : (" + w.cType(op.getResult()) +
         ")0)";
}

std::string concatElement(k::ConcatOp op, KernelSourceWriter &w,
                          StringRef index) {
  int64_t dim = op.getDim();
  AroundDim a = splitAround(shapeOf(op.getResult()), dim, index);
  std::string sizes, element;
  int64_t offset = 0;
  for (auto [i, in] : llvm::enumerate(op.getInputs())) {
    int64_t size = shapeOf(in)[dim];
    sizes += (i ? ", " : "") + str(size);
    std::string along =
        offset ? "(" + a.along + " - " + str(offset) + ")" : a.along;
    std::string read = w.ptr(in) + "[" + flatIndex(a, along, size) + "]";
    offset += size;
    if (i + 1 == op.getInputs().size())
      element += read;
    else
      element += "(" + a.along + " < " + str(offset) + ") ? " + read + " : ";
  }
  w.line("// concat along dim " + str(dim) + " of sizes [" + sizes + "]");
  return "(" + element + ")";
}

} // namespace

bool isDataMovement(Operation *op) {
  return isa<k::TransposeOp, k::SliceOp, k::PadOp, k::ConcatOp>(op);
}

std::string movedElement(Operation *op, KernelSourceWriter &w,
                         StringRef index) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([&](k::TransposeOp t) { return transposeElement(t, w, index); })
      .Case([&](k::SliceOp s) { return sliceElement(s, w, index); })
      .Case([&](k::PadOp p) { return padElement(p, w, index); })
      .Case([&](k::ConcatOp c) { return concatElement(c, w, index); })
      .Default([](Operation *) { return std::string(); });
}

} // namespace kiln
