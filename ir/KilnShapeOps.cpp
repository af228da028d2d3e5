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

//===----------------------------------------------------------------------===//
// SliceOp, PadOp, ConcatOp
//===----------------------------------------------------------------------===//

/// `type` with dimension `dim` resized to `size`.
static RankedTensorType withDimSize(RankedTensorType type, int64_t dim,
                                    int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

/// Checks that `input` and `result` have the same element type and rank and
/// agree on every dimension but `dim`, which must be a dimension of both.
static LogicalResult verifyAlongDim(Operation *op, RankedTensorType input,
                                    RankedTensorType result, int64_t dim) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError() << "element types differ: " << input << " -> "
                             << result;
  if (input.getRank() != result.getRank())
    return op->emitOpError() << "ranks differ: " << input << " -> " << result;
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for "
                             << input;
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (d != dim && input.getDimSize(d) != result.getDimSize(d))
      return op->emitOpError()
             << "dim " << d << " differs (" << input.getDimSize(d) << " vs "
             << result.getDimSize(d) << ") but only dim " << dim
             << " may change";
  return success();
}

void SliceOp::build(OpBuilder &b, OperationState &state, Value input,
                    int64_t dim, int64_t start, int64_t end) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  build(b, state, withDimSize(type, dim, end - start), input, dim, start);
}

LogicalResult SliceOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  int64_t dim = getDim();
  if (failed(verifyAlongDim(*this, input, result, dim)))
    return failure();
  int64_t start = getStart(), size = result.getDimSize(dim);
  if (start < 0 || size < 1 || start + size > input.getDimSize(dim))
    return emitOpError() << "range [" << start << ", " << start + size
                         << ") of dim " << dim << " is not a non-empty part "
                         << "of [0, " << input.getDimSize(dim) << ")";
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // slice(concat(a, b, ...)) taking exactly one input -> that input
  if (auto concat = getInput().getDefiningOp<ConcatOp>();
      concat && concat.getDim() == getDim()) {
    int64_t offset = 0;
    for (Value in : concat.getInputs()) {
      if (offset == getStart() && in.getType() == getType())
        return in;
      offset += llvm::cast<RankedTensorType>(in.getType()).getDimSize(getDim());
    }
  }
  return foldSplat(adaptor.getInput(), getType());
}

void PadOp::build(OpBuilder &b, OperationState &state, Value input,
                  int64_t dim, int64_t before, int64_t after) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  build(b, state, withDimSize(type, dim, before + type.getDimSize(dim) + after),
        input, dim, before);
}

LogicalResult PadOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  int64_t dim = getDim();
  if (failed(verifyAlongDim(*this, input, result, dim)))
    return failure();
  int64_t before = getBefore();
  if (before < 0 || before + input.getDimSize(dim) > result.getDimSize(dim))
    return emitOpError() << "input of size " << input.getDimSize(dim)
                         << " at offset " << before << " does not fit in dim "
                         << dim << " of " << result;
  return success();
}

OpFoldResult PadOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // pad of zeros -> zeros
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  if (dense && dense.isSplat() && llvm::isa<FloatType>(dense.getElementType()) &&
      dense.getSplatValue<APFloat>().isPosZero())
    return foldSplat(dense, getType());
  return {};
}

void ConcatOp::build(OpBuilder &b, OperationState &state, ValueRange inputs,
                     int64_t dim) {
  assert(!inputs.empty() && "concat of no tensors");
  auto type = llvm::cast<RankedTensorType>(inputs.front().getType());
  int64_t size = 0;
  for (Value in : inputs)
    size += llvm::cast<RankedTensorType>(in.getType()).getDimSize(dim);
  build(b, state, withDimSize(type, dim, size), inputs, dim);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType result = getType();
  int64_t dim = getDim(), size = 0;
  for (Value in : getInputs()) {
    auto type = llvm::cast<RankedTensorType>(in.getType());
    if (failed(verifyAlongDim(*this, type, result, dim)))
      return failure();
    size += type.getDimSize(dim);
  }
  if (size != result.getDimSize(dim))
    return emitOpError() << "inputs have " << size << " entries along dim "
                         << dim << " but the result has "
                         << result.getDimSize(dim);
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

/// pad(a, dim, s) + pad(b, dim, s + |a|) (in either order, same result
/// type) -> pad(concat(a, b), dim, s): the sum of the gradients of
/// consecutive slices, which is how split's gradient arrives, becomes one
/// copy instead of full-size zeros added together. Concats on the same dim
/// are flattened, and a pad that fills the whole dim folds away, so the
/// gradient of `q, k, v = split(x, ...)` is concat(dq, dk, dv).
LogicalResult AddOp::canonicalize(AddOp op, PatternRewriter &rewriter) {
  auto lhs = op.getLhs().getDefiningOp<PadOp>();
  auto rhs = op.getRhs().getDefiningOp<PadOp>();
  if (!lhs || !rhs || lhs.getDim() != rhs.getDim() ||
      lhs.getType() != rhs.getType())
    return failure();
  int64_t dim = lhs.getDim();
  auto end = [&](PadOp pad) {
    return pad.getBefore() + pad.getInput().getType().getDimSize(dim);
  };
  PadOp first = lhs, second = rhs;
  if (end(rhs) == lhs.getBefore())
    std::swap(first, second);
  else if (end(lhs) != rhs.getBefore())
    return failure();
  SmallVector<Value> inputs;
  for (PadOp pad : {first, second}) {
    auto concat = pad.getInput().getDefiningOp<ConcatOp>();
    if (concat && concat.getDim() == dim)
      llvm::append_range(inputs, concat.getInputs());
    else
      inputs.push_back(pad.getInput());
  }
  Value joined = rewriter.create<ConcatOp>(op.getLoc(), inputs, dim);
  int64_t after = op.getType().getDimSize(dim) - end(second);
  Value padded = rewriter.create<PadOp>(op.getLoc(), joined, dim,
                                        first.getBefore(), after);
  rewriter.replaceOp(op, padded);
  return success();
}
