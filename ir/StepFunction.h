//===- StepFunction.h - Attribute names of the training-step function -----===//
//
// The frontend emits one `func.func` for the training step; autodiff, the
// optimizer pass and codegen extend and read it. Its arguments and results say
// what they are through these attributes (see the contract in the dialect docs):
//
//   kiln.role = "param" | "input" | "grad" | "grad_norm" | "adam_m" | "adam_v"
//             | "lr" | "step" | "loss"
//   kiln.name = the parameter or input name (for grads and optimizer state:
//               the parameter's name)
//   kiln.init = #kiln.init<...> on parameters
//
// and the module carries `kiln.train` (the train section) and `kiln.model`.
// Every component spells these names through this header, never as literals.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_IR_STEPFUNCTION_H
#define KILN_IR_STEPFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::kiln {

// Argument/result attribute names.
constexpr llvm::StringLiteral kRoleAttrName = "kiln.role";
constexpr llvm::StringLiteral kNameAttrName = "kiln.name";
constexpr llvm::StringLiteral kInitAttrName = "kiln.init";

// Module attribute names.
constexpr llvm::StringLiteral kTrainAttrName = "kiln.train";
constexpr llvm::StringLiteral kModelAttrName = "kiln.model";

// Values of kiln.role.
namespace role {
constexpr llvm::StringLiteral kParam = "param";
constexpr llvm::StringLiteral kInput = "input";
constexpr llvm::StringLiteral kLoss = "loss";
constexpr llvm::StringLiteral kGrad = "grad";
constexpr llvm::StringLiteral kGradNorm = "grad_norm";
constexpr llvm::StringLiteral kAdamM = "adam_m";
constexpr llvm::StringLiteral kAdamV = "adam_v";
constexpr llvm::StringLiteral kLearningRate = "lr";
constexpr llvm::StringLiteral kStep = "step";
} // namespace role

/// True when some result of `func` has kiln.role = "loss": the step function.
bool hasLossResult(func::FuncOp func);

/// A parameter argument of the step function and its kiln.name.
struct ParameterArgument {
  BlockArgument value;
  StringAttr name;
};

/// The arguments with kiln.role = "param", in order. Emits an error on `func`
/// and fails when one has no kiln.name.
FailureOr<SmallVector<ParameterArgument>> getParameterArguments(func::FuncOp func);

} // namespace mlir::kiln

#endif // KILN_IR_STEPFUNCTION_H
