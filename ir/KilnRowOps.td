//===- KilnRowOps.td - Normalisation, softmax, masking -----*- tablegen -*-===//
//
// The row ops (each output row from one input row): layer_norm, rms_norm
// and their gradients, rope, softmax and its gradient, causal_mask.
// Included by KilnOps.td (same generated files).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ROW_OPS_TD
#define KILN_ROW_OPS_TD

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter", "hasElementEpilogue"]>]> {
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
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter", "hasElementEpilogue"]>]> {
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
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter", "hasElementEpilogue"]>]> {
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
    DeclareOpInterfaceMethods<RowOpInterface, ["isNormalizationParameter", "hasElementEpilogue"]>]> {
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

def Kiln_RopeOp : Kiln_Op<"rope", [
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

    Where q and k are produced (--kiln-fuse-rope, after mixed precision),
    the op also takes over the transposes and precision casts around it, so
    that one pass reads the GEMM's output and writes what attention reads:
    `input_permutation` reads the input through `kiln.transpose` (the
    rotation applies to `transpose(input, input_permutation)`),
    `result_permutation` writes the rotation transposed, and the input and
    result element types may differ (f32 / bf16; the rotation is computed in
    float, the result rounded once). Both permutations keep the last
    dimension in place.

    ```mlir
    %q2 = kiln.rope %q {inv_freq = array<f32: 1.0, 0.01>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
    %q3 = kiln.rope %p {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.0, 0.01>}
        : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, DenseF32ArrayAttr:$inv_freq,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse,
                       OptionalAttr<DenseI64ArrayAttr>:$input_permutation,
                       OptionalAttr<DenseI64ArrayAttr>:$result_permutation);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [
    // The plain rotation: no permutations.
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input,
                   "::mlir::DenseF32ArrayAttr":$inv_freq, "bool":$inverse), [{
      build($_builder, $_state, result, input, inv_freq,
            $_builder.getBoolAttr(inverse), nullptr, nullptr);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The shape the rotation works in: the input's shape, permuted by
    /// input_permutation when there is one ([..., T, D]).
    ::llvm::SmallVector<int64_t> getRotatedShape();
  }];
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

#endif // KILN_ROW_OPS_TD
