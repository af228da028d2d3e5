//===- Sharding.cpp - Tensor shardings: attributes, local types, rules ----===//

#include "ir/Sharding.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kiln {

int64_t Mesh::size(StringRef axis) const {
  for (const auto &[name, n] : axes)
    if (name == axis)
      return n;
  return 1;
}

Mesh readMesh(ModuleOp module) {
  Mesh mesh;
  if (auto dict = module->getAttrOfType<DictionaryAttr>(kMeshAttrName))
    for (NamedAttribute axis : dict)
      if (auto n = dyn_cast<IntegerAttr>(axis.getValue()))
        mesh.axes.emplace_back(axis.getName().str(), n.getInt());
  return mesh;
}

bool isReplicated(ArrayRef<std::string> sharding) {
  return llvm::all_of(sharding, [](const std::string &a) { return a.empty(); });
}

std::string formatSharding(ArrayRef<std::string> sharding) {
  std::string s = "[";
  for (auto [i, axis] : llvm::enumerate(sharding))
    s += (i ? ", " : "") + (axis.empty() ? std::string("_") : axis);
  return s + "]";
}

RankedTensorType localType(RankedTensorType whole,
                           ArrayRef<std::string> sharding, const Mesh &mesh) {
  SmallVector<int64_t> shape(whole.getShape());
  for (auto [d, axis] : llvm::enumerate(sharding))
    if (!axis.empty())
      shape[d] /= mesh.size(axis);
  return RankedTensorType::get(shape, whole.getElementType());
}

ArrayAttr shardingAttr(MLIRContext *ctx, ArrayRef<std::string> sharding) {
  SmallVector<Attribute> dims;
  for (const std::string &axis : sharding)
    dims.push_back(StringAttr::get(ctx, axis));
  return ArrayAttr::get(ctx, dims);
}

TensorSharding readSharding(Attribute attr, int64_t rank) {
  TensorSharding sharding(rank, "");
  auto list = dyn_cast_or_null<ArrayAttr>(attr);
  if (!list || (int64_t)list.size() != rank)
    return sharding;
  for (auto [d, axis] : llvm::enumerate(list))
    if (auto s = dyn_cast<StringAttr>(axis))
      sharding[d] = s.str();
  return sharding;
}

TensorSharding getSharding(Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func)
      return TensorSharding(rank, "");
    return readSharding(func.getArgAttr(arg.getArgNumber(), kShardingAttrName),
                        rank);
  }
  auto result = cast<OpResult>(value);
  auto perResult =
      result.getOwner()->getAttrOfType<ArrayAttr>(kShardingAttrName);
  if (!perResult || perResult.size() <= result.getResultNumber())
    return TensorSharding(rank, "");
  return readSharding(perResult[result.getResultNumber()], rank);
}

int64_t ShardingRule::factorOf(unsigned tensor, unsigned dim) const {
  ArrayRef<int64_t> dims = dimsOf(tensor);
  return dim < dims.size() ? dims[dim] : -1;
}

ArrayRef<int64_t> ShardingRule::dimsOf(unsigned tensor) const {
  return tensor < operands.size() ? ArrayRef<int64_t>(operands[tensor])
                                  : ArrayRef<int64_t>(
                                        results[tensor - operands.size()]);
}

ShardingRule getShardingRule(Operation *op) {
  if (auto withRule = dyn_cast<ShardingRuleOpInterface>(op))
    return withRule.getShardingRule();
  ShardingRule rule;
  std::string why = "whole tensors (" + op->getName().getStringRef().str() +
                    " has no sharding rule)";
  auto whole = [&](Value v) {
    SmallVector<int64_t, 4> dims;
    if (auto t = dyn_cast<RankedTensorType>(v.getType()))
      for (int64_t d = 0; d < t.getRank(); ++d)
        dims.push_back(rule.addFactor(FactorKind::Whole, why));
    return dims;
  };
  for (Value v : op->getOperands())
    rule.addOperand(whole(v));
  for (Value v : op->getResults())
    rule.addResult(whole(v));
  return rule;
}

} // namespace mlir::kiln
