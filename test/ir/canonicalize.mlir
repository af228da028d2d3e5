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

// -----

// Tests that a slice of the whole input, a pad by nothing and a concat of
// one tensor fold away, and a slice taking exactly one input of a concat
// folds to that input.
// CHECK-LABEL: func.func @slice_pad_concat_identity
// CHECK-NOT: kiln.slice
// CHECK-NOT: kiln.pad
// CHECK-NOT: kiln.concat
// CHECK: return %arg0, %arg0, %arg0, %arg1
func.func @slice_pad_concat_identity(%x: tensor<4x8xf32>, %y: tensor<4x3xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>) {
  %0 = kiln.slice %x dim = 1, start = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = kiln.pad %x dim = 0, before = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = kiln.concat %x dim = 1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = kiln.concat %x, %y dim = 1 : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x11xf32>
  %4 = kiln.slice %3 dim = 1, start = 8 : tensor<4x11xf32> -> tensor<4x3xf32>
  return %0, %1, %2, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>
}

// -----

// Tests that a slice that straddles two inputs of a concat stays.
// CHECK-LABEL: func.func @slice_across_concat
// CHECK: kiln.concat
// CHECK: kiln.slice %{{.*}} dim = 1, start = 6
func.func @slice_across_concat(%x: tensor<4x8xf32>, %y: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = kiln.concat %x, %y dim = 1 : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x11xf32>
  %1 = kiln.slice %0 dim = 1, start = 6 : tensor<4x11xf32> -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// Tests that the gradients of three consecutive slices, padded back and
// summed (split's VJP), become one concat: pad + pad over adjacent ranges is
// a pad of their concat, concats on one dim flatten, and a pad filling the
// whole dim folds away.
// CHECK-LABEL: func.func @sum_of_adjacent_pads
// CHECK-NEXT: %[[C:.*]] = kiln.concat %arg0, %arg1, %arg2 dim = 1 : (tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: return %[[C]]
func.func @sum_of_adjacent_pads(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>, %c: tensor<4x1xf32>) -> tensor<4x6xf32> {
  %0 = kiln.pad %c dim = 1, before = 5 : tensor<4x1xf32> -> tensor<4x6xf32>
  %1 = kiln.pad %b dim = 1, before = 2 : tensor<4x3xf32> -> tensor<4x6xf32>
  %2 = kiln.pad %a dim = 1, before = 0 : tensor<4x2xf32> -> tensor<4x6xf32>
  %3 = kiln.add %0, %1 : tensor<4x6xf32>
  %4 = kiln.add %3, %2 : tensor<4x6xf32>
  return %4 : tensor<4x6xf32>
}

// -----

// Tests that pads with a gap between their ranges are still added.
// CHECK-LABEL: func.func @sum_of_pads_with_gap
// CHECK: kiln.add
func.func @sum_of_pads_with_gap(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>) -> tensor<4x6xf32> {
  %0 = kiln.pad %a dim = 1, before = 0 : tensor<4x2xf32> -> tensor<4x6xf32>
  %1 = kiln.pad %b dim = 1, before = 3 : tensor<4x3xf32> -> tensor<4x6xf32>
  %2 = kiln.add %0, %1 : tensor<4x6xf32>
  return %2 : tensor<4x6xf32>
}

// -----

// Tests that k and v repeated per query group (reshape, broadcast, reshape:
// Hugging Face's repeat_kv) are read unrepeated by kiln.attention, whose
// grouped-query rule (head h reads kv head h / G) is the same repetition.
// CHECK-LABEL: func.func @attention_repeated_kv
// CHECK-NOT: kiln.broadcast
// CHECK: kiln.attention %arg0, %arg1, %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<1x4x3x16xf32>, tensor<1x2x3x16xf32>, tensor<1x2x3x16xf32>)
func.func @attention_repeated_kv(%q: tensor<1x4x3x16xf32>, %k: tensor<1x2x3x16xf32>, %v5: tensor<1x2x1x3x16xf32>) -> tensor<1x4x3x16xf32> {
  %k2 = kiln.broadcast %k dims = [0, 1, 3, 4] : tensor<1x2x3x16xf32> -> tensor<1x2x2x3x16xf32>
  %k3 = kiln.reshape %k2 : tensor<1x2x2x3x16xf32> -> tensor<1x4x3x16xf32>
  %v2 = kiln.broadcast %v5 dims = [0, 1, 2, 3, 4] : tensor<1x2x1x3x16xf32> -> tensor<1x2x2x3x16xf32>
  %v3 = kiln.reshape %v2 : tensor<1x2x2x3x16xf32> -> tensor<1x4x3x16xf32>
  %out, %lse = kiln.attention %q, %k3, %v3 {scale = 0.25 : f32} : (tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>) -> (tensor<1x4x3x16xf32>, tensor<1x4x3xf32>)
  return %out : tensor<1x4x3x16xf32>
}

// -----

// Tests that a repetition that is not per group (kv heads tiled as
// [k0, k1, k0, k1]: the broadcast adds the outer dim) is kept.
// CHECK-LABEL: func.func @attention_tiled_kv
// CHECK: kiln.broadcast
// CHECK: kiln.attention %arg0, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>)
func.func @attention_tiled_kv(%q: tensor<1x4x3x16xf32>, %k: tensor<1x2x3x16xf32>) -> tensor<1x4x3x16xf32> {
  %k2 = kiln.broadcast %k dims = [0, 2, 3, 4] : tensor<1x2x3x16xf32> -> tensor<1x2x2x3x16xf32>
  %k3 = kiln.reshape %k2 : tensor<1x2x2x3x16xf32> -> tensor<1x4x3x16xf32>
  %out, %lse = kiln.attention %q, %k3, %k3 {scale = 0.25 : f32} : (tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>) -> (tensor<1x4x3x16xf32>, tensor<1x4x3xf32>)
  return %out : tensor<1x4x3x16xf32>
}

// -----

// Tests that a local shard of an all-reduced sum keeps only the rank's
// slice of the sum -- a reduce-scatter -- directly or through a transpose
// between them (an all-reduce commutes with it), and that a mean, another
// axis or a second reader of the sum leave it alone.
// CHECK-LABEL: func.func @local_shard_of_sum
// CHECK-NEXT: %[[RS:.*]] = kiln.reduce_scatter sum %arg0 over "model" dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %arg0 permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[RST:.*]] = kiln.reduce_scatter sum %[[T]] over "model" dim = 0 : tensor<6x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %[[MEAN:.*]] = kiln.all_reduce mean %arg0 over "model"
// CHECK-NEXT: kiln.local_shard %[[MEAN]]
// CHECK-NEXT: %[[KEPT:.*]] = kiln.all_reduce sum %arg0 over "model"
// CHECK-NEXT: kiln.local_shard %[[KEPT]]
// CHECK-NEXT: return
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @local_shard_of_sum(%a: tensor<4x6xf32>)
      -> (tensor<2x6xf32>, tensor<3x4xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<4x6xf32>) {
    %s = kiln.all_reduce sum %a over "model" : tensor<4x6xf32>
    %0 = kiln.local_shard %s over "model" dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
    %s2 = kiln.all_reduce sum %a over "model" : tensor<4x6xf32>
    %t = kiln.transpose %s2 permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
    %1 = kiln.local_shard %t over "model" dim = 0 : tensor<6x4xf32> -> tensor<3x4xf32>
    %m = kiln.all_reduce mean %a over "model" : tensor<4x6xf32>
    %2 = kiln.local_shard %m over "model" dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
    %k = kiln.all_reduce sum %a over "model" : tensor<4x6xf32>
    %3 = kiln.local_shard %k over "model" dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
    return %0, %1, %2, %3, %k : tensor<2x6xf32>, tensor<3x4xf32>, tensor<2x6xf32>, tensor<2x6xf32>, tensor<4x6xf32>
  }
}
