//===- KilnDialect.td - The kiln dialect declaration ------*- tablegen -*-===//
//
// Declares the `kiln` dialect: tensor-level ops of a training step (forward,
// backward and optimizer update) on ranked, statically shaped tensors.
// Ops live in KilnOps.td (with the files it includes by concern: shape, row,
// loss, optimizer, attention and fusion ops), attributes in KilnAttrs.td,
// interfaces in KilnInterfaces.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::mlir::kiln";
  let summary = "Tensor ops of a whole training step.";
  let description = [{
    The `kiln` dialect holds the forward graph produced by the frontend, the
    backward graph produced by `--kiln-autodiff` (through
    `DifferentiableOpInterface`) and the optimizer update. All tensors are
    ranked with static shapes; element types are f32, bf16, f16, i32, i64.
  }];
  // arith, math and tensor ops form the score/mask regions of kiln.attention.
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
  let useDefaultAttributePrinterParser = 1;
  // kiln.train must be a #kiln.train, kiln.role a #kiln.role
  // (KilnDialect.cpp).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasConstantMaterializer = 1;
}

#endif // KILN_DIALECT_TD
