//===- KilnOptimizerOps.td - Accumulation, clipping, updates -*- tablegen -*-===//
//
// The ops of the training step that are not part of the model: gradient
// accumulation across micro-batches, the clipping scale with its non-finite
// guard, and one update op per optimizer. Included by KilnOps.td (same
// generated files); verifiers in ir/KilnOptimizerOps.cpp.
//
// Every update op takes the `scale` computed by kiln.grad_scale and must do
// nothing at all when it is not finite (the step is skipped). Each also yields
// `sum((p_new - p_old)^2)` and `sum(p_new^2)` so the update and parameter
// norms are reported without another pass over the parameters. Codegen updates
// the parameter and its optimizer state in place.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPTIMIZER_OPS_TD
#define KILN_OPTIMIZER_OPS_TD

def Kiln_AccumulateOp : Kiln_Op<"accumulate", [SameOperandsAndResultType]> {
  let summary = "acc + value * scale, in place on the accumulator";
  let description = [{
    Adds one micro-batch's contribution to an accumulator: `result = acc +
    value * scale` (with `scale = 1 / grad_accum`). Codegen writes the result
    into the accumulator's buffer, so the accumulator (a function argument
    zeroed by the runtime before the first micro-step) must not be read after
    this op.

    ```mlir
    %g1 = kiln.accumulate %acc, %g {scale = 2.500000e-01 : f32} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$acc, Kiln_FloatTensor:$value,
                       F32Attr:$scale);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$acc `,` $value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_GradScaleOp : Kiln_Op<"grad_scale"> {
  let summary = "The factor every update multiplies the gradient by";
  let description = [{
    NaN when `loss` or `grad_norm` is not finite (the non-finite guard: every
    update op then does nothing); otherwise `min(1, max_norm / (grad_norm +
    1e-6))` when `max_norm > 0` (PyTorch's clip_grad_norm_), else 1.

    ```mlir
    %s = kiln.grad_scale %norm, %loss {max_norm = 1.000000e+00 : f32}
    ```
  }];
  let arguments = (ins Kiln_F32Scalar:$grad_norm, Kiln_F32Scalar:$loss,
                       F32Attr:$max_norm);
  let results = (outs Kiln_F32Scalar:$result);
  let assemblyFormat = "$grad_norm `,` $loss attr-dict";
  let hasVerifier = 1;
}

def Kiln_AdamOp : Kiln_Op<"adam", [
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>
  ]> {
  let summary = "One Adam or AdamW update of a parameter and its moments";
  let description = [{
    With `g = grad * scale`, `t = step` (1-based) and `wd = weight_decay`:
    ```
    g = g + wd * p                      (Adam: decoupled_weight_decay = false)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    p = p - lr * wd * p                 (AdamW: decoupled_weight_decay = true)
        - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
    ```
    Nothing is written when `scale` is not finite. `update_sq` is
    `sum((p_new - p_old)^2)` and `param_sq` is `sum(p_new^2)` (0 and the old
    parameter's when skipped).

    ```mlir
    %p1, %m1, %v1, %du, %pp = kiln.adam %p, %g, %m, %v, %lr, %step, %scale
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
         epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$m, Kiln_FloatTensor:$v,
                       Kiln_F32Scalar:$lr, Kiln_F32Scalar:$step,
                       Kiln_F32Scalar:$scale,
                       F32Attr:$beta1, F32Attr:$beta2, F32Attr:$epsilon,
                       F32Attr:$weight_decay, BoolAttr:$decoupled_weight_decay);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_m,
                      Kiln_FloatTensor:$new_v, Kiln_F32Scalar:$update_sq,
                      Kiln_F32Scalar:$param_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $scale attr-dict `:`
    type($param)
  }];
  let hasVerifier = 1;
}

def Kiln_SgdOp : Kiln_Op<"sgd", [
    AllTypesMatch<["param", "grad", "new_param"]>]> {
  let summary = "One plain SGD update (no momentum)";
  let description = [{
    With `g = grad * scale + weight_decay * param`: `p = p - lr * g`.
    Nothing is written when `scale` is not finite. `update_sq` and `param_sq`
    as for kiln.adam.

    ```mlir
    %p1, %du, %pp = kiln.sgd %p, %g, %lr, %scale {weight_decay = 0.0 : f32}
        : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_F32Scalar:$lr, Kiln_F32Scalar:$scale,
                       F32Attr:$weight_decay);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_F32Scalar:$update_sq,
                      Kiln_F32Scalar:$param_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr `,` $scale attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Kiln_SgdMomentumOp : Kiln_Op<"sgd_momentum", [
    AllTypesMatch<["param", "grad", "buf", "new_param", "new_buf"]>]> {
  let summary = "One SGD update with a momentum buffer (torch.optim.SGD)";
  let description = [{
    With `g = grad * scale + weight_decay * param` and `t = step` (1-based):
    ```
    buf = t == 1 ? g : momentum * buf + (1 - dampening) * g
    d   = nesterov ? g + momentum * buf : buf
    p   = p - lr * d
    ```
    Nothing is written when `scale` is not finite. `update_sq` and `param_sq`
    as for kiln.adam.

    ```mlir
    %p1, %b1, %du, %pp = kiln.sgd_momentum %p, %g, %buf, %lr, %step, %scale
        {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = true,
         weight_decay = 0.0 : f32} : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$buf, Kiln_F32Scalar:$lr,
                       Kiln_F32Scalar:$step, Kiln_F32Scalar:$scale,
                       F32Attr:$momentum, F32Attr:$dampening,
                       BoolAttr:$nesterov, F32Attr:$weight_decay);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_buf,
                      Kiln_F32Scalar:$update_sq, Kiln_F32Scalar:$param_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `,` $lr `,` $step `,` $scale attr-dict `:`
    type($param)
  }];
  let hasVerifier = 1;
}

#endif // KILN_OPTIMIZER_OPS_TD
