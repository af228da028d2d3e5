// RUN: kiln-opt %s --split-input-file --kiln-autodiff --verify-diagnostics | FileCheck %s

// Tests that kiln.attention is differentiated with one kiln.attention_grad
// that carries the forward's scale, captures and (cloned) regions, and that
// the learned slope (a float capture) gets its gradient while the i32
// lengths get none.
// CHECK-LABEL: func.func @attention
func.func @attention(
    %q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "q"},
    %k: tensor<1x1x7x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "k"},
    %slope: tensor<2xf32> {kiln.role = #kiln.role<param>, kiln.name = "slope"},
    %len: tensor<1xi32> {kiln.role = #kiln.role<input>, kiln.name = "len"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %out, %lse = kiln.attention %q, %k, %k captures(%slope, %len) {scale = 0.25 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>, tensor<1xi32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>, %c1: tensor<1xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<2xf32>
      %r = arith.mulf %s, %sl : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>, %c1: tensor<1xi32>) {
      %n = tensor.extract %c1[%b] : tensor<1xi32>
      %jj = arith.index_cast %j : index to i32
      %keep = arith.cmpi slt, %jj, %n : i32
      kiln.yield %keep : i1
    }
  %l = kiln.reduce_sum %out dims = [0, 1, 2, 3] : tensor<1x2x5x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = kiln.attention %arg0, %arg1, %arg1 captures(%arg2, %arg3)
// CHECK: %[[DQ:[a-z_0-9]+]], %[[DK1:[a-z_0-9]+]], %[[DV:[a-z_0-9]+]], %[[DS:[a-z_0-9]+]] = kiln.attention_grad %arg0, %arg1, %arg1, %[[OUT]], %[[LSE]], %{{.*}} captures(%arg2, %arg3) {scale = 2.500000e-01 : f32}
// CHECK-SAME: -> (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>)
// CHECK-NEXT: score(
// CHECK: arith.mulf
// CHECK: mask(
// CHECK: arith.cmpi slt
// CHECK: %[[DK:.*]] = kiln.add %[[DK1]], %[[DV]]
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DS]]

// -----

// Tests that differentiating through lse is an error on the op.
func.func @through_lse(
    %q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "q"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  // expected-error @+1 {{cannot differentiate through the lse result}}
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  %l = kiln.reduce_sum %lse dims = [0, 1, 2] : tensor<1x2x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the attention_grad of an attention with dropout carries the same
// dropout and the RNG-state capture (so the backward regenerates the
// forward's mask), and that the i64 state gets no gradient.
// CHECK-LABEL: func.func @dropout
func.func @dropout(
    %q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "q"},
    %rng: tensor<2xi64> {kiln.role = #kiln.role<dropout_rng>, kiln.name = "dropout_rng"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %out, %lse = kiln.attention %q, %q, %q captures(%rng) {dropout = 1.250000e-01 : f32, scale = 0.25 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xi64>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  %l = kiln.reduce_sum %out dims = [0, 1, 2, 3] : tensor<1x2x5x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK: kiln.attention_grad %{{.*}} captures(%{{.*}}) {dropout = 1.250000e-01 : f32, scale = 2.500000e-01 : f32}
// CHECK-SAME: tensor<2xi64>)
// CHECK-SAME: -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)

// -----

// Tests that the backward of a layout-bthd attention has the forward's
// layout: its gradients come out [B, T, H, D] like q, k and v.
// CHECK-LABEL: func.func @tokens_major
// CHECK: kiln.attention_grad %arg0, %arg1, %arg1, %{{.*}}, %{{.*}}, %{{.*}} {layout = #kiln<attention_layout bthd>, scale = 2.500000e-01 : f32}
// CHECK-SAME: -> (tensor<1x5x2x8xf32>, tensor<1x7x1x8xf32>, tensor<1x7x1x8xf32>)
func.func @tokens_major(
    %q: tensor<1x5x2x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "q"},
    %k: tensor<1x7x1x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "k"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %out, %lse = kiln.attention %q, %k, %k {layout = #kiln<attention_layout bthd>, scale = 0.25 : f32}
      : (tensor<1x5x2x8xf32>, tensor<1x7x1x8xf32>, tensor<1x7x1x8xf32>)
      -> (tensor<1x5x2x8xf32>, tensor<1x2x5xf32>)
  %l = kiln.reduce_sum %out dims = [0, 1, 2, 3] : tensor<1x5x2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
