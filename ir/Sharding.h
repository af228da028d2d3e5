//===- Sharding.h - Tensor shardings and the ops' sharding rules -*- C++ -*-===//
//
// A tensor's sharding names, for each dimension, the mesh axis whose ranks
// split it into equal contiguous blocks ("" : every rank holds the whole
// dimension). It is written as `kiln.sharding = ["", "model"]` on function
// arguments (parameters, inputs) and, one list per result, as
// `kiln.sharding = [["", "", "model"]]` on ops once propagation has run.
//
// An op's sharding rule (ShardingRuleOpInterface) names its dimensions as
// factors, as Shardy's OpShardingRule does: matmul [B, M, K] x [K, N] ->
// [B, M, N] has factors B, M, K, N; K is a reduction factor (split, each
// rank computes a partial sum), the others pass through (split, each rank
// computes its block of the result). A factor that needs the whole
// dimension (a softmax's row) is `Whole`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_SHARDING_H
#define KILN_IR_SHARDING_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <utility>

namespace mlir {
class ModuleOp;
}

namespace mlir::kiln {

// `kiln.sharding`: a tensor's sharding (argument attribute: one list of
// axis names; op attribute: one list per result).
constexpr llvm::StringLiteral kShardingAttrName = "kiln.sharding";
// On a parameter argument the partitioner split: the dimension mesh axis
// kiln.shard_axis splits (kiln.whole_shape is the whole tensor's shape).
// Without it, a kiln.shard_axis argument is a ZeRO slice of the flattened
// tensor.
constexpr llvm::StringLiteral kShardDimAttrName = "kiln.shard_dim";

/// Per dimension: the mesh axis splitting it, "" when whole.
using TensorSharding = SmallVector<std::string, 4>;

/// The ranks along each axis of the module's kiln.mesh.
struct Mesh {
  SmallVector<std::pair<std::string, int64_t>, 2> axes;
  /// Ranks along `axis`; 1 for an axis the mesh does not have.
  int64_t size(StringRef axis) const;
};
Mesh readMesh(ModuleOp module);

/// True when no dimension is split.
bool isReplicated(ArrayRef<std::string> sharding);
/// `[_, model]` (the model file's spelling), for messages and reports.
std::string formatSharding(ArrayRef<std::string> sharding);
/// `whole` with each split dimension divided by its axis's ranks.
RankedTensorType localType(RankedTensorType whole,
                           ArrayRef<std::string> sharding, const Mesh &mesh);

ArrayAttr shardingAttr(MLIRContext *ctx, ArrayRef<std::string> sharding);
/// The sharding an attribute spells; replicated (rank `rank`) when null.
TensorSharding readSharding(Attribute attr, int64_t rank);
/// The propagated sharding of `value` (an argument's or an op result's
/// kiln.sharding); replicated when it has none.
TensorSharding getSharding(Value value);

/// How splitting a factor over an axis changes the op's local computation.
enum class FactorKind {
  PassThrough, // each rank computes its block of the results
  Sum,         // each rank computes a partial sum of the results
  Mean,        // each rank computes the mean of its block (equal blocks)
  Whole,       // cannot be split: the op needs the whole dimension
  // Split, the op is no longer itself on its blocks: --kiln-partition
  // rewrites it (a vocabulary-parallel cross-entropy, an embedding whose
  // table's rows are split). Propagation does not move it.
  Rewritten,
};

/// An op's factors and, for each operand and result dimension, the factor
/// it iterates over (-1: none, e.g. a broadcast size-1 dimension or a
/// tensor the op reads whole).
struct ShardingRule {
  struct Factor {
    FactorKind kind;
    // For Whole factors: why, completing "the op needs ..." ("the whole
    // row it normalizes").
    std::string why;
  };
  SmallVector<Factor> factors;
  SmallVector<SmallVector<int64_t, 4>> operands, results;

  int64_t addFactor(FactorKind kind, std::string why = "") {
    factors.push_back({kind, std::move(why)});
    return factors.size() - 1;
  }
  /// An operand (result) every dimension of which maps to `dims`.
  void addOperand(ArrayRef<int64_t> dims) { operands.emplace_back(dims); }
  void addResult(ArrayRef<int64_t> dims) { results.emplace_back(dims); }
  /// The factor of dimension `dim` of operand `i`, or of result `i` - n
  /// where n is the operand count ("tensor index" below).
  int64_t factorOf(unsigned tensor, unsigned dim) const;
  unsigned numTensors() const { return operands.size() + results.size(); }
  ArrayRef<int64_t> dimsOf(unsigned tensor) const;
};

/// The rule of `op`: its ShardingRuleOpInterface's, or, for an op without
/// one, a rule whose every dimension is a Whole factor.
ShardingRule getShardingRule(Operation *op);

/// Attaches the sharding rules (ir/ShardingRules.cpp) to the kiln ops.
void registerShardingRules(MLIRContext *ctx);

} // namespace mlir::kiln

#endif // KILN_IR_SHARDING_H
