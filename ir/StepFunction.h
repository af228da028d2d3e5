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

} // namespace mlir::kiln

#endif // KILN_IR_STEPFUNCTION_H
