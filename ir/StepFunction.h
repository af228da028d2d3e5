//===- StepFunction.h - Attribute names of the training-step function -----===//
//
// The frontend emits one `func.func` for the training step; autodiff, the
// optimizer pass and codegen extend and read it. Its arguments and results say
// what they are through these attributes (see the contract in the dialect docs):
//
//   kiln.role = #kiln.role<param | input | loss | grad | grad_norm | adam_m
//             | adam_v | momentum | lr | step | metric | update_norm
//             | param_norm | eval_loss | dropout_rng> (the Role enum)
//   kiln.name = the parameter or input name (for grads and optimizer state:
//               the parameter's name; for metrics the metric's name)
//   kiln.init = #kiln.init<...> on parameters
//   kiln.true_shape = array<i64> on parameters --kiln-pad-dims padded
//   kiln.weight_decay = f32, kiln.param_kind = "weight" | "bias" | "norm" |
//               "embedding" on parameters, once --kiln-optimizer decided
//
// The module holds up to three such functions, one per artifact program:
//   @step   forward + backward of one micro-batch (loss, metrics, grads)
//   @update grad norm, clipping scale and the optimizer update
//   @eval   forward only (eval_loss)
// Values shared between them (a parameter, a gradient, the loss) are matched
// by role and name. The module carries `kiln.train` (#kiln.train<...>, the
// train section; getTrainConfig) and `kiln.model`.
// Every component spells these names through this header, never as literals.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_IR_STEPFUNCTION_H
#define KILN_IR_STEPFUNCTION_H

#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::kiln {

// Argument/result attribute names.
// On a ZeRO shard (an argument or result of @step, @update or @eval): the
// mesh axis whose ranks each hold one contiguous slice of the flattened
// tensor (ZeroSharding::shardType), and the whole tensor's shape.
constexpr llvm::StringLiteral kShardAxisAttrName = "kiln.shard_axis";
constexpr llvm::StringLiteral kWholeShapeAttrName = "kiln.whole_shape";
// The mesh axis data parallelism (and ZeRO) runs over.
constexpr llvm::StringLiteral kDataAxisName = "data";
constexpr llvm::StringLiteral kRoleAttrName = "kiln.role";
constexpr llvm::StringLiteral kNameAttrName = "kiln.name";
constexpr llvm::StringLiteral kInitAttrName = "kiln.init";
constexpr llvm::StringLiteral kWeightDecayAttrName = "kiln.weight_decay";
constexpr llvm::StringLiteral kParamKindAttrName = "kiln.param_kind";
// --kiln-pad-dims: the user's shape of a padded parameter (array<i64>), and
// why a parameter dimension was left unpadded (string).
constexpr llvm::StringLiteral kTrueShapeAttrName = "kiln.true_shape";
constexpr llvm::StringLiteral kPadRefusedAttrName = "kiln.pad_dims_refused";

// Function names (= artifact program names).
constexpr llvm::StringLiteral kStepFunctionName = "step";
constexpr llvm::StringLiteral kUpdateFunctionName = "update";
constexpr llvm::StringLiteral kEvalFunctionName = "eval";

// Module attribute names.
constexpr llvm::StringLiteral kTrainAttrName = "kiln.train";
constexpr llvm::StringLiteral kModelAttrName = "kiln.model";
// --kiln-remat: the plan it chose (dictionary: mode, budget, plan, peak,
// extra_flops, step_flops), every plan's peak with --sweep (array), and the
// unit attribute on the ops it cloned into the backward.
constexpr llvm::StringLiteral kRematAttrName = "kiln.remat";
constexpr llvm::StringLiteral kRematSweepAttrName = "kiln.remat_sweep";
/// Module attribute: the block instances whose recompute the model file sets
/// (`Block(x, remat = full)`), instance name -> "none", "pointwise",
/// "selective" or "full"; --kiln-remat plans the others.
constexpr llvm::StringLiteral kRematOverridesAttrName = "kiln.remat_overrides";
constexpr llvm::StringLiteral kRecomputeAttrName = "kiln.recompute";

