// RUN: kiln-opt %s --split-input-file --kiln-optimizer | FileCheck %s

// Tests that one parameter gets adam_m/adam_v/lr/step arguments, a grad
// norm, one kiln.adamw with the kiln.train hyperparameters, and results in
// the order loss, grad, grad_norm, param, adam_m, adam_v.
// CHECK-LABEL: func.func @one_param
module attributes {kiln.train = {batch = 2 : i64, seq = 4 : i64,
    optimizer = "adamw", beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  func.func @one_param(
      %w: tensor<4x8xf32> {kiln.role = "param", kiln.name = "w"},
      %x: tensor<4x8xf32> {kiln.role = "input", kiln.name = "x"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<4x8xf32> {kiln.role = "grad", kiln.name = "w"}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %1, %x : tensor<f32>, tensor<4x8xf32>
  }
}


// CHECK-SAME: %[[W:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = "param"}
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {kiln.name = "x", kiln.role = "input"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = "adam_m"}
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = "adam_v"}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {kiln.name = "lr", kiln.role = "lr"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {kiln.name = "step", kiln.role = "step"})
// CHECK-SAME: -> (tensor<f32> {kiln.role = "loss"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = "grad"},
// CHECK-SAME: tensor<f32> {kiln.name = "grad_norm", kiln.role = "grad_norm"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = "param"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = "adam_m"},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = "adam_v"})
// CHECK: %[[LOSS:.*]] = kiln.reduce_sum
// CHECK: %[[SQ:.*]] = kiln.mul %[[X]], %[[X]] : tensor<4x8xf32>
// CHECK: %[[SS:.*]] = kiln.reduce_sum %[[SQ]] dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
// CHECK: %[[NORM:.*]] = kiln.sqrt %[[SS]] : tensor<f32>
// CHECK: %[[P:.*]], %[[M1:.*]], %[[V1:.*]] = kiln.adamw %[[W]], %[[X]], %[[M]], %[[V]], %[[LR]], %[[STEP]]
// CHECK-SAME: beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999993E-9 : f32, weight_decay = 1.000000e-01 : f32
// CHECK: return %[[LOSS]], %[[X]], %[[NORM]], %[[P]], %[[M1]], %[[V1]]
// -----

// Tests that with two parameters (one rank 0) the state arguments come as
// adam_m..., adam_v..., lr, step, the grad norm sums both squared gradients,
// and the results are grouped by role in parameter order.
// CHECK-LABEL: func.func @two_params
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.999 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0 : i64}} {
  func.func @two_params(
      %a: tensor<3xf32> {kiln.role = "param", kiln.name = "a"},
      %s: tensor<f32> {kiln.role = "param", kiln.name = "s"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<3xf32> {kiln.role = "grad", kiln.name = "a"},
          tensor<f32> {kiln.role = "grad", kiln.name = "s"}) {
    %0 = kiln.reduce_sum %a dims = [0] : tensor<3xf32> -> tensor<f32>
    %1 = kiln.mul %0, %s : tensor<f32>
    return %1, %a, %0 : tensor<f32>, tensor<3xf32>, tensor<f32>
  }
}

// CHECK-SAME: %arg0: tensor<3xf32> {kiln.name = "a", kiln.role = "param"}, %arg1: tensor<f32> {kiln.name = "s", kiln.role = "param"},
// CHECK-SAME: %arg2: tensor<3xf32> {kiln.name = "a", kiln.role = "adam_m"}, %arg3: tensor<f32> {kiln.name = "s", kiln.role = "adam_m"},
// CHECK-SAME: %arg4: tensor<3xf32> {kiln.name = "a", kiln.role = "adam_v"}, %arg5: tensor<f32> {kiln.name = "s", kiln.role = "adam_v"},
// CHECK-SAME: %arg6: tensor<f32> {kiln.name = "lr", kiln.role = "lr"}, %arg7: tensor<f32> {kiln.name = "step", kiln.role = "step"})
// CHECK-SAME: -> (tensor<f32> {kiln.role = "loss"},
// CHECK-SAME: {kiln.name = "a", kiln.role = "grad"}, tensor<f32> {kiln.name = "s", kiln.role = "grad"},
// CHECK-SAME: {kiln.name = "grad_norm", kiln.role = "grad_norm"},
// CHECK-SAME: {kiln.name = "a", kiln.role = "param"}, tensor<f32> {kiln.name = "s", kiln.role = "param"},
// CHECK-SAME: {kiln.name = "a", kiln.role = "adam_m"}, tensor<f32> {kiln.name = "s", kiln.role = "adam_m"},
// CHECK-SAME: {kiln.name = "a", kiln.role = "adam_v"}, tensor<f32> {kiln.name = "s", kiln.role = "adam_v"})
// CHECK: %[[GS:.*]] = kiln.reduce_sum %arg0 dims = [0]
// CHECK: %[[SQA:.*]] = kiln.mul %arg0, %arg0 : tensor<3xf32>
// CHECK: %[[SSA:.*]] = kiln.reduce_sum %[[SQA]] dims = [0] : tensor<3xf32> -> tensor<f32>
// CHECK: %[[SQS:.*]] = kiln.mul %[[GS]], %[[GS]] : tensor<f32>
// CHECK: %[[SUM:.*]] = kiln.add %[[SSA]], %[[SQS]] : tensor<f32>
// CHECK: %[[NORM:.*]] = kiln.sqrt %[[SUM]]
// CHECK: %[[PA:.*]], %[[MA:.*]], %[[VA:.*]] = kiln.adamw %arg0, %arg0, %arg2, %arg4, %arg6, %arg7
// CHECK-SAME: weight_decay = 0.000000e+00 : f32
// CHECK: %[[PS:.*]], %[[MS:.*]], %[[VS:.*]] = kiln.adamw %arg1, %[[GS]], %arg3, %arg5, %arg6, %arg7
// CHECK: return %{{.*}}, %arg0, %[[GS]], %[[NORM]], %[[PA]], %[[PS]], %[[MA]], %[[MS]], %[[VA]], %[[VS]]
