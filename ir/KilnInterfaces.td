//===- KilnInterfaces.td - Interfaces of the kiln dialect -*- tablegen -*-===//
//
// DifferentiableOpInterface: the reverse-mode rule of an op. The autodiff
// pass walks the function backwards and asks each op for the cotangents of
// its operands given the cotangents of its results.
// ShardingRuleOpInterface: how an op's dimensions correspond, for sharding
// propagation and the SPMD partitioner.
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

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    The op's sharding rule (ir/Sharding.h, ShardingRule): its dimensions as
    factors -- each operand and result dimension names the factor it
    iterates over, and each factor says whether splitting it leaves every
    rank a whole part of the result (pass-through: batch and free
    dimensions), a partial sum of it (the contracting dimension of a
    matmul, a reduced dimension), or is impossible without the whole
    dimension (the row a softmax or a norm normalizes). Propagation moves
    shardings along factors; the partitioner reads from the rule which
    collectives the op's local computation needs. The rules are attached
    as external models, all in ir/ShardingRules.cpp; an op without one
    takes and gives whole tensors only.
  }];
  let methods = [
    InterfaceMethod<"The op's factors and which dimension names which.",
      "::mlir::kiln::ShardingRule", "getShardingRule", (ins)>
  ];
}

def ScalarFormulaOpInterface : OpInterface<"ScalarFormulaOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    An elementwise op whose value is one C expression of its operands'
    elements (float registers for float tensors, bf16 widened; C integers
    for integer ones): `$0`, `$1`, ... stand for the operands, each a
    parenthesized expression. Codegen's scalar-expression emitter writes it
    into the CPU and the CUDA kernels alike, so the formula may call only
    what both have: the operators, expf, logf, tanhf, sqrtf, sinf, cosf,
    the kiln_* functions every target's prelude defines (kiln_gelu), and
    float literals with an `f` suffix.

    An op that also declares a derivative formula -- `$0` the input, `$1`
    the incoming gradient, the value being the input's cotangent -- gets its
    vector-Jacobian product for free: `kiln.elementwise_grad` of the op
    (KilnVJP.cpp, buildFormulaVJP). Declaring a unary op with both (ODS
    class Kiln_FormulaUnaryOp) is all its IR, VJP and kernels need.
  }];
  let methods = [
    StaticInterfaceMethod<"The value of the op on one element.",
      "::llvm::StringRef", "getScalarFormula">,
    StaticInterfaceMethod<[{
        The cotangent of the op's (only) operand, or "" when the op's VJP is
        written with kiln ops instead.
      }],
      "::llvm::StringRef", "getDerivativeFormula", (ins), "",
      [{ return ""; }]>
  ];
}

def RowOpInterface : OpInterface<"RowOpInterface"> {
  let cppNamespace = "::mlir::kiln";
  let description = [{
    An op computed row by row over its operand 0's last dimension (layer
    and RMS norms, softmax, cross-entropy, their backwards): one kernel loop
    per row. Fusion asks it instead of keeping a list: a row op absorbs the
    pointwise producers of its row-sized operands (its prologue, e.g. the
    residual add before a norm) and, when its result 0 is row-shaped, the
    pointwise consumers of that result (its epilogue).
  }];
  let methods = [
    InterfaceMethod<"The elements one row covers.", "int64_t", "getRowLength",
      (ins), "", [{
        auto shape = ::llvm::cast<::mlir::RankedTensorType>(
            $_op->getOperand(0).getType()).getShape();
        return shape.empty() ? 1 : shape.back();
      }]>,
    InterfaceMethod<[{
        Whether result 0 is row-shaped, so pointwise ops on it can run in
        the same row loop.
      }], "bool", "hasRowEpilogue", (ins), "", [{ return true; }]>,
    InterfaceMethod<[{
        Whether both backends' kernels apply the epilogue to each element of
        result 0 as they compute it (the value in a register), so result 0
        needs a buffer only when something outside the kernel reads it
        (the norms and their backwards: y and dx).
      }], "bool", "hasElementEpilogue", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Whether operand `index` is a learned per-feature scale or shift of a
        normalisation (weight decay skips those unless decay_norms).
      }], "bool", "isNormalizationParameter", (ins "unsigned":$index), "",
      [{ return false; }]>
  ];
}

#endif // KILN_INTERFACES_TD
