// RUN: kiln-opt %s --split-input-file --kiln-reassociate-bias | FileCheck %s
//
// The sums --kiln-reassociate-bias leaves as they are: reassociating them
// would give no GEMM a bias epilogue, or would change what another reader
// sees.

// Tests that a product also read by another op (an activation metric of the
// branch before its bias) keeps (x + P) + b: no epilogue writes the product
// before the bias.
// CHECK-LABEL: func.func @step
// CHECK: %[[P:.*]] = kiln.matmul
// CHECK: %[[R:.*]] = kiln.add %arg0, %[[P]]
// CHECK: kiln.add %[[R]], %{{.*}} : tensor<4x16xf32>
func.func @step(%x: tensor<4x16xf32>, %y: tensor<4x8xf32>, %w: tensor<8x16xf32>,
                %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %sq = kiln.mul %p, %p : tensor<4x16xf32>
  %r = kiln.add %x, %p : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %o = kiln.add %r, %bb : tensor<4x16xf32>
  return %o, %sq : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that the residual sum read by another op (x + P is needed itself)
// is kept: moving the bias would remove the value that reader reads.
// CHECK-LABEL: func.func @step
// CHECK: %[[R:.*]] = kiln.add %arg0, %{{.*}} : tensor<4x16xf32>
// CHECK: kiln.add %[[R]], %{{.*}} : tensor<4x16xf32>
// CHECK: return
func.func @step(%x: tensor<4x16xf32>, %y: tensor<4x8xf32>, %w: tensor<8x16xf32>,
                %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = kiln.add %x, %p : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %o = kiln.add %r, %bb : tensor<4x16xf32>
  return %o, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a broadcast along the columns ([M] vector, dims = [0]) is no
// bias per output column: the sum is kept.
// CHECK-LABEL: func.func @step
// CHECK: %[[R:.*]] = kiln.add %arg0, %{{.*}} : tensor<4x16xf32>
// CHECK: kiln.add %[[R]], %{{.*}} : tensor<4x16xf32>
func.func @step(%x: tensor<4x16xf32>, %y: tensor<4x8xf32>, %w: tensor<8x16xf32>,
                %c: tensor<4xf32>) -> tensor<4x16xf32> {
  %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = kiln.add %x, %p : tensor<4x16xf32>
  %cc = kiln.broadcast %c dims = [0] : tensor<4xf32> -> tensor<4x16xf32>
  %o = kiln.add %r, %cc : tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}

// -----

// Tests that two residual adds with no GEMM product ((x + z) + b) are kept.
// CHECK-LABEL: func.func @step
// CHECK: %[[R:.*]] = kiln.add %arg0, %arg1 : tensor<4x16xf32>
// CHECK: kiln.add %[[R]], %{{.*}} : tensor<4x16xf32>
func.func @step(%x: tensor<4x16xf32>, %z: tensor<4x16xf32>,
                %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %r = kiln.add %x, %z : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %o = kiln.add %r, %bb : tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}
