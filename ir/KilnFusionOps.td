//===- KilnFusionOps.td - Kernel groups chosen by fusion -*- tablegen -*-===//
//
// kiln.fusion: the ops of one generated kernel, chosen by --kiln-fusion and
// turned into one kernel by codegen. Included by KilnOps.td (same generated
// files); verifiers in ir/KilnFusionOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUSION_OPS_TD
#define KILN_FUSION_OPS_TD

def Kiln_FusionOp : Kiln_Op<"fusion", [IsolatedFromAbove, SingleBlock]> {
  let summary = "A group of kiln ops that codegen emits as one kernel";
  let description = [{
    The body is one block whose arguments are the kernel's inputs (one per
    operand, same types) and whose `kiln.yield` names the kernel's outputs
    (the op's results, same types). The region is isolated from above: the
    kernel reads nothing it is not given. `kind` (a FusionKind, written as a
    bare keyword) says how codegen lays the kernel out:

    - `pointwise`: one flat loop over the elements, one scalar expression
      per op (elementwise ops, splat constants, iota, broadcasts of inputs);
    - `row`: one row op (layer_norm, softmax, cross_entropy, ...) whose row
      loop first computes its pointwise prologue for the row and ends with
      its pointwise epilogue on the row it just wrote;
    - `optimizer`: several kiln.adam / kiln.sgd / kiln.sgd_momentum updates
      in one multi-tensor kernel; the updated parameter and state results
      are written in place into the buffers of the matching operands;
    - `sum`: pointwise ops as `pointwise`, ending with one
      kiln.reduce_sum of a whole f32 tensor they compute to one value: each
      element is added to the total as it is computed, never stored; or
      several such chains, each reading kernel inputs only and writing only
      its total (the global norm's sum of each gradient's squares: one
      multi-tensor kernel, a segment of the grid per chain);
    - `gemm`: one kiln.matmul, first, and its epilogue (one GEMM call with
      a cuBLASLt epilogue; the CPU applies it after sgemm), chosen by
      --kiln-fuse-gemm-epilogue: a bias add (kiln.broadcast of a [N] vector
      along the rows, kiln.add), kiln.gelu, kiln.gelu_grad (the matmul
      result is the incoming gradient) and kiln.reduce_sum (a bias
      gradient: of the matmul's operand over its k dimension, or of the
      gelu_grad over the rows). Only kiln.broadcast, kiln.add, kiln.gelu,
      kiln.gelu_grad and kiln.reduce_sum may follow the matmul.

    The op's location fuses the model-file locations of its members, so
    kernel names and traces still point at model lines.

    ```mlir
    %sum, %y, %mean, %rstd = kiln.fusion row (%x, %dx, %w, %b)
        : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
        -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<4x8xf32>, %w0: tensor<8xf32>,
         %b0: tensor<8xf32>):
      %s = kiln.add %a, %c : tensor<4x8xf32>
      %n:3 = kiln.layer_norm %s, %w0, %b0 {epsilon = 1.0e-05 : f32}
          : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
          -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
      kiln.yield %s, %n#0, %n#1, %n#2
          : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>
    }
    ```

    A GEMM with a bias and GELU epilogue that also keeps the GELU input
    (`%pre`, the backward's gelu_grad reads it):

    ```mlir
    %y, %pre = kiln.fusion gemm (%x, %w, %b)
        : (tensor<64x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
        -> (tensor<64x128xf32>, tensor<64x128xf32>) {
    ^bb0(%x0: tensor<64x32xf32>, %w0: tensor<32x128xf32>,
         %b0: tensor<128xf32>):
      %p = kiln.matmul %x0, %w0 : tensor<64x32xf32>, tensor<32x128xf32>
          -> tensor<64x128xf32>
      %bb = kiln.broadcast %b0 dims = [1] : tensor<128xf32>
          -> tensor<64x128xf32>
      %s = kiln.add %p, %bb : tensor<64x128xf32>
      %g = kiln.gelu %s : tensor<64x128xf32>
      kiln.yield %g, %s : tensor<64x128xf32>, tensor<64x128xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs,
                       Kiln_FusionKindAttr:$kind);
  let results = (outs Variadic<Kiln_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, results)
    $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Kind "gemm": a kiln.matmul first, then only epilogue ops.
    ::mlir::LogicalResult verifyGemmBody();
  }];
}

def Kiln_YieldOp : Kiln_Op<"yield", [Terminator,
    ParentOneOf<["FusionOp", "AttentionOp", "AttentionGradOp"]>]> {
  let summary = "The outputs of a kiln.fusion kernel or an attention region";
  let description = [{
    Terminates the body of a kiln.fusion; its operands become the fusion
    op's results, in order. Also terminates the score (one f32) and mask
    (one i1) regions of kiln.attention / kiln.attention_grad, whose
    verifiers check those scalar types.

    ```mlir
    kiln.yield %s, %y : tensor<4x8xf32>, tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // KILN_FUSION_OPS_TD
