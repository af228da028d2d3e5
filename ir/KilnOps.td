//===- KilnOps.td - Ops of the kiln dialect ---------------*- tablegen -*-===//
//
// Every op of the `kiln` dialect (see /work/contract.md for the contract the
// frontend, passes and codegen rely on). All ops are Pure and work on
// ranked, statically shaped tensors. Result types that can be derived from
// the operands have C++ builders that derive them (documented at the top of
// ir/KilnOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "ir/KilnDialect.td"
include "ir/KilnInterfaces.td"
include "ir/KilnAttrs.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Kiln_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64]>;
def Kiln_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def Kiln_IntTensor : StaticShapeTensorOf<[I32, I64]>;
// Booleans: the result of kiln.cmp and the condition of kiln.select. Only
// the ops that move data (constant, broadcast, reshape, transpose, select)
// take them besides cmp; arithmetic on i1 is not part of the dialect.
def Kiln_BoolTensor : StaticShapeTensorOf<[I1]>;
def Kiln_AnyTensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64, I1]>;
// Rank-0 f32 tensor: the loss, the learning rate, the step count. Buildable
// so that assembly formats need not spell it.
def Kiln_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// Every kiln op is side-effect free: the training step is a pure function
// from (params, optimizer state, data) to (loss, grads, new state).
class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, !listconcat(traits, [Pure])>;

// Elementwise ops: identical operand and result types, so the result type
// is the type of the first operand (ODS generates builders without it).
class Kiln_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits, [Elementwise,
          SameOperandsAndResultType,
          DeclareOpInterfaceMethods<DifferentiableOpInterface>])>;

// `formula`: the op on one element (ScalarFormulaOpInterface).
class Kiln_BinaryOp<string mnemonic, string sym, string formula,
                    Type type = Kiln_Tensor>
    : Kiln_ElementwiseOp<mnemonic, [ScalarFormulaOpInterface]> {
  let extraClassDeclaration = [{
    static ::llvm::StringRef getScalarFormula() { return "}] # formula # [{"; }
  }];
  let summary = "Elementwise " # sym;
  let description = [{
    Elementwise }] # sym # [{ of two tensors of the same type.

    ```mlir
    %r = kiln.}] # mnemonic # [{ %a, %b : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

class Kiln_UnaryOp<string mnemonic, string what, string formula,
                   Type type = Kiln_FloatTensor>
    : Kiln_ElementwiseOp<mnemonic, [ScalarFormulaOpInterface]> {
  let extraClassDeclaration = [{
    static ::llvm::StringRef getScalarFormula() { return "}] # formula # [{"; }
  }];
  let summary = "Elementwise " # what;
  let description = [{
    Elementwise }] # what # [{ of a tensor.

    ```mlir
    %r = kiln.}] # mnemonic # [{ %a : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

def Kiln_AddOp : Kiln_BinaryOp<"add", "sum", "(($0) + ($1))"> {
  // pad(a) + pad(b) over adjacent ranges of one dim -> pad(concat(a, b)):
  // the gradient of a tensor cut by split (KilnShapeOps.cpp).
  let hasCanonicalizeMethod = 1;
}
def Kiln_SubOp : Kiln_BinaryOp<"sub", "difference", "(($0) - ($1))">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "product", "(($0) * ($1))">;
def Kiln_DivOp : Kiln_BinaryOp<"div", "quotient", "(($0) / ($1))">;
// x ** y as C's powf (NaN for a negative x and a non-integer y, as torch.pow).
def Kiln_PowOp : Kiln_BinaryOp<"pow", "power (lhs ** rhs)", "powf($0, $1)",
                               Kiln_FloatTensor>;

def Kiln_NegOp : Kiln_UnaryOp<"neg", "negation", "(-($0))", Kiln_Tensor>;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "exponential", "expf($0)">;
def Kiln_LogOp : Kiln_UnaryOp<"log", "natural logarithm", "logf($0)">;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "hyperbolic tangent", "tanhf($0)">;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "square root", "sqrtf($0)">;

// A unary float op declared by its two formulas (ScalarFormulaOpInterface):
// the value and the input's cotangent ($0 the input, $1 the incoming
// gradient). Its VJP is kiln.elementwise_grad of the op; the frontend's
// builtin table (frontend/SemaBuiltins.cpp) makes it callable.
class Kiln_FormulaUnaryOp<string mnemonic, string what, string formula,
                          string derivative>
    : Kiln_UnaryOp<mnemonic, what, formula> {
  let extraClassDeclaration = [{
    static ::llvm::StringRef getScalarFormula() { return "}] # formula # [{"; }
    static ::llvm::StringRef getDerivativeFormula() { return "}] # derivative # [{"; }
  }];
  let extraClassDefinition = [{
    ::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>
    $cppClass::buildVJP(::mlir::OpBuilder &b,
                        ::llvm::ArrayRef<::mlir::Value> resultGrads) {
      return ::mlir::kiln::buildFormulaVJP(getOperation(), b, resultGrads);
    }
  }];
}

