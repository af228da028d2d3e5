//===- StepLowering.h - The training-step module as a StepProgram ---------===//
//
// Lowers a module with `@step`, `@update` and (optionally) `@eval` to the
// StepProgram (StepProgram.h): one PlannedProgram per function, in that
// order. Buffers with a role (parameters, inputs, gradients, the loss,
// optimizer state, lr, step, metrics, norms) are shared by all programs
// through their role and name; every other op result is an activation of its
// program. Reshape results are views (alias_of) of their input; the
// optimizer and accumulation ops write in place into their parameter /
// state / accumulator operands. One schedule entry per op (GemmCall for
// kiln.matmul and kiln.fusion gemm, CollectiveCall for the collectives,
// KernelCall otherwise; one KernelCall per other kiln.fusion), in program
// order; the kernels come from KernelTable (the target's emitter). Then the
// program's own decisions: collective overlap and the memory plan.
//
// Internal to codegen/: Codegen.h's entry points are the public face.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_STEPLOWERING_H
#define KILN_CODEGEN_STEPLOWERING_H

#include "codegen/program/ArtifactSerializer.h"
#include "codegen/Codegen.h"
#include "codegen/KernelTable.h"
#include "codegen/program/StepProgram.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// "file:line:col" of the innermost FileLineColLoc (the callee side of call
// sites), or "" when the location carries none.
std::string locationString(mlir::Location loc);

// Roles a program writes in place into the argument of the same role and
// name: parameters and optimizer state.
bool isInPlaceRole(mlir::kiln::Role role);

// The artifact's header from the module: the model, the target, the
// TrainConfig from `kiln.train` (every setting as one JSON object; the
// vocabulary bound of the token data from the ops that index with it), the
// mesh (ArtifactHeader.cpp).
mlir::FailureOr<ArtifactHeader> readArtifactHeader(mlir::ModuleOp module,
                                                   const CodegenOptions &options);

class StepLowering {
public:
  explicit StepLowering(mlir::ModuleOp module, CodegenOptions options = {})
      : module(module), options(std::move(options)),
        kernels(this->options, program.kernels) {}
  StepLowering(const StepLowering &) = delete;

  // Lowers the module: buffers, kernels, schedules, then the collectives'
  // overlap and the memory plan. Emits diagnostics on failure.
  mlir::FailureOr<StepProgram> lower();

private:
  mlir::LogicalResult planFunction(mlir::func::FuncOp func);
  mlir::LogicalResult planArguments(mlir::func::FuncOp func);
  // A ZeRO shard's axis and whole shape, from its kiln.shard_axis and
  // kiln.whole_shape (nothing when `attrs` has neither).
  static void markShard(PlannedBuffer &buffer, mlir::DictionaryAttr attrs);
  mlir::LogicalResult planOp(mlir::Operation *op);
  mlir::LogicalResult planMatmul(mlir::Operation *op);
  mlir::LogicalResult planMatmulAccumulate(mlir::Operation *op);
  // Appends the GemmCall `g` of `op` to the schedule (and its flops).
  void addGemmStep(mlir::Operation *op, const PlannedGemm &g);
  // The GemmCall of a kiln.matmul (or of kiln.matmul_accumulate's factors,
  // from operand 1) whose operands have buffers (C unset).
  mlir::FailureOr<PlannedGemm> gemmOf(mlir::Operation *op,
                                      unsigned firstOperand = 0);
  // A kiln.fusion gemm (GemmEpilogueWriter.cpp): one GemmCall with an
  // epilogue.
  mlir::LogicalResult planGemmFusion(mlir::kiln::FusionOp fusion);
  // True when kiln.train's precision is `precision`.
  bool precisionIs(mlir::kiln::Precision precision) const;
  mlir::LogicalResult planKernel(mlir::Operation *op);
  // kiln.all_reduce: one CollectiveCall reducing its operands' buffers in
  // place (its results take their storage).
  mlir::LogicalResult planAllReduce(mlir::kiln::AllReduceOp op);
  // kiln.reduce_scatter, kiln.all_gather, kiln.local_shard: one
  // CollectiveCall from the operand's buffer into the result's. An
  // all-gather that becomes an updated parameter (ZeRO) writes straight
  // into the parameter's storage.
  mlir::LogicalResult planShardCollective(mlir::Operation *op);
  // The @update argument whose storage `gathered` is returned into (through
  // reshape views) as an in-place role (param), or null.
  mlir::Value inPlaceHome(mlir::Value gathered);
  mlir::LogicalResult planFusion(mlir::kiln::FusionOp fusion);
  mlir::LogicalResult planReturn(mlir::func::FuncOp func,
                                 mlir::func::ReturnOp ret);
  // Gives `value` (a result of the op being planned) the storage of
  // `operand`, which must not be read after `op` (in-place updates).
  mlir::LogicalResult planInPlace(mlir::Operation *op, mlir::Value result,
                                  mlir::Value operand);
  // Buffer.logical_shape of padded parameters, gradients and state.
  void planLogicalShapes();
  // A shared buffer for `role` and `name`, created on first use.
  mlir::FailureOr<uint32_t> sharedBuffer(mlir::Value value,
                                         mlir::Operation *where,
                                         mlir::kiln::Role role,
                                         llvm::StringRef name);

  // A new buffer for `value` (its type, named after `op`); returns its index.
  mlir::FailureOr<uint32_t> addBuffer(mlir::Value value, mlir::Operation *op,
                                      llvm::StringRef name);
  // The buffer that owns `index`'s storage (follows alias_of).
  uint32_t storageOf(uint32_t index) const;

  mlir::ModuleOp module;
  CodegenOptions options;
  StepProgram program; // what `lower` builds
  // Its buffers and programs, as the planning code reads them.
  std::vector<PlannedBuffer> &buffers = program.buffers;
  std::vector<PlannedProgram> &programs = program.programs;
  std::vector<PlannedStep> *schedule = nullptr; // of the program being planned
  KernelTable kernels; // the emitted kernels, into program.kernels
  llvm::DenseMap<mlir::Value, uint32_t> bufferOf;
  // "role:name" -> the buffer shared by every program.
  llvm::StringMap<uint32_t> sharedBuffers;
  // Parameter name -> kiln.true_shape of a parameter pad-dims padded.
  llvm::StringMap<std::vector<int64_t>> trueShapes;
};

} // namespace kiln

#endif // KILN_CODEGEN_STEPLOWERING_H
