//===- KilnCollectiveOps.cpp - all_reduce, reduce_scatter, all_gather -----===//
//
// Verifiers, result types and VJPs of the collectives. The VJPs depend on
// what the axis carries:
//
// The data axis: each rank has its own loss (its part of the batch), and a
// cotangent on a rank is that rank's part of the gradient; the adjoints
// are the collectives JAX transposes psum and all_gather to:
//   all_reduce sum  <-> all_reduce sum      (mean <-> mean)
//   reduce_scatter  <-> all_gather          (sum; mean scales by 1 / size)
//
// A tensor axis (any other: model, ...): the ranks compute one loss
// together, every rank holding it whole, and the cotangent of a value
// every rank holds whole is the whole gradient on every rank (Megatron's
// conjugate f / g operators):
//   all_reduce sum (partial sums -> whole)  VJP: the identity
//   all_reduce mean                         VJP: scaled by 1 / size
//   all_gather (blocks -> whole)            VJP: local_shard (own block)
//   local_shard (whole -> own block)        VJP: all_gather
//   reduce_scatter (partial -> own block)   VJP: all_gather, as above
//   mesh_vary (whole, read per rank)        VJP: all_reduce sum
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::kiln;

FailureOr<int64_t> mlir::kiln::meshAxisSize(Operation *op, StringRef axis) {
  auto module = op->getParentOfType<ModuleOp>();
  DictionaryAttr mesh =
      module ? module->getAttrOfType<DictionaryAttr>(kMeshAttrName)
             : DictionaryAttr();
  auto size = mesh ? mesh.getAs<IntegerAttr>(axis) : IntegerAttr();
  if (!size || size.getInt() < 1) {
    InFlightDiagnostic d = op->emitOpError()
                           << "names mesh axis '" << axis << "', but ";
    if (!mesh || mesh.empty())
      d << "the module has no " << kMeshAttrName << " attribute";
    else
      d << "the module's " << kMeshAttrName << " is " << mesh;
    return failure();
  }
  return size.getInt();
}

bool mlir::kiln::isCollective(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp, MeshBroadcastOp,
             LocalShardOp>(op);
}

/// A tensor axis: one loss over its ranks (see the file comment).
static bool isTensorAxis(StringRef axis) { return axis != kDataAxisName; }

/// `g` scaled by 1 / (ranks along `axis`).
static FailureOr<Value> divideByAxisSize(Operation *op, OpBuilder &b, Value g,
                                         StringRef axis) {
  FailureOr<int64_t> size = meshAxisSize(op, axis);
  if (failed(size))
    return failure();
  auto type = cast<RankedTensorType>(g.getType());
  return b.create<MulOp>(op->getLoc(), g,
                         createSplatConstant(b, op->getLoc(), type, 1.0 / *size))
      .getResult();
}

/// Checks that `dim` is a dimension of `input` and that `result` is `input`
/// with that dimension divided (scatter) or multiplied (gather) by the size
/// of mesh axis `axis`.
static LogicalResult verifySplitDim(Operation *op, StringRef axis,
                                    RankedTensorType input,
                                    RankedTensorType result, int64_t dim,
                                    bool scatter) {
  FailureOr<int64_t> size = meshAxisSize(op, axis);
  if (failed(size))
    return failure();
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError() << "dim = " << dim << " is not a dimension of "
                             << input;
  if (scatter && input.getDimSize(dim) % *size != 0)
    return op->emitOpError() << "dimension " << dim << " of " << input
                             << " does not split into " << *size
                             << " equal slices (the mesh axis size)";
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] = scatter ? shape[dim] / *size : shape[dim] * *size;
  auto expected = RankedTensorType::get(shape, input.getElementType());
  if (result != expected)
    return op->emitOpError() << "result type " << result << ", expected "
                             << expected << " (" << input << " "
                             << (scatter ? "split" : "gathered") << " over "
                             << *size << " ranks along dim " << dim << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// AllReduceOp
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  for (Value v : operands)
    inferred.push_back(v.getType());
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one operand";
  return meshAxisSize(*this, getAxis());
}

FailureOr<SmallVector<Value>>
AllReduceOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  SmallVector<Value> grads(getNumOperands()), present;
  for (Value g : resultGrads)
    if (g)
      present.push_back(g);
  if (present.empty())
    return grads;
  if (isTensorAxis(getAxis())) {
    for (auto [i, g] : llvm::enumerate(resultGrads)) {
      if (!g || getReduction() == Reduction::Sum) {
        grads[i] = g;
        continue;
      }
      FailureOr<Value> scaled = divideByAxisSize(*this, b, g, getAxis());
      if (failed(scaled))
        return failure();
      grads[i] = *scaled;
    }
    return grads;
  }
  auto adjoint = b.create<AllReduceOp>(getLoc(), present, getReduction(),
                                       getAxis(), getReasonAttr());
  unsigned next = 0;
  for (auto [i, g] : llvm::enumerate(resultGrads))
    if (g)
      grads[i] = adjoint.getResult(next++);
  return grads;
}

//===----------------------------------------------------------------------===//
// ReduceScatterOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceScatterOp::verify() {
  return verifySplitDim(*this, getAxis(), getInput().getType(), getType(),
                        getDim(), /*scatter=*/true);
}

