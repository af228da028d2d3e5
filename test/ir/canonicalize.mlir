// RUN: kiln-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that a broadcast to the same type with identity dims folds away.
// CHECK-LABEL: func.func @broadcast_identity
// CHECK-NOT: kiln.broadcast
// CHECK: return %arg0
func.func @broadcast_identity(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.broadcast %a dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a broadcast of a splat constant becomes a larger splat.
// CHECK-LABEL: func.func @broadcast_splat
// CHECK: %[[C:.*]] = kiln.constant dense<2.000000e+00> : tensor<4x8xf32>
// CHECK-NOT: kiln.broadcast
// CHECK: return %[[C]]
func.func @broadcast_splat() -> tensor<4x8xf32> {
  %c = kiln.constant dense<2.0> : tensor<f32>
  %0 = kiln.broadcast %c dims = [] : tensor<f32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a real broadcast is kept.
// CHECK-LABEL: func.func @broadcast_kept
// CHECK: kiln.broadcast %arg0 dims = [1]
func.func @broadcast_kept(%a: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.broadcast %a dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a reshape to the same type folds away.
// CHECK-LABEL: func.func @reshape_same_type
// CHECK-NOT: kiln.reshape
// CHECK: return %arg0
func.func @reshape_same_type(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.reshape %a : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a chain of reshapes becomes one reshape, and that a chain back to
// the original type disappears.
// CHECK-LABEL: func.func @reshape_chain
// CHECK: %[[R:.*]] = kiln.reshape %arg0 : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NOT: kiln.reshape
// CHECK: return %[[R]], %arg0
func.func @reshape_chain(%a: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<2x3x4xf32>) {
  %0 = kiln.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = kiln.reshape %0 : tensor<6x4xf32> -> tensor<24xf32>
  %2 = kiln.reshape %1 : tensor<24xf32> -> tensor<2x3x4xf32>
  return %1, %2 : tensor<24xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that a reshape of a constant is a reshaped constant.
// CHECK-LABEL: func.func @reshape_constant
// CHECK: kiln.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi32>
// CHECK-NOT: kiln.reshape
func.func @reshape_constant() -> tensor<2x2xi32> {
  %c = kiln.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %0 = kiln.reshape %c : tensor<4xi32> -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}

// -----

// Tests that an identity transpose folds away.
// CHECK-LABEL: func.func @transpose_identity
// CHECK-NOT: kiln.transpose
// CHECK: return %arg0
func.func @transpose_identity(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.transpose %a permutation = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// Tests that a transpose and its inverse cancel.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-NOT: kiln.transpose
// CHECK: return %arg0
func.func @transpose_inverse(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.transpose %a permutation = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = kiln.transpose %0 permutation = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Tests that two transposes compose into one.
// CHECK-LABEL: func.func @transpose_compose
// CHECK: kiln.transpose %arg0 permutation = [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NOT: kiln.transpose
func.func @transpose_compose(%a: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = kiln.transpose %a permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = kiln.transpose %0 permutation = [1, 2, 0] : tensor<2x4x3xf32> -> tensor<4x3x2xf32>
  return %1 : tensor<4x3x2xf32>
}

// -----

// Tests that a reduce_sum over no dims folds away.
// CHECK-LABEL: func.func @reduce_sum_no_dims
// CHECK-NOT: kiln.reduce_sum
// CHECK: return %arg0
func.func @reduce_sum_no_dims(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.reduce_sum %a dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that identical constants are deduplicated and unused ones erased
// (ConstantLike + Pure).
// CHECK-LABEL: func.func @constant_dedup
// CHECK: %[[C:.*]] = kiln.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NOT: kiln.constant
// CHECK: kiln.add %[[C]], %[[C]]
func.func @constant_dedup() -> tensor<4xf32> {
  %0 = kiln.constant dense<1.0> : tensor<4xf32>
  %1 = kiln.constant dense<1.0> : tensor<4xf32>
  %2 = kiln.constant dense<3.0> : tensor<4xf32>
  %3 = kiln.add %0, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Tests that a conversion to the same type folds away, and one that changes
// the type stays.
// CHECK-LABEL: func.func @convert_same_type
// CHECK-NEXT: %[[B:.*]] = kiln.convert %arg0 : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT: return %arg0, %[[B]]
func.func @convert_same_type(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>) {
  %0 = kiln.convert %x : tensor<4xf32> -> tensor<4xf32>
  %1 = kiln.convert %x : tensor<4xf32> -> tensor<4xbf16>
  return %0, %1 : tensor<4xf32>, tensor<4xbf16>
}
