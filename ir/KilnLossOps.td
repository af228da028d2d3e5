//===- KilnLossOps.td - Losses -----------------------------*- tablegen -*-===//
//
// cross_entropy and its gradient, and the fused head and loss
// linear_cross_entropy (logits in row chunks) with its gradient. Included
// by KilnOps.td (same generated files).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LOSS_OPS_TD
#define KILN_LOSS_OPS_TD

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

def Kiln_CrossEntropyGradOp : Kiln_Op<"cross_entropy_grad", [RowOpInterface]> {
  let summary = "Backward of the mean softmax cross-entropy";
  let description = [{
    `(softmax(logits) - onehot(targets)) * grad / N` where `N` is the number
    of positions (the element count of `targets`). With `valid_classes = C`
    (as on the forward op) the softmax runs over classes `< C` only and the
    gradient of every class `>= C` is exactly 0, so padded rows of a tied
    embedding never receive gradient.

    The result has the logits' shape and, unless another element type
    follows `->`, their element type; a bf16 result (set by
    --kiln-mixed-precision when only bf16 GEMMs read the gradient) is the
    fp32 gradient rounded once, so the fp32 `[N, V]` gradient is never
    stored.

    With a second result `loss` (`with loss` in the syntax), the same
    kernel also computes `kiln.cross_entropy` of the same logits and
    targets (identical semantics and, on CUDA, identical bits: the row
    statistics the gradient needs are the loss's), so a loop that needs
    both (--kiln-expand-linear-cross-entropy's chunks) reads the logits
    for them once instead of twice.

    ```mlir
    %dlogits = kiln.cross_entropy_grad %logits, %targets, %g
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    %dlogits16 = kiln.cross_entropy_grad %logits, %targets, %g
        : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
    %d, %loss = kiln.cross_entropy_grad %logits, %targets, %g with loss
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IntTensor:$targets,
                       Kiln_F32Scalar:$grad,
                       OptionalAttr<I64Attr>:$valid_classes);
  let results = (outs Kiln_FloatTensor:$result,
                      Optional<Kiln_F32Scalar>:$loss);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad (`with` `loss` type($loss)^)? attr-dict `:`
    type($logits) `,` type($targets)
    custom<ResultTypeIfOther>(ref(type($logits)), type($result))
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

#endif // KILN_LOSS_OPS_TD