FailureOr<SmallVector<Value>>
ReduceScatterOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  if (!resultGrads[0])
    return SmallVector<Value>{Value()};
  Value g = b.create<AllGatherOp>(getLoc(), getInput().getType(),
                                  resultGrads[0], getAxis(), getDim(),
                                  getReasonAttr());
  if (getReduction() == Reduction::Mean) {
    FailureOr<Value> scaled = divideByAxisSize(*this, b, g, getAxis());
    if (failed(scaled))
      return failure();
    g = *scaled;
  }
  return SmallVector<Value>{g};
}

//===----------------------------------------------------------------------===//
// AllGatherOp
//===----------------------------------------------------------------------===//

LogicalResult AllGatherOp::verify() {
  return verifySplitDim(*this, getAxis(), getInput().getType(), getType(),
                        getDim(), /*scatter=*/false);
}

FailureOr<SmallVector<Value>>
AllGatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  if (!resultGrads[0])
    return SmallVector<Value>{Value()};
  if (isTensorAxis(getAxis()))
    return SmallVector<Value>{b.create<LocalShardOp>(
        getLoc(), getInput().getType(), resultGrads[0], getAxis(), getDim(),
        getReasonAttr())};
  return SmallVector<Value>{b.create<ReduceScatterOp>(
      getLoc(), getInput().getType(), resultGrads[0], Reduction::Sum, getAxis(),
      getDim(), getReasonAttr())};
}

//===----------------------------------------------------------------------===//
// MeshBroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult MeshBroadcastOp::verify() {
  FailureOr<int64_t> size = meshAxisSize(*this, getAxis());
  if (failed(size))
    return failure();
  if (getRoot() < 0 || getRoot() >= *size)
    return emitOpError() << "root = " << getRoot() << " is not a rank of "
                         << "mesh axis '" << getAxis() << "' (size " << *size
                         << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// LocalShardOp
//===----------------------------------------------------------------------===//

LogicalResult LocalShardOp::verify() {
  return verifySplitDim(*this, getAxis(), getInput().getType(), getType(),
                        getDim(), /*scatter=*/true);
}

FailureOr<SmallVector<Value>>
LocalShardOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  if (!isTensorAxis(getAxis()))
    return emitOpError() << "over the data axis is not differentiable (it "
                            "appears only in @update)";
  if (!resultGrads[0])
    return SmallVector<Value>{Value()};
  return SmallVector<Value>{b.create<AllGatherOp>(
      getLoc(), getInput().getType(), resultGrads[0], getAxis(), getDim(),
      getReasonAttr())};
}

//===----------------------------------------------------------------------===//
// MeshVaryOp
//===----------------------------------------------------------------------===//

LogicalResult MeshVaryOp::verify() {
  if (!isTensorAxis(getAxis()))
    return emitOpError() << "needs a tensor axis, not the data axis (whose "
                            "ranks never share one loss)";
  return meshAxisSize(*this, getAxis());
}

FailureOr<SmallVector<Value>>
MeshVaryOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads) {
  if (!resultGrads[0])
    return SmallVector<Value>{Value()};
  auto sum = b.create<AllReduceOp>(getLoc(), ValueRange{resultGrads[0]}, Reduction::Sum,
                                   getAxis(), getReasonAttr());
  return SmallVector<Value>{sum.getResult(0)};
}

//===----------------------------------------------------------------------===//
// ShardingConstraintOp
//===----------------------------------------------------------------------===//

LogicalResult ShardingConstraintOp::verify() {
  int64_t rank = getType().getRank();
  if ((int64_t)getSharding().size() != rank)
    return emitOpError() << "has " << getSharding().size()
                         << " sharding entries for a tensor of rank " << rank;
  for (Attribute axis : getSharding()) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (!name.empty() && failed(meshAxisSize(*this, name)))
      return failure();
  }
  return success();
}

FailureOr<SmallVector<Value>>
ShardingConstraintOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads) {
  return SmallVector<Value>{resultGrads[0]};
}

// local_shard(all_reduce sum(x)) -> reduce_scatter sum(x) over the same
// axis, and local_shard(transpose(all_reduce sum(x))) ->
// reduce_scatter sum(transpose(x)): each rank keeps only its slice of the
// sum, so reduce only it.
LogicalResult LocalShardOp::canonicalize(LocalShardOp op,
                                         PatternRewriter &rewriter) {
  Value input = op.getInput();
  auto transpose = input.getDefiningOp<TransposeOp>();
  if (transpose) {
    if (!transpose->hasOneUse())
      return failure();
    input = transpose.getInput();
  }
  auto sum = input.getDefiningOp<AllReduceOp>();
  if (!sum || sum.getReduction() != Reduction::Sum || sum.getAxis() != op.getAxis() ||
      sum.getInputs().size() != 1 || !sum->hasOneUse())
    return failure();
  Value partial = sum.getInputs()[0];
  if (transpose)
    partial = rewriter.create<TransposeOp>(transpose.getLoc(), partial,
                                           transpose.getPermutation());
  rewriter.replaceOpWithNewOp<ReduceScatterOp>(
      op, op.getType(), partial, Reduction::Sum, op.getAxis(), op.getDim(),
      op.getReasonAttr());
  return success();
}