// sigmoid(x) = 1 / (1 + e^-x); d = g s (1 - s).
def Kiln_SigmoidOp : Kiln_FormulaUnaryOp<"sigmoid", "logistic sigmoid",
    "(1.0f / (1.0f + expf(-($0))))",
    "(($1) * (1.0f / (1.0f + expf(-($0)))) * (1.0f - 1.0f / (1.0f + expf(-($0)))))">;
// silu(x) = x sigmoid(x) (SwiGLU's gate); d = g s (1 + x (1 - s)). The
// value is spelled with the derivative's s = 1 / (1 + e^-x), so a kernel
// holding both (SwiGLU's backward remakes silu(a)) computes s once: one
// reciprocal an element instead of a reciprocal and a division.
def Kiln_SiluOp : Kiln_FormulaUnaryOp<"silu", "SiLU (x * sigmoid(x))",
    "(($0) * (1.0f / (1.0f + expf(-($0)))))",
    "(($1) * (1.0f / (1.0f + expf(-($0)))) * (1.0f + ($0) * (1.0f - 1.0f / (1.0f + expf(-($0))))))">;
// relu(x) = max(x, 0), NaN kept; d = g where x > 0, else 0.
def Kiln_ReluOp : Kiln_FormulaUnaryOp<"relu", "ReLU (max(x, 0))",
    "((($0) < 0.0f) ? 0.0f : ($0))",
    "((($0) > 0.0f) ? ($1) : 0.0f)">;
def Kiln_SinOp : Kiln_FormulaUnaryOp<"sin", "sine", "sinf($0)",
    "(($1) * cosf($0))">;
def Kiln_CosOp : Kiln_FormulaUnaryOp<"cos", "cosine", "cosf($0)",
    "(-($1) * sinf($0))">;
def Kiln_SquareOp : Kiln_FormulaUnaryOp<"square", "square", "(($0) * ($0))",
    "(2.0f * ($0) * ($1))">;

def Kiln_ElementwiseGradOp : Kiln_Op<"elementwise_grad", [Elementwise,
    SameOperandsAndResultType]> {
  let summary = "The cotangent of a formula-declared unary op's input";
  let description = [{
    `result = d op(input) / d input * grad`, elementwise, where `op` names a
    unary kiln op declaring a derivative formula (ScalarFormulaOpInterface):
    the VJP of every such op.

    ```mlir
    %dx = kiln.elementwise_grad %x, %dy {op = "kiln.silu"} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$grad,
                   StrAttr:$op);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The derivative formula of `op` ("" if it has none).
    ::llvm::StringRef getDerivativeFormula();
  }];
}

def Kiln_GeluOp : Kiln_UnaryOp<"gelu", "GELU (tanh approximation)", "kiln_gelu($0)"> {
  let description = [{
    GELU with the tanh approximation used by GPT-2:
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %r = kiln.gelu %a : tensor<4x8xf32>
    ```
  }];
}

