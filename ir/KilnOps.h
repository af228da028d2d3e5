//===- KilnOps.h - Ops of the kiln dialect ----------------------*- C++ -*-===//
//
// Everything a user of the dialect needs: the dialect, `#kiln.init`, the
// DifferentiableOpInterface and all ops. Include this one header.
//
// C++ builders (use with `b.create<Op>(loc, ...)`). Builders marked [infers]
// derive the result type(s); every op also has the ODS builders that take
// explicit result types first, e.g. `create<AddOp>(loc, type, lhs, rhs)`.
//
//   Elementwise (result type = operand type) [infers]:
//     AddOp, SubOp, MulOp, DivOp,
//     PowOp                            (loc, Value lhs, Value rhs)
//     NegOp, ExpOp, LogOp, TanhOp,
//     SqrtOp, GeluOp, SigmoidOp, SiluOp,
//     ReluOp, SinOp, CosOp, SquareOp   (loc, Value input)
//     GeluGradOp                       (loc, Value input, Value grad)
//     ElementwiseGradOp                (loc, Value input, Value grad,
//                                       StringRef op)
//   Every elementwise op but convert, cmp, select and the *_grad ops has
//   ScalarFormulaOpInterface (KilnInterfaces.td): its value as a C formula.
//   ConstantOp                         (loc, DenseElementsAttr value) [infers]
//       e.g. DenseElementsAttr::get(RankedTensorType::get({}, f32), 1.0f)
//       helper: createSplatConstant(b, loc, type, double) (below).
//   IotaOp                             (loc, Type resultType)   // tensor<Nxi32>
//   BroadcastOp                        (loc, Type resultType, Value input,
//                                       ArrayRef<int64_t> dims)
//   ReduceSumOp                        (loc, Value input,
//                                       ArrayRef<int64_t> dims) [infers]
//   ReshapeOp                          (loc, Type resultType, Value input)
//   TransposeOp                        (loc, Value input,
//                                       ArrayRef<int64_t> permutation) [infers]
//   SliceOp                            (loc, Value input, int64_t dim,
//                                       int64_t start, int64_t end) [infers]
//   PadOp                              (loc, Value input, int64_t dim,
//                                       int64_t before, int64_t after)
//                                       [infers]
//   ConcatOp                           (loc, ValueRange inputs,
//                                       int64_t dim) [infers]
//   MatmulOp                           (loc, Value lhs, Value rhs,
//                                       bool transposeLhs = false,
//                                       bool transposeRhs = false) [infers]
//   EmbeddingOp                        (loc, Value table, Value indices) [infers]
//   EmbeddingGradOp                    (loc, Type tableType, Value indices,
//                                       Value grad[, Value acc])
//   LayerNormOp                        (loc, Value input, Value weight,
//                                       Value bias, float epsilon = 1e-5f)
//                                       [infers output, mean, rstd]
//   LayerNormGradOp                    (loc, Value input, Value weight,
//                                       Value mean, Value rstd, Value grad)
//                                       [infers input_grad, weight_grad,
//                                        bias_grad]
//   SoftmaxOp                          (loc, Value input) [infers]
//   SoftmaxGradOp                      (loc, Value output, Value grad) [infers]
//   CausalMaskOp                       (loc, Value input, APFloat fill) [infers]
//       e.g. APFloat::getInf(APFloat::IEEEsingle(), /*Negative=*/true)
//   CrossEntropyOp                     (loc, Value logits, Value targets)
//                                       [infers tensor<f32>]
//   CrossEntropyGradOp                 (loc, Value logits, Value targets,
//                                       Value grad) [infers]
//   Optimizer ops (KilnOptimizerOps.td), built with every type spelled:
//   AccumulateOp (loc, type, acc, value, scale); GradScaleOp (loc, type,
//   gradNorm, loss, maxNorm); AdamOp (loc, type, type, type, scalar, scalar,
//   param, grad, m, v, lr, step, scale, beta1, beta2, epsilon, weightDecay,
//   decoupled); SgdOp; SgdMomentumOp.
//
// Collectives (KilnCollectiveOps.td), every type spelled: AllReduceOp
//   (loc, inputs, reduction, axis, reason); ReduceScatterOp / AllGatherOp
//   (loc, type, input, [reduction,] axis, dim, reason).
//
// DifferentiableOpInterface (KilnInterfaces.td, rules in KilnVJP.cpp):
//   FailureOr<SmallVector<Value>> buildVJP(OpBuilder &b,
//                                          ArrayRef<Value> resultGrads);
// builds at b's insertion point; null resultGrads[i] = result i unused; a
// null returned entry = no cotangent (integer operands). Implemented by all
// ops except constant, iota, embedding_grad, the *_grad ops and the optimizer ops.
// layer_norm fails (with an error on the op) if mean/rstd get a cotangent.
//
// Accessors follow the operand/attribute names in snake_case -> camelCase:
// getLhs(), getRhs(), getInput(), getDims(), getPermutation(),
// getTransposeLhs(), getTransposeRhs(), getTable(), getIndices(),
// getEpsilon() (APFloat; getEpsilonAttr() for FloatAttr), getOutput(),
// getMean(), getRstd(), getFill(), getLogits(), getTargets(), getParam(),
// getGrad(), getM(), getV(), getLr(), getStep(), getNewParam(), ...
//
// Result-type helpers (return a null type if the operands are invalid):
//   inferReduceSumType, inferTransposeType, inferMatmulType (below).
// Also: createSplatConstant(b, loc, type, double), formatShortestFloat(APFloat).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNOPS_H
#define KILN_IR_KILNOPS_H

