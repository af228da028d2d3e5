// RUN: kiln-opt %s --split-input-file --kiln-expand-linear-cross-entropy | FileCheck %s

// Tests that a linear_cross_entropy and its grad op whose upstream gradient
// is a constant are computed in one pass over the chunks at the forward op
// (rows [0, 4), [4, 8), [8, 10)): per chunk the slices, the logits GEMM,
// the gradient with the upstream gradient weighted by rows / N and, from
// the same op (one read of the logits), the chunk's loss, weighted alike,
// dx_c = d_c @ w, and dw summed by accumulating GEMMs. No separate
// cross_entropy reads the logits.
// CHECK-LABEL: func.func @step
// CHECK: %[[X0:.*]] = kiln.slice %arg1 dim = 0, start = 0 : tensor<10x8xf32> -> tensor<4x8xf32>
// CHECK: %[[T0:.*]] = kiln.slice %arg2 dim = 0, start = 0
// CHECK: %[[L0:.*]] = kiln.matmul %[[X0]], %arg0 {transpose_rhs = true} : tensor<4x8xf32>, tensor<64x8xf32> -> tensor<4x64xf32>
// CHECK-NOT: kiln.cross_entropy %
// CHECK: %[[D0:.*]], %[[LOSS0:.*]] = kiln.cross_entropy_grad %[[L0]], %[[T0]], %{{.*}} with loss tensor<f32> {valid_classes = 60 : i64}
// CHECK: kiln.mul %[[LOSS0]], %{{.*}} : tensor<f32>
// CHECK: %[[DX0:.*]] = kiln.matmul %[[D0]], %arg0 : tensor<4x64xf32>, tensor<64x8xf32> -> tensor<4x8xf32>
// CHECK: %[[DW0:.*]] = kiln.matmul %[[D0]], %[[X0]] {transpose_lhs = true} : tensor<4x64xf32>, tensor<4x8xf32> -> tensor<64x8xf32>
// CHECK: kiln.slice %arg1 dim = 0, start = 4
// CHECK: %[[DW1:.*]] = kiln.matmul_accumulate %[[DW0]], {{.*}} {transpose_lhs = true}
// CHECK: kiln.slice %arg1 dim = 0, start = 8 : tensor<10x8xf32> -> tensor<2x8xf32>
// CHECK: %[[DW2:.*]] = kiln.matmul_accumulate %[[DW1]], {{.*}} {transpose_lhs = true}
// CHECK: %[[DX:.*]] = kiln.concat %[[DX0]], %{{.*}}, %{{.*}} dim = 0
// CHECK-NOT: linear_cross_entropy
// CHECK-NOT: kiln.cross_entropy %
// CHECK: return %{{.*}}, %[[DX]], %[[DW2]]
func.func @step(%w: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %x: tensor<10x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %t: tensor<10xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<10x8xf32>, tensor<64x8xf32>) {
  %loss = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 4 : i64, valid_classes = 60 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  %g = kiln.constant dense<1.0> : tensor<f32>
  %dx, %dw = kiln.linear_cross_entropy_grad %x, %w, %t, %g {chunk_rows = 4 : i64, valid_classes = 60 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  return %loss, %dx, %dw : tensor<f32>, tensor<10x8xf32>, tensor<64x8xf32>
}

// -----

// Tests that a grad op whose upstream gradient is computed after the forward
// op is expanded where it is, recomputing the logits (no loss there).
// CHECK-LABEL: func.func @step
// CHECK: kiln.cross_entropy
// CHECK-NOT: kiln.cross_entropy_grad
// CHECK: kiln.mul %{{.*}}, %{{.*}} : tensor<f32>
// CHECK: kiln.exp
// CHECK: kiln.matmul {{.*}} {transpose_rhs = true}
// CHECK-NOT: kiln.cross_entropy %
// CHECK: kiln.cross_entropy_grad
func.func @step(%w: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %x: tensor<10x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %t: tensor<10xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<10x8xf32>, tensor<64x8xf32>) {
  %loss = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 10 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  %g = kiln.exp %loss : tensor<f32>
  %dx, %dw = kiln.linear_cross_entropy_grad %x, %w, %t, %g {chunk_rows = 10 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  return %loss, %dx, %dw : tensor<f32>, tensor<10x8xf32>, tensor<64x8xf32>
}

// -----

// Tests that an upstream gradient computed after the forward op from values
// available before it (under sequence parallelism: the loss cotangent times
// 1 / ranks, `mul(1, 0.5)` after the mean over the tensor axis) is cloned
// before it, so one loop still computes the loss and both gradients and
// the logits are not recomputed.
// CHECK-LABEL: func.func @step
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00>
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01>
// CHECK: %[[G:.*]] = kiln.mul %[[ONE]], %[[HALF]] : tensor<f32>
// CHECK: kiln.matmul {{.*}} {transpose_rhs = true}
// CHECK: kiln.cross_entropy_grad {{.*}} with loss
// CHECK-NOT: kiln.matmul {{.*}} {transpose_rhs = true}
// CHECK: return
func.func @step(%w: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %x: tensor<10x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %t: tensor<10xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<10x8xf32>, tensor<64x8xf32>) {
  %one = kiln.constant dense<1.0> : tensor<f32>
  %half = kiln.constant dense<0.5> : tensor<f32>
  %loss = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 10 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  %g = kiln.mul %one, %half : tensor<f32>
  %dx, %dw = kiln.linear_cross_entropy_grad %x, %w, %t, %g {chunk_rows = 10 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
  return %loss, %dx, %dw : tensor<f32>, tensor<10x8xf32>, tensor<64x8xf32>
}
