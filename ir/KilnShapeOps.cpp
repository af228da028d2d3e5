//===- KilnShapeOps.cpp - broadcast, reduce_sum, reshape, transpose -------===//
//
// Builders, verifiers and folders of the ops that only move or sum data
// along dimensions. Folders remove the no-op forms the frontend and the
// autodiff pass emit freely (identity broadcasts/transposes, same-type
// reshapes, chains of reshapes/transposes, shape ops on constants).
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

using namespace mlir;
using namespace mlir::kiln;

/// True if `values` is 0, 1, ..., n-1.
static bool isIdentity(ArrayRef<int64_t> values) {
  for (auto [i, v] : llvm::enumerate(values))
    if (v != static_cast<int64_t>(i))
      return false;
  return true;
}

/// Splat constants keep their value under any shape op; fold them to a
/// splat of the result type.
static Attribute foldSplat(Attribute input, Type resultType) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(input);
  if (!dense || !dense.isSplat())
    return {};
  return DenseElementsAttr::get(llvm::cast<ShapedType>(resultType),
                                dense.getSplatValue<Attribute>());
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  ArrayRef<int64_t> dims = getDims();
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "element types differ: " << input << " -> "
                         << result;
  if (static_cast<int64_t>(dims.size()) != input.getRank())
    return emitOpError() << "dims has " << dims.size()
                         << " entries, expected the input rank "
                         << input.getRank();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= result.getRank())
      return emitOpError() << "dims[" << i << "] = " << d
                           << " is out of range for result " << result;
    if (i > 0 && d <= dims[i - 1])
      return emitOpError() << "dims must be strictly increasing, got ["
                           << dims << "]";
    int64_t in = input.getDimSize(i), out = result.getDimSize(d);
    if (in != 1 && in != out)
      return emitOpError() << "input dim " << i << " has size " << in
                           << ", expected 1 or " << out
                           << " (result dim " << d << ")";
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  // broadcast(x) with the same type and identity dims -> x
  if (getInput().getType() == getType() && isIdentity(getDims()))
    return getInput();
  // broadcast(splat c) -> splat c
  return foldSplat(adaptor.getInput(), getType());
}

//===----------------------------------------------------------------------===//
// ReduceSumOp
//===----------------------------------------------------------------------===//

RankedTensorType mlir::kiln::inferReduceSumType(RankedTensorType input,
                                                ArrayRef<int64_t> dims) {
  SmallVector<int64_t> shape;
  for (auto [i, size] : llvm::enumerate(input.getShape()))
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      shape.push_back(size);
  return RankedTensorType::get(shape, input.getElementType());
}

void ReduceSumOp::build(OpBuilder &b, OperationState &state, Value input,
                        ArrayRef<int64_t> dims) {
  build(b, state,
        inferReduceSumType(llvm::cast<RankedTensorType>(input.getType()),
                           dims),
        input, dims);
}

LogicalResult ReduceSumOp::verify() {
  RankedTensorType input = getInput().getType();
  ArrayRef<int64_t> dims = getDims();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= input.getRank())
      return emitOpError() << "dims[" << i << "] = " << d
                           << " is out of range for input " << input;
    if (i > 0 && d <= dims[i - 1])
      return emitOpError() << "dims must be sorted and unique, got [" << dims
                           << "]";
  }
  RankedTensorType expected = inferReduceSumType(input, dims);
  if (getType() != expected)
    return emitOpError() << "result type " << getType() << " should be "
                         << expected;
  return success();
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor) {
  // reduce_sum(x) over no dims -> x
  if (getDims().empty() && getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "element types differ: " << input << " -> "
                         << result;
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "element counts differ: " << input << " has "
                         << input.getNumElements() << ", " << result
                         << " has " << result.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  // reshape(x : T) -> T  ==>  x
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  // reshape(constant) -> constant: row-major order is unchanged.
  if (auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(
          adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

RankedTensorType mlir::kiln::inferTransposeType(RankedTensorType input,
                                                ArrayRef<int64_t> perm) {
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return {};
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return {};
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  return RankedTensorType::get(shape, input.getElementType());
}

void TransposeOp::build(OpBuilder &b, OperationState &state, Value input,
                        ArrayRef<int64_t> permutation) {
  RankedTensorType type = inferTransposeType(
      llvm::cast<RankedTensorType>(input.getType()), permutation);
  assert(type && "invalid transpose permutation");
  build(b, state, type, input, permutation);
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType expected = inferTransposeType(input, getPermutation());
  if (!expected)
    return emitOpError() << "permutation [" << getPermutation()
                         << "] is not a permutation of the " << input.getRank()
                         << " dims of " << input;
  if (getType() != expected)
    return emitOpError() << "result type " << getType() << " should be "
                         << expected;
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  // transpose(x) with the identity permutation -> x
  if (isIdentity(getPermutation()))
    return getInput();
  // transpose(transpose(x, p), q) -> transpose(x, p∘q): result[i] =
  // mid[q[i]] = x[p[q[i]]].
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> p = producer.getPermutation(), q = getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t qi : q)
      composed.push_back(p[qi]);
    getInputMutable().assign(producer.getInput());
    setPermutation(composed);
    if (isIdentity(composed))
      return getInput();
    return getResult();
  }
  return foldSplat(adaptor.getInput(), getType());
}
