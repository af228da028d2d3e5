// RUN: kiln-opt %s --split-input-file --kiln-eval-function | FileCheck %s

// Tests that the loss function is cloned into @eval after it: same param and
// input arguments, only the loss (as eval_loss), the metric and the ops that
// only fed it dropped; @step itself is unchanged.
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.name = "w_rms", kiln.role = #kiln.role<metric>})
// CHECK: kiln.sqrt
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>
// CHECK-LABEL: func.func @eval
// CHECK-SAME: (%[[W:[^:]*]]: tensor<4xf32> {kiln.init = #kiln.init<ones>, kiln.name = "w", kiln.role = #kiln.role<param>},
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32> {kiln.name = "x", kiln.role = #kiln.role<input>})
// CHECK-SAME: -> (tensor<f32> {kiln.name = "eval_loss", kiln.role = #kiln.role<eval_loss>})
// CHECK-NEXT: %[[P:.*]] = kiln.mul %[[W]], %[[X]]
// CHECK-NEXT: %[[L:.*]] = kiln.reduce_sum %[[P]]
// CHECK-NEXT: return %[[L]] : tensor<f32>
module {
  func.func @step(
      %w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<ones>},
      %x: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "w_rms"}) {
    %0 = kiln.mul %w, %x : tensor<4xf32>
    %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
    %2 = kiln.mul %w, %w : tensor<4xf32>
    %3 = kiln.reduce_sum %2 dims = [0] : tensor<4xf32> -> tensor<f32>
    %4 = kiln.sqrt %3 : tensor<f32>
    return %1, %4 : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that @eval runs attention without dropout (dropout = 0, the default,
// which the op's text leaves out; the RNG-state capture stays, unread) while
// @step keeps it.
// CHECK-LABEL: func.func @step
// CHECK: kiln.attention {{.*}} {dropout = 2.500000e-01 : f32, scale = 5.000000e-01 : f32}
// CHECK-LABEL: func.func @eval
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} captures(%{{.*}}) {scale = 5.000000e-01 : f32}
module {
  func.func @step(
      %q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "q", kiln.init = #kiln.init<ones>},
      %rng: tensor<2xi64> {kiln.role = #kiln.role<dropout_rng>, kiln.name = "dropout_rng"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %out, %lse = kiln.attention %q, %q, %q captures(%rng) {scale = 0.5 : f32, dropout = 0.25 : f32}
        : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xi64>)
        -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    %l = kiln.reduce_sum %out dims = [0, 1, 2, 3] : tensor<1x2x5x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
