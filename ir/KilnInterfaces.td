//===- KilnInterfaces.td - Interfaces of the kiln dialect -*- tablegen -*-===//
//
// DifferentiableOpInterface: the reverse-mode rule of an op. The autodiff
// pass walks the function backwards and asks each op for the cotangents of
// its operands given the cotangents of its results.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INTERFACES_TD
#define KILN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    An op whose vector-Jacobian product can be written with kiln ops.
    Implementations live in ir/KilnVJP.cpp.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the vector-Jacobian product at the builder's insertion point.
        `resultGrads[i]` is the cotangent of result i, or a null Value when
        that result is unused. Returns one Value per operand: its cotangent
        (same type as the operand), or a null Value for operands that are not
        differentiable (integer indices, targets).
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$b,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads)>
  ];
}

#endif // KILN_INTERFACES_TD
