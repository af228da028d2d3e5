// RUN: kiln-opt %s --split-input-file --kiln-grad-accum | FileCheck %s

// Tests that grad_accum = 4 turns the loss and every grad into accumulators:
// one argument each (same role and name; the loss named "loss"), updated
// with kiln.accumulate {scale = 1/4}; the metric is left alone.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<param>},
// CHECK-SAME: %[[LACC:[^:]*]]: tensor<f32> {kiln.name = "loss", kiln.role = #kiln.role<loss>},
// CHECK-SAME: %[[GACC:[^:]*]]: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss", kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.name = "m", kiln.role = #kiln.role<metric>}, tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK: %[[L:.*]] = kiln.reduce_sum
// CHECK: %[[M:.*]] = kiln.sqrt
// CHECK: %[[LA:.*]] = kiln.accumulate %[[LACC]], %[[L]] {scale = 2.500000e-01 : f32} : tensor<f32>
// CHECK: %[[GA:.*]] = kiln.accumulate %[[GACC]], %[[W]] {scale = 2.500000e-01 : f32} : tensor<4xf32>
// CHECK: return %[[LA]], %[[M]], %[[GA]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, grad_accum = 4>} {
  func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "m"},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    %1 = kiln.sqrt %0 : tensor<f32>
    return %0, %1, %w : tensor<f32>, tensor<f32>, tensor<4xf32>
  }
}

// -----

// Tests that grad_accum = 1 leaves the step function as it is.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{[^:]*}}: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<param>})
// CHECK-NOT: kiln.accumulate
// CHECK: return
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, grad_accum = 1>} {
  func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4xf32>
  }
}
