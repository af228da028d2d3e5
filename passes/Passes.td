//===- Passes.td - Kiln compiler passes ----------------------*- tablegen -*-===//
//
// Every pass of the Kiln compiler, one file each in passes/. The pipeline that
// orders them is written down once, in passes/Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnAutodiff : Pass<"kiln-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff of the loss function (appends gradients)";
  let description = [{
    Differentiates the function whose single result has `kiln.role = "loss"`
    with respect to its `kiln.role = "param"` arguments. The body is walked
    backwards from the return; each op that carries a cotangent builds its
    vector-Jacobian product through `DifferentiableOpInterface`. Fan-out is
    accumulated with `kiln.add`. For every parameter, in argument order, a
    result `kiln.role = "grad"` named after the parameter is appended;
    parameters with no path to the loss get a zero constant. Integer values
    (token ids, targets) are never differentiated.

    Before:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = "param", kiln.name = "w"},
                    %x: tensor<4xf32> {kiln.role = "input", kiln.name = "x"})
        -> (tensor<f32> {kiln.role = "loss"}) {
      %0 = kiln.mul %w, %x : tensor<4xf32>
      %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```

    After:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = "param", kiln.name = "w"},
                    %x: tensor<4xf32> {kiln.role = "input", kiln.name = "x"})
        -> (tensor<f32> {kiln.role = "loss"},
            tensor<4xf32> {kiln.name = "w", kiln.role = "grad"}) {
      %0 = kiln.mul %w, %x : tensor<4xf32>
      %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
      %one = kiln.constant dense<1.0> : tensor<f32>             // d loss / d loss
      %2 = kiln.broadcast %one dims = [] : tensor<f32> -> tensor<4xf32>
      %3 = kiln.mul %2, %x : tensor<4xf32>                       // d loss / d w
      return %1, %3 : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnOptimizer : Pass<"kiln-optimizer", "::mlir::ModuleOp"> {
  let summary = "Appends the optimizer update (AdamW) and the gradient norm";
  let description = [{
    Reads the module attribute `kiln.train` (`optimizer = "adamw"`, `beta1`,
    `beta2`, `epsilon`, `weight_decay`) and, in the loss function produced by
    `--kiln-autodiff`, appends the optimizer state arguments (`adam_m` then
    `adam_v` per parameter, then `lr` and `step`, all with `kiln.role` and
    `kiln.name`), computes `grad_norm = sqrt(sum_g reduce_sum(g * g))`, and
    emits one `kiln.adamw` per parameter. The results become: loss, grads...,
    grad_norm, params..., adam_m..., adam_v... (consumers look them up by
    role and name).

    Before (after `--kiln-autodiff`):
    ```mlir
    module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
        beta2 = 0.95 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.1 : f32}} {
      func.func @step(%w: tensor<4xf32> {kiln.role = "param", kiln.name = "w"})
          -> (tensor<f32> {kiln.role = "loss"},
              tensor<4xf32> {kiln.role = "grad", kiln.name = "w"}) {
        ...
        return %loss, %dw : tensor<f32>, tensor<4xf32>
      }
    }
    ```

    After:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = "param", kiln.name = "w"},
                    %m: tensor<4xf32> {kiln.role = "adam_m", kiln.name = "w"},
                    %v: tensor<4xf32> {kiln.role = "adam_v", kiln.name = "w"},
                    %lr: tensor<f32> {kiln.role = "lr", kiln.name = "lr"},
                    %t: tensor<f32> {kiln.role = "step", kiln.name = "step"})
        -> (tensor<f32> {kiln.role = "loss"},
            tensor<4xf32> {kiln.role = "grad", kiln.name = "w"},
            tensor<f32> {kiln.role = "grad_norm", kiln.name = "grad_norm"},
            tensor<4xf32> {kiln.role = "param", kiln.name = "w"},
            tensor<4xf32> {kiln.role = "adam_m", kiln.name = "w"},
            tensor<4xf32> {kiln.role = "adam_v", kiln.name = "w"}) {
      ...
      %sq = kiln.mul %dw, %dw : tensor<4xf32>
      %ss = kiln.reduce_sum %sq dims = [0] : tensor<4xf32> -> tensor<f32>
      %norm = kiln.sqrt %ss : tensor<f32>
      %p, %m1, %v1 = kiln.adamw %w, %dw, %m, %v, %lr, %t {beta1 = 0.9 : f32, ...}
      return %loss, %dw, %norm, %p, %m1, %v1 : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // KILN_PASSES_TD
