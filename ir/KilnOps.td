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
// silu(x) = x sigmoid(x) (SwiGLU's gate); d = g s (1 + x (1 - s)).
def Kiln_SiluOp : Kiln_FormulaUnaryOp<"silu", "SiLU (x * sigmoid(x))",
    "(($0) / (1.0f + expf(-($0))))",
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
// Shape ops
//===----------------------------------------------------------------------===//

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Broadcast to a larger shape";
  let description = [{
    Input dimension `i` maps to result dimension `dims[i]` (strictly
    increasing); it must have size 1 (it is then expanded) or the size of
    that result dimension. Result dimensions not named in `dims` are new.

    ```mlir
    // bias [8] added to every row of [4, 8]
    %r = kiln.broadcast %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    // expand a size-1 dimension
    %s = kiln.broadcast %m dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReduceSumOp : Kiln_Op<"reduce_sum", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Sum over dimensions";
  let description = [{
    Sums over `dims` (sorted, unique); the result has those dimensions
    removed (rank 0 when all are reduced).

    ```mlir
    %r = kiln.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %t = kiln.reduce_sum %a dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [
    // Derives the result type: the input shape with `dims` removed.
    OpBuilder<(ins "::mlir::Value":$input, "::llvm::ArrayRef<int64_t>":$dims)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Reinterpret a row-major tensor with another shape";
  let description = [{
    Same elements in the same row-major order, new shape. Codegen makes the
    result alias the input buffer.

    ```mlir
    %r = kiln.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %r = kiln.transpose %a permutation = [0, 2, 1]
        : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->`
    type($result)
  }];
  let builders = [
    // Derives the result type from the permutation.
    OpBuilder<(ins "::mlir::Value":$input,
                   "::llvm::ArrayRef<int64_t>":$permutation)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "A contiguous range of one dimension";
  let description = [{
    `result[..., i, ...] = input[..., start + i, ...]` along `dim`, for
    `i < result.shape[dim]`; every other dimension is kept whole. Its VJP is
    a `kiln.pad` of the gradient back to the input's shape.

    ```mlir
    %r = kiln.slice %a dim = 1, start = 2 : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, I64Attr:$dim, I64Attr:$start);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `,` `start` `=` $start attr-dict `:` type($input)
    `->` type($result)
  }];
  let builders = [
    // input[..., start:end, ...] along dim.
    OpBuilder<(ins "::mlir::Value":$input, "int64_t":$dim, "int64_t":$start,
                   "int64_t":$end)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_PadOp : Kiln_Op<"pad", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Zeros around a tensor along one dimension";
  let description = [{
    `result[..., before + i, ...] = input[..., i, ...]` along `dim`; every
    other element of the result is zero. The VJP of `kiln.slice`; its own
    VJP is the slice.

    ```mlir
    %r = kiln.pad %a dim = 1, before = 2 : tensor<4x3xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, I64Attr:$dim, I64Attr:$before);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `,` `before` `=` $before attr-dict `:` type($input)
    `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "int64_t":$dim, "int64_t":$before,
                   "int64_t":$after)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Tensors joined along one dimension";
  let description = [{
    The inputs, in order, along `dim`; they agree on every other dimension
    and on the element type. Its VJP slices the gradient.

    ```mlir
    %r = kiln.concat %a, %b dim = 1
        : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` `(` type($inputs) `)` `->`
    type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "int64_t":$dim)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
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
  let summary = "Scatter-add of gradient rows into a zero table";
  let description = [{
    The VJP of `kiln.embedding` for its table: starts from a zero `[V, D]`
    tensor and adds `grad[..., :]` into row `indices[...]`.

    ```mlir
    %dwte = kiln.embedding_grad %tokens, %g : tensor<2x8xi32>,
        tensor<2x8x16xf32> -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins Kiln_IntTensor:$indices, Kiln_FloatTensor:$grad);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad attr-dict `:` type($indices) `,` type($grad) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, masking
//===----------------------------------------------------------------------===//

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter"]>]> {
  let summary = "Layer normalisation over the last dimension";
  let description = [{
    For input `[..., C]`: `mean` and `rstd = 1/sqrt(var + epsilon)` over the
    last dimension (biased variance), `output = (input - mean) * rstd *
    weight + bias`. `mean` and `rstd` (`[...]`) are results so that the
    backward pass (`kiln.layer_norm_grad`) reuses them.

    ```mlir
    %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
        -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Kiln_FloatTensor:$bias,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$output, Kiln_FloatTensor:$mean,
                      Kiln_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands,
    results)
  }];
  let builders = [
    // Derives (output [..., C], mean [...], rstd [...]).
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   "::mlir::Value":$bias, CArg<"float", "1.0e-5f">:$epsilon)>
  ];
  let hasVerifier = 1;
}

def Kiln_LayerNormGradOp : Kiln_Op<"layer_norm_grad", [
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter"]>]> {
  let summary = "Backward of layer normalisation";
  let description = [{
    Given the forward input, weight, the forward `mean` and `rstd` and the
    output gradient, computes `(input_grad, weight_grad, bias_grad)`.

    ```mlir
    %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %dy
        : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>,
           tensor<2x4xf32>, tensor<2x4x8xf32>)
        -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Kiln_FloatTensor:$mean, Kiln_FloatTensor:$rstd,
                       Kiln_FloatTensor:$grad);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$weight_grad,
                      Kiln_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $mean `,` $rstd `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
  let builders = [
    // Derives (input_grad = type(input), weight_grad = bias_grad =
    // type(weight)).
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   "::mlir::Value":$mean, "::mlir::Value":$rstd,
                   "::mlir::Value":$grad)>
  ];
  let hasVerifier = 1;
}

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter"]>]> {
  let summary = "RMS normalisation over the last dimension";
  let description = [{
    For input `[..., C]`: `rstd = 1/sqrt(mean(input^2) + epsilon)` over the
    last dimension and `output = input * rstd * weight` (Llama's RMSNorm, no
    centering, no bias). `rstd` (`[...]`) is a result so that the backward
    (`kiln.rms_norm_grad`) reuses it.

    ```mlir
    %y, %rstd = kiln.rms_norm %x, %w {epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$output, Kiln_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    // Derives (output [..., C], rstd [...]).
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   CArg<"float", "1.0e-5f">:$epsilon)>
  ];
  let hasVerifier = 1;
}

def Kiln_RmsNormGradOp : Kiln_Op<"rms_norm_grad", [
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter"]>]> {
  let summary = "Backward of RMS normalisation";
  let description = [{
    Given the forward input, weight and `rstd` and the output gradient,
    computes `(input_grad, weight_grad)`: with `xhat = input * rstd` and
    `dxhat = grad * weight`, `input_grad = rstd * (dxhat - xhat *
    mean(dxhat * xhat))` per row and `weight_grad = sum over rows of grad *
    xhat`.

    ```mlir
    %dx, %dw = kiln.rms_norm_grad %x, %w, %rstd, %dy
        : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>)
        -> (tensor<2x4x8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Kiln_FloatTensor:$rstd, Kiln_FloatTensor:$grad);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $rstd `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
  let builders = [
    // Derives (input_grad = type(input), weight_grad = type(weight)).
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   "::mlir::Value":$rstd, "::mlir::Value":$grad)>
  ];
  let hasVerifier = 1;
}

def Kiln_RopeOp : Kiln_Op<"rope", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Rotary position embedding (Llama / Hugging Face convention)";
  let description = [{
    For input `[..., T, D]` (D even): position `t` is the index along the
    second-to-last dimension and feature `i < D/2` pairs with `i + D/2`
    (Hugging Face's rotate_half). With `a = t * inv_freq[i]`:
      `out[i]       = x[i] cos a - x[i + D/2] sin a`
      `out[i + D/2] = x[i + D/2] cos a + x[i] sin a`
    `inv_freq` holds the D/2 frequencies, computed by the compiler from
    theta and any frequency scaling (Llama 3.1's), so the kernel computes
    only `t * inv_freq[i]` and its sine and cosine (in float, as Hugging Face
    does). `inverse` rotates by `-a`: the transposed rotation, which is the
    op's VJP.

    ```mlir
    %q2 = kiln.rope %q {inv_freq = array<f32: 1.0, 0.01>} : tensor<2x4x16x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, DenseF32ArrayAttr:$inv_freq,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_SoftmaxOp : Kiln_Op<"softmax", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>, RowOpInterface]> {
  let summary = "Softmax over the last dimension";
  let description = [{
    `result = exp(x - max(x)) / sum(exp(x - max(x)))` along the last
    dimension (max-subtracted, so large scores do not overflow).

    ```mlir
    %p = kiln.softmax %scores : tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_SoftmaxGradOp : Kiln_Op<"softmax_grad", [SameOperandsAndResultType,
    RowOpInterface]> {
  let summary = "Backward of softmax over the last dimension";
  let description = [{
    `dx = y * (dy - sum(dy * y, last))` where `y` is the softmax output.

    ```mlir
    %dx = kiln.softmax_grad %p, %dp : tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$output, Kiln_FloatTensor:$grad);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_CausalMaskOp : Kiln_Op<"causal_mask", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Replace future positions with a fill value";
  let description = [{
    For input `[..., T, S]`, element `(i, j)` with `j > i + (S - T)` becomes
    `fill` (-inf before a softmax; 0 in its VJP); the others are copied.

    ```mlir
    %m = kiln.causal_mask %s fill = 0xFF800000 : tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$fill);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `fill` `=` $fill attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Kiln_CrossEntropyOp : Kiln_Op<"cross_entropy", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<RowOpInterface, ["hasRowEpilogue"]>]> {
  let summary = "Mean softmax cross-entropy";
  let description = [{
    For logits `[..., V]` and integer targets `[...]`: the mean over all
    positions of `-log(softmax(logits)[target])`, as a rank-0 f32 tensor.

    With `valid_classes = C` (`0 < C <= V`; set by --kiln-pad-dims when it
    padded the class dimension), only classes `< C` take part: classes
    `>= C` get probability 0 (they are left out of the softmax sum) and a
    target `>= C` counts as an ignored position (loss 0), like one `>= V`.

    ```mlir
    %loss = kiln.cross_entropy %logits, %targets
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    %padded = kiln.cross_entropy %logits, %targets {valid_classes = 50 : i64}
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IntTensor:$targets,
                       OptionalAttr<I64Attr>:$valid_classes);
  let results = (outs Kiln_F32Scalar:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$logits, "::mlir::Value":$targets)>
  ];
  let hasVerifier = 1;
}

def Kiln_CrossEntropyGradOp : Kiln_Op<"cross_entropy_grad", [
    AllTypesMatch<["logits", "result"]>, RowOpInterface]> {
  let summary = "Backward of the mean softmax cross-entropy";
  let description = [{
    `(softmax(logits) - onehot(targets)) * grad / N` where `N` is the number
    of positions (the element count of `targets`). With `valid_classes = C`
    (as on the forward op) the softmax runs over classes `< C` only and the
    gradient of every class `>= C` is exactly 0, so padded rows of a tied
    embedding never receive gradient.

    ```mlir
    %dlogits = kiln.cross_entropy_grad %logits, %targets, %g
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IntTensor:$targets,
                       Kiln_F32Scalar:$grad,
                       OptionalAttr<I64Attr>:$valid_classes);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` type($logits) `,`
    type($targets)
  }];
  let hasVerifier = 1;
}

def Kiln_LinearCrossEntropyOp : Kiln_Op<"linear_cross_entropy", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Mean softmax cross-entropy of x @ w^T, logits never stored";
  let description = [{
    `cross_entropy(x @ transpose(w), targets)` for x `[N, D]`, w `[V, D]`
    (the output layer, often the tied embedding) and targets `[N]`, with
    `valid_classes` as on kiln.cross_entropy. Formed by
    --kiln-fuse-linear-cross-entropy and lowered by
    --kiln-expand-linear-cross-entropy into chunks of `chunk_rows` rows:
    the `[N, V]` logits exist one `[chunk_rows, V]` block at a time. Its VJP
    is kiln.linear_cross_entropy_grad.

    ```mlir
    %loss = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 512 : i64}
        : tensor<4096x64xf32>, tensor<32000x64xf32>, tensor<4096xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$x, Kiln_FloatTensor:$w,
                       Kiln_IntTensor:$targets, I64Attr:$chunk_rows,
                       OptionalAttr<I64Attr>:$valid_classes);
  let results = (outs Kiln_F32Scalar:$result);
  let assemblyFormat = [{
    $x `,` $w `,` $targets attr-dict `:` type($x) `,` type($w) `,`
    type($targets)
  }];
  let hasVerifier = 1;
}

def Kiln_LinearCrossEntropyGradOp : Kiln_Op<"linear_cross_entropy_grad", [
    AllTypesMatch<["x", "x_grad"]>, AllTypesMatch<["w", "w_grad"]>]> {
  let summary = "Gradients of kiln.linear_cross_entropy";
  let description = [{
    With `p = softmax(x @ w^T)` over the valid classes and `d = (p -
    onehot(targets)) * grad / N` (`[N, V]`, never stored whole):
    `x_grad = d @ w` and `w_grad = d^T @ x`, computed chunk by chunk like
    the forward.

    ```mlir
    %dx, %dw = kiln.linear_cross_entropy_grad %x, %w, %t, %g
        {chunk_rows = 512 : i64}
        : tensor<4096x64xf32>, tensor<32000x64xf32>, tensor<4096xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$x, Kiln_FloatTensor:$w,
                       Kiln_IntTensor:$targets, Kiln_F32Scalar:$grad,
                       I64Attr:$chunk_rows,
                       OptionalAttr<I64Attr>:$valid_classes);
  let results = (outs Kiln_FloatTensor:$x_grad, Kiln_FloatTensor:$w_grad);
  let assemblyFormat = [{
    $x `,` $w `,` $targets `,` $grad attr-dict `:` type($x) `,` type($w) `,`
    type($targets)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$w,
                   "::mlir::Value":$targets, "::mlir::Value":$grad,
                   "int64_t":$chunkRows, "::mlir::IntegerAttr":$validClasses), [{
      build($_builder, $_state, x.getType(), w.getType(), x, w, targets, grad,
            chunkRows, validClasses);
    }]>
  ];
  let hasVerifier = 1;
}

// The optimizer ops (gradient accumulation, clipping scale, parameter
// updates) are in their own file.
include "ir/KilnOptimizerOps.td"

// kiln.attention / kiln.attention_grad (score and mask regions).
include "ir/KilnAttentionOps.td"

// kiln.fusion (the kernels chosen by --kiln-fusion) and its kiln.yield.
include "ir/KilnFusionOps.td"

#endif // KILN_OPS_TD
