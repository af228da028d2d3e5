//===- MixedPrecision.cpp - bf16 GEMM operands, fp32 everywhere else ------===//
//
// --kiln-mixed-precision: with `precision = bf16` in kiln.train, every GEMM
// of the training step reads bf16 copies of its operands and accumulates and
// writes in fp32, as torch.autocast does for matmuls: tensor cores run at
// their bf16 rate, the parameters stay fp32 masters, the gradients that reach
// the optimizer are fp32 sums, and the optimizer state is fp32. Norms,
// softmax, the loss and every reduction keep fp32 inputs.
//
// It runs after autodiff, on the joint forward + backward graph, so the
// backward GEMMs (dX = dY W^T, dW = X^T dY) are converted the same way and no
// VJP of a mixed-type op is ever needed. The bf16 copy of an activation is
// made once and shared by the forward GEMM and the backward GEMM that reads
// it again (the weight gradient), which is what autocast saves for backward.
//
// Algorithm, for @step and @eval (@update has no GEMMs):
//  1. Read `precision` from kiln.train: absent, "fp32" or "tf32" (TF32 is a
//     GEMM setting codegen reads): nothing to do; "bf16": continue; anything
//     else: error.
//  2. For every f32 kiln.matmul, for each operand: reuse the bf16 convert of
//     that value made for an earlier GEMM, else create one right after the
//     value's definition (so every later user can share it), and make the
//     matmul read it. The matmul's result stays f32.
//  3. An operand that is already bf16 is left alone; integer or f16 GEMMs
//     are not touched.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNMIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Step 1: the precision setting ("fp32" when absent).
FailureOr<StringRef> readPrecision(ModuleOp module) {
  auto train = module->getAttrOfType<DictionaryAttr>(kTrainAttrName);
  Attribute value = train ? train.get("precision") : Attribute();
  if (!value)
    return StringRef("fp32");
  auto name = dyn_cast<StringAttr>(value);
  if (!name || (name.getValue() != "fp32" && name.getValue() != "tf32" &&
                name.getValue() != "bf16"))
    return module.emitError("'kiln.train' precision must be \"fp32\", "
                            "\"tf32\" or \"bf16\", got ")
           << value;
  return name.getValue();
}

/// Step 2: the bf16 copy of `value`, made once, right after its definition.
Value bf16Copy(Value value, llvm::DenseMap<Value, Value> &copies) {
  auto it = copies.find(value);
  if (it != copies.end())
    return it->second;
  OpBuilder b(value.getContext());
  if (auto arg = dyn_cast<BlockArgument>(value))
    b.setInsertionPointToStart(arg.getOwner());
  else
    b.setInsertionPointAfter(value.getDefiningOp());
  auto type = cast<RankedTensorType>(value.getType());
  Value copy = b.create<ConvertOp>(value.getLoc(),
                                   type.clone(b.getBF16Type()), value);
  copies[value] = copy;
  return copy;
}

void convertGemmOperands(func::FuncOp func) {
  llvm::DenseMap<Value, Value> copies;
  func.walk([&](MatmulOp matmul) {
    for (OpOperand &operand : matmul->getOpOperands()) {
      auto type = cast<RankedTensorType>(operand.get().getType());
      if (!type.getElementType().isF32()) // step 3
        continue;
      operand.set(bf16Copy(operand.get(), copies));
    }
  });
}

struct KilnMixedPrecisionPass
    : public mlir::kiln::impl::KilnMixedPrecisionBase<KilnMixedPrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<StringRef> precision = readPrecision(module);
    if (failed(precision))
      return signalPassFailure();
    if (*precision != "bf16")
      return;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      convertGemmOperands(func);
  }
};

} // namespace