#include "ir/KilnDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/Sharding.h"

#include "ir/KilnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/KilnOps.h.inc"

namespace mlir {
namespace kiln {

/// Input shape with `dims` removed, same element type.
RankedTensorType inferReduceSumType(RankedTensorType input,
                                    ArrayRef<int64_t> dims);
/// result[i] = input[permutation[i]]; null if the permutation is invalid.
RankedTensorType inferTransposeType(RankedTensorType input,
                                    ArrayRef<int64_t> permutation);
/// [..., M, N] for the matmul rules of the contract; null if they fail.
RankedTensorType inferMatmulType(RankedTensorType lhs, RankedTensorType rhs,
                                 bool transposeLhs, bool transposeRhs);

/// A `kiln.constant` of `type` with every element equal to `value`
/// (converted to the element type).
Value createSplatConstant(OpBuilder &b, Location loc, RankedTensorType type,
                          double value);

/// The VJP of a unary op declaring a derivative formula
/// (ScalarFormulaOpInterface): kiln.elementwise_grad of it (KilnVJP.cpp).
FailureOr<SmallVector<Value>> buildFormulaVJP(Operation *op, OpBuilder &b,
                                              ArrayRef<Value> resultGrads);

/// The module attribute holding the mesh: axis name -> ranks along it
/// (`kiln.mesh = {data = 2 : i64}`); absent: one rank.
constexpr llvm::StringLiteral kMeshAttrName = "kiln.mesh";

/// The number of ranks along mesh axis `axis` of the module around `op`, or
/// an error on `op` naming the axes there are.
FailureOr<int64_t> meshAxisSize(Operation *op, StringRef axis);

/// True for the ops that communicate between ranks (all_reduce,
/// reduce_scatter, all_gather, mesh_broadcast).
bool isCollective(Operation *op);

/// The shortest decimal text that reads back as the same value in the
/// value's precision ("0.9" for an f32 0.9, "1.0", "1e-08"); for
/// diagnostics, #kiln.init and generated source. inf/nan print as "inf"/"nan"
/// style text from APFloat.
std::string formatShortestFloat(const llvm::APFloat &value);

} // namespace kiln
} // namespace mlir

#endif // KILN_IR_KILNOPS_H