def Kiln_GeluGradOp : Kiln_Op<"gelu_grad", [Elementwise,
    SameOperandsAndResultType]> {
  let summary = "Derivative of GELU times an incoming gradient";
  let description = [{
    `result = gelu'(input) * grad`, the VJP of `kiln.gelu` (tanh
    approximation).

    ```mlir
    %dx = kiln.gelu_grad %x, %dy : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$grad);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Kiln_ConvertOp : Kiln_Op<"convert", [Elementwise,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Elementwise conversion between element types";
  let description = [{
    Converts every element to the result's element type with the same shape:
    f32 -> bf16 rounds to nearest even (NaN stays NaN), bf16 -> f32 is exact;
    int -> float rounds to the nearest float (exact below 2^24 in f32, so
    for every index of a real tensor); float -> int truncates toward zero
    (like C and arith.fptosi; NaN and out-of-range values are undefined);
    int -> int sign-extends or truncates. One op instead of a separate
    sitofp/fptosi: the same elementwise slot in codegen, the same folder, and
    passes that look through converts need one case. The mixed-precision pass
    inserts float converts in front of GEMM operands; integer converts carry
    no gradient.

    ```mlir
    %xb = kiln.convert %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    %jf = kiln.convert %j : tensor<64xi32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  // Same shape: the Elementwise trait's verifier.
  let hasFolder = 1;
}

// lt, le, gt, ge, eq, ne: signed for integers, ordered for floats (a NaN
// compares false, except under ne).
def Kiln_CmpPredicateAttr : StringBasedAttr<CPred<
    "::llvm::isa<::mlir::StringAttr>($_self) && "
    "::llvm::is_contained(::llvm::ArrayRef<::llvm::StringRef>{"
    "\"lt\", \"le\", \"gt\", \"ge\", \"eq\", \"ne\"}, "
    "::llvm::cast<::mlir::StringAttr>($_self).getValue())">,
    "comparison predicate: one of lt, le, gt, ge, eq, ne">;

def Kiln_CmpOp : Kiln_Op<"cmp", [Elementwise, SameTypeOperands,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Elementwise comparison producing an i1 tensor";
  let description = [{
    `result = lhs <predicate> rhs` for every element, with predicate one of
    `"lt"`, `"le"`, `"gt"`, `"ge"`, `"eq"`, `"ne"`. Integers compare signed;
    floats compare ordered (NaN gives false, except for `"ne"`). Both operands
    have the same type; the result is i1 of the same shape. No gradient
    flows through a comparison.

    ```mlir
    // keep = j <= i   (causal)
    %keep = kiln.cmp "le", %j, %i : tensor<8x8xi32> -> tensor<8x8xi1>
    ```
  }];
  let arguments = (ins Kiln_CmpPredicateAttr:$predicate, Kiln_Tensor:$lhs,
                       Kiln_Tensor:$rhs);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)
  }];
  let builders = [
    // Derives the result type: the operands' shape with i1 elements.
    OpBuilder<(ins "::llvm::StringRef":$predicate, "::mlir::Value":$lhs,
                   "::mlir::Value":$rhs)>
  ];
  let hasFolder = 1;
}

def Kiln_SelectOp : Kiln_Op<"select", [Elementwise,
    AllTypesMatch<["true_value", "false_value", "result"]>,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Elementwise choice between two tensors";
  let description = [{
    `result = condition ? true_value : false_value` for every element (the
    language's `where`). The condition is i1 with the values' shape. The VJP
    routes the gradient to the chosen side: `select(c, g, 0)` for
    true_value, `select(c, 0, g)` for false_value. Values may be i1 too, so
    `a and b` is `select(a, b, false)`.

    ```mlir
    %masked = kiln.select %keep, %scores, %ninf
        : tensor<8x8xi1>, tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$condition,
                       Kiln_AnyTensor:$true_value,
                       Kiln_AnyTensor:$false_value);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    type($condition) `,` type($result)
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Constants and index generators
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "Constant tensor";
  let description = [{
    A tensor whose contents are given by a dense elements attribute; the
    result type is the attribute's type.

    ```mlir
    %one = kiln.constant dense<1.0> : tensor<f32>
    %w = kiln.constant dense<[1, 2, 3]> : tensor<3xi32>
    ```
  }];
  let arguments = (ins ElementsAttrBase<
      CPred<"::llvm::isa<::mlir::DenseElementsAttr>($_self)">,
      "dense elements attribute"> : $value);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Kiln_IotaOp : Kiln_Op<"iota"> {
  let summary = "1-D tensor 0, 1, ..., N-1";
  let description = [{
    Produces the integers `0 .. N-1` where `N` is the size of the 1-D result.
    Positions and masks are built from it.

    ```mlir
    %pos = kiln.iota : tensor<64xi32>
    ```
  }];
  let arguments = (ins);
  let results = (outs Kiln_IntTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Matmul and embedding
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp : Kiln_Op<"matmul", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "(Batched) matrix product with optional transposes";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`); `rhs` is
    either rank 2 `[K, N]`, shared over the batch, or `[..., K, N]` with the
    same batch dimensions as `lhs` (`[N, K]` / `[..., N, K]` with
    `transpose_rhs`). The result is `[..., M, N]` with the batch dimensions
    of `lhs`, of the operands' element type or f32 (bf16/f16 operands with
    fp32 accumulation and output, as mixed precision uses it). Codegen turns
    it into a GEMM call.

    ```mlir
    %y = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32>
        -> tensor<2x4x16xf32>
    %s = kiln.matmul %q, %k {transpose_rhs = true}
        : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %z = kiln.matmul %xb, %wb : tensor<4x8xbf16>, tensor<8x16xbf16>
        -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let builders = [
    // Derives the result type [..., M, N].
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs,
                   CArg<"bool", "false">:$transposeRhs)>
  ];
  let hasVerifier = 1;
}

def Kiln_MatmulAccumulateOp : Kiln_Op<"matmul_accumulate", [
    AllTypesMatch<["acc", "result"]>]> {
  let summary = "acc + op(lhs) @ op(rhs), summed by the GEMM into acc";
  let description = [{
    `acc + matmul(lhs, rhs)` with kiln.matmul's transpose flags, for 2-D
    operands and an f32 `acc`: one GEMM call that adds its product into
    `acc`'s buffer (beta = 1) instead of a product tensor and an add. The
    result reuses `acc`'s buffer, so `acc` may have no later reader. Made
    by --kiln-expand-linear-cross-entropy for the weight gradient summed over
    the chunks; not differentiable (it only appears after autodiff).

    ```mlir
    %dw2 = kiln.matmul_accumulate %dw, %d, %x {transpose_lhs = true}
        : tensor<64x16xf32>, tensor<8x64xf32>, tensor<8x16xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$acc,
                       Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $acc `,` $lhs `,` $rhs attr-dict `:` type($acc) `,` type($lhs) `,`
    type($rhs)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$acc, "::mlir::Value":$lhs,
                   "::mlir::Value":$rhs, "bool":$transposeLhs,
                   "bool":$transposeRhs), [{
      build($_builder, $_state, acc.getType(), acc, lhs, rhs, transposeLhs,
            transposeRhs);
    }]>
  ];
  let hasVerifier = 1;
}

