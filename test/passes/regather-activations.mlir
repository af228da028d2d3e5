// RUN: kiln-opt %s --split-input-file --kiln-regather-activations | FileCheck %s

// Tests that an activation all-gathered over a tensor axis in the forward
// and read by the backward (the weight gradient) is gathered again there
// from the rank's part, through the transposes of the reshard and the
// reshape the gradient's GEMM reads, while the forward keeps its own
// gather; a gather over the data axis is
// ZeRO-3's business (--kiln-gather-params).
// CHECK-LABEL: func.func @step
// CHECK: %[[G:.*]] = kiln.all_gather %[[H:[^ ]*]] over "model" dim = 0 {reason = "gather"} : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// CHECK-NEXT: %[[W:.*]] = kiln.transpose %[[G]]
// CHECK: kiln.matmul %[[W]], %arg1 :
// CHECK: %[[G2:.*]] = kiln.all_gather %[[H]] over "model" dim = 0 {reason = "gather; gathered again for the backward"} : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// CHECK-NEXT: %[[W2:.*]] = kiln.transpose %[[G2]]
// CHECK-NEXT: %[[R2:.*]] = kiln.reshape %[[W2]]
// CHECK-NEXT: kiln.matmul %[[R2]], %{{.*}} {transpose_lhs = true}
// CHECK-NOT: kiln.all_gather
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<2x4x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %arg1: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<16x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %t = kiln.transpose %arg0 permutation = [1, 0, 2] : tensor<2x4x16xf32> -> tensor<4x2x16xf32>
    %g = kiln.all_gather %t over "model" dim = 0 {reason = "gather"} : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
    %h = kiln.transpose %g permutation = [1, 0, 2] : tensor<8x2x16xf32> -> tensor<2x8x16xf32>
    %y = kiln.matmul %h, %arg1 : tensor<2x8x16xf32>, tensor<16x8xf32> -> tensor<2x8x8xf32>
    %l = kiln.reduce_sum %y dims = [0, 1, 2] : tensor<2x8x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.0> : tensor<2x8x8xf32>
    %h2 = kiln.reshape %h : tensor<2x8x16xf32> -> tensor<16x16xf32>
    %s2 = kiln.reshape %seed : tensor<2x8x8xf32> -> tensor<16x8xf32>
    %dw = kiln.matmul %h2, %s2 {transpose_lhs = true} : tensor<16x16xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
    return %l, %dw : tensor<f32>, tensor<16x8xf32>
  }
}