// Values of kiln.role: the Role enum (#kiln.role<param>, ir/KilnAttrs.td).
// Role::DropoutRng is the tensor<2xi64> [seed, micro-step offset] read by
// dropout (kiln.attention).

/// True when some result of `func` has the loss role: the step function.
bool hasLossResult(func::FuncOp func);

/// The functions of `module` with a loss result, in order.
SmallVector<func::FuncOp> getLossFunctions(ModuleOp module);

/// The kiln.role of result `index` / argument `index` (none when it has
/// none).
std::optional<Role> getResultRole(func::FuncOp func, unsigned index);
std::optional<Role> getArgumentRole(func::FuncOp func, unsigned index);

/// The spelling of a role ("param"), "" for none.
llvm::StringRef roleName(std::optional<Role> role);

/// The index of the (first) result with kiln.role = `role`, if any.
std::optional<unsigned> findResultWithRole(func::FuncOp func, Role role);

/// The index of each kiln.role = #kiln.role<grad> result of `func`, by its kiln.name.
llvm::StringMap<unsigned> getGradResultsByName(func::FuncOp func);

/// {kiln.role = role, kiln.name = name}.
DictionaryAttr roleAndName(Builder &b, Role role, llvm::StringRef name);
/// {kiln.role = role, kiln.name = the role's own name} (the loss, the lr,
/// the norms: roles with one value each).
DictionaryAttr roleNamedAfterItself(Builder &b, Role role);

/// A parameter argument of the step function and its kiln.name.
struct ParameterArgument {
  BlockArgument value;
  StringAttr name;
};

/// The arguments with the param role, in order. Emits an error on `func`
/// and fails when one has no kiln.name.
FailureOr<SmallVector<ParameterArgument>> getParameterArguments(func::FuncOp func);

/// The forward ops of a loss function: the top-level ops its "loss" and
/// "metric" results depend on (through operands and values its regions
/// capture), and the ops that read nothing but those (non-constant) and
/// arguments, wherever they sit: what can be computed before the loss's
/// cotangent exists (the gradient result of a kiln.cross_entropy_grad the
/// loss reads, the fused classifier's, is not). Every other op of its body
/// is backward work.
llvm::DenseSet<Operation *> getForwardOps(func::FuncOp func);

/// The position (in `position`, each top-level op's index in the body) of
/// the backward's first op: the first op with operands that getForwardOps
/// does not count; the body's size when `func` has no loss (no backward).
unsigned getBackwardStart(func::FuncOp func,
                          const llvm::DenseMap<Operation *, unsigned> &position);

/// `value` -- `root` itself, or the result of a chain of single-operand ops
/// starting from `root` -- made again from `root` by clones of the chain,
/// created at `b`'s insertion point; each clone gets position `at`.
Value cloneChainFrom(Value value, Value root, OpBuilder &b,
                     llvm::DenseMap<Operation *, unsigned> &position,
                     unsigned at);

/// The module's #kiln.train (the train section), or null when it has none.
TrainConfigAttr getTrainConfig(ModuleOp module);

/// kiln.train's grad_accum: runs of @step per training step (no
/// kiln.train: 1).
int64_t getGradAccumSteps(ModuleOp module);

/// kiln.train's ZeRO stage (`zero`, absent: 0) and the ranks of the mesh's
/// data axis it shards over (no mesh: 1).
struct ZeroSharding {
  int64_t stage = 0;
  int64_t ranks = 1;

  /// The type of one rank's shard of a tensor of type `full` under this
  /// stage: the flattened tensor cut into `ranks` contiguous slices, rank r
  /// holding slice r. None when the stage is 0 or the element count does not
  /// split evenly (that tensor stays replicated).
  std::optional<RankedTensorType> shardType(RankedTensorType full) const;
};
ZeroSharding readZeroSharding(ModuleOp module);

/// `attrs` plus kiln.shard_axis (the data axis) and kiln.whole_shape
/// (`whole`'s shape): the attributes of a ZeRO shard of a `whole` tensor.
DictionaryAttr withShardAttrs(DictionaryAttr attrs, RankedTensorType whole);

} // namespace mlir::kiln

#endif // KILN_IR_STEPFUNCTION_H