def Kiln_EmbeddingOp : Kiln_Op<"embedding", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Row gather from an embedding table";
  let description = [{
    `result[..., :] = table[indices[...], :]` for a table `[V, D]`.

    ```mlir
    %e = kiln.embedding %wte, %tokens : tensor<64x16xf32>, tensor<2x8xi32>
        -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$table, Kiln_IntTensor:$indices);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices attr-dict `:` type($table) `,` type($indices) `->`
    type($result)
  }];
  let builders = [
    // Derives the result type [..., D].
    OpBuilder<(ins "::mlir::Value":$table, "::mlir::Value":$indices)>
  ];
  let hasVerifier = 1;
}

def Kiln_EmbeddingGradOp : Kiln_Op<"embedding_grad"> {
  let summary = "Scatter-add of gradient rows into a zero table (or into acc)";
  let description = [{
    The VJP of `kiln.embedding` for its table: starts from a zero `[V, D]`
    tensor and adds `grad[..., :]` into row `indices[...]`, in index order.
    With `plus %acc` it starts from `acc` instead and the result reuses
    acc's buffer (acc may have no later reader): a tied embedding's gradient
    adds its rows into the classifier's weight gradient without a zeroed
    table and an add (--kiln-accumulate-gemms).

    ```mlir
    %dwte = kiln.embedding_grad %tokens, %g : tensor<2x8xi32>,
        tensor<2x8x16xf32> -> tensor<64x16xf32>
    %sum = kiln.embedding_grad %tokens, %g plus %dw : tensor<2x8xi32>,
        tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins Kiln_IntTensor:$indices, Kiln_FloatTensor:$grad,
                       Optional<StaticShapeTensorOf<[F32]>>:$acc);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad (`plus` $acc^)? attr-dict `:` type($indices) `,`
    type($grad) (`,` type($acc)^)? `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$tableType, "::mlir::Value":$indices,
                   "::mlir::Value":$grad), [{
      build($_builder, $_state, tableType, indices, grad, ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}


// broadcast, reduce_sum, reshape, transpose, slice, pad, concat.
include "ir/KilnShapeOps.td"

// layer_norm, rms_norm, rope, softmax, causal_mask and their gradients.
include "ir/KilnRowOps.td"

// cross_entropy and the fused linear_cross_entropy, with their gradients.
include "ir/KilnLossOps.td"

// The optimizer ops (gradient accumulation, clipping scale, parameter
// updates) are in their own file.
include "ir/KilnOptimizerOps.td"

// kiln.attention / kiln.attention_grad (score and mask regions).
include "ir/KilnAttentionOps.td"

// kiln.fusion (the kernels chosen by --kiln-fusion) and its kiln.yield.
include "ir/KilnFusionOps.td"

// all_reduce, reduce_scatter, all_gather, mesh_broadcast on mesh axes.
include "ir/KilnCollectiveOps.td"

#endif // KILN_OPS_TD
