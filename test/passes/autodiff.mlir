// RUN: kiln-opt %s --split-input-file --kiln-autodiff | FileCheck %s

// Tests that an elementwise chain (mul, tanh, reduce_sum) is differentiated
// op by op from a 1.0 seed, and that the input `x` gets no gradient.
// CHECK-LABEL: func.func @elementwise_chain
func.func @elementwise_chain(
    %w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
    %x: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.mul %w, %x : tensor<4xf32>
  %1 = kiln.tanh %0 : tensor<4xf32>
  %2 = kiln.reduce_sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK: %[[MUL:.*]] = kiln.mul %arg0, %arg1
// CHECK: %[[TANH:.*]] = kiln.tanh %[[MUL]]
// CHECK: %[[LOSS:.*]] = kiln.reduce_sum %[[TANH]]
// CHECK: %[[SEED:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DSUM:.*]] = kiln.broadcast %[[SEED]] dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: %[[YY:.*]] = kiln.mul %[[TANH]], %[[TANH]]
// CHECK: %[[DTANH:.*]] = kiln.sub %[[ONE]], %[[YY]]
// CHECK: %[[DMUL:.*]] = kiln.mul %[[DSUM]], %[[DTANH]]
// CHECK: %[[DW:.*]] = kiln.mul %[[DMUL]], %arg1
// CHECK-NOT: kiln.
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<4xf32>
// -----

// Tests that a batched matmul against a shared rank-2 weight gets a
// gradient of the weight's shape through matmul VJPs.
// CHECK-LABEL: func.func @matmul
func.func @matmul(
    %x: tensor<2x3x4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
    %w: tensor<4x5xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %1 = kiln.reduce_sum %0 dims = [0, 1, 2] : tensor<2x3x5xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x5xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK: %[[SEED:.*]] = kiln.constant dense<1.000000e+00>
// CHECK: %[[G:.*]] = kiln.broadcast %[[SEED]] dims = [] : tensor<f32> -> tensor<2x3x5xf32>
// CHECK: %[[X2D:.*]] = kiln.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[G2D:.*]] = kiln.reshape %[[G]] : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: %[[DW:.*]] = kiln.matmul %[[X2D]], %[[G2D]] {transpose_lhs = true} : tensor<6x4xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK: return %{{.*}}, %[[DW]]
// -----

// Tests that the gradient of a broadcast bias is the cotangent summed over
// the broadcast dimension.
// CHECK-LABEL: func.func @bias_broadcast
func.func @bias_broadcast(
    %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
    %b: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %1 = kiln.add %x, %0 : tensor<4x8xf32>
  %2 = kiln.mul %1, %1 : tensor<4x8xf32>
  %3 = kiln.reduce_sum %2 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-SAME: tensor<8xf32> {kiln.name = "b", kiln.role = #kiln.role<grad>}
// CHECK: %[[Y:.*]] = kiln.add %arg0, %{{.*}} : tensor<4x8xf32>
// CHECK: %[[G:.*]] = kiln.broadcast %{{.*}} dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK: %[[D1:.*]] = kiln.mul %[[G]], %[[Y]]
// CHECK: %[[D2:.*]] = kiln.mul %[[G]], %[[Y]]
// CHECK: %[[DY:.*]] = kiln.add %[[D1]], %[[D2]]
// CHECK: %[[DB:.*]] = kiln.reduce_sum %[[DY]] dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK: return %{{.*}}, %[[DB]]
// -----

// Tests that a parameter used twice (fan-out) gets the sum of both
// contributions through kiln.add.
// CHECK-LABEL: func.func @fan_out
func.func @fan_out(
    %w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.exp %w : tensor<4xf32>
  %1 = kiln.add %w, %0 : tensor<4xf32>
  %2 = kiln.reduce_sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// CHECK: %[[E:.*]] = kiln.exp %arg0
// CHECK: %[[G:.*]] = kiln.broadcast %{{.*}} dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK: %[[DEXP:.*]] = kiln.mul %[[G]], %[[E]]
// CHECK: %[[DW:.*]] = kiln.add %[[G]], %[[DEXP]] : tensor<4xf32>
// CHECK: return %{{.*}}, %[[DW]]
// -----

// Tests that layer_norm is differentiated with one kiln.layer_norm_grad that
// yields the input, weight and bias gradients (mean and rstd are unused).
// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(
    %x: tensor<2x4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "x"},
    %g: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "ln.weight"},
    %b: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "ln.bias"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %y, %mean, %rstd = kiln.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %0 = kiln.mul %y, %y : tensor<2x4x8xf32>
  %1 = kiln.reduce_sum %0 dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-SAME: tensor<2x4x8xf32> {kiln.name = "x", kiln.role = #kiln.role<grad>}, tensor<8xf32> {kiln.name = "ln.weight", kiln.role = #kiln.role<grad>}, tensor<8xf32> {kiln.name = "ln.bias", kiln.role = #kiln.role<grad>})
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = kiln.layer_norm %arg0, %arg1, %arg2
// CHECK: %[[DY:.*]] = kiln.add
// CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = kiln.layer_norm_grad %arg0, %arg1, %[[MEAN]], %[[RSTD]], %[[DY]]
// CHECK: return %{{.*}}, %[[DX]], %[[DG]], %[[DB]]
// -----

// Tests that a parameter with no path to the loss gets a zero gradient, and
// that gradients are appended in parameter order.
// CHECK-LABEL: func.func @unused_param
func.func @unused_param(
    %unused: tensor<3x2xf32> {kiln.role = #kiln.role<param>, kiln.name = "unused"},
    %w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<3x2xf32> {kiln.name = "unused", kiln.role = #kiln.role<grad>}, tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK: %[[DW:.*]] = kiln.broadcast
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x2xf32>
// CHECK: return %{{.*}}, %[[ZERO]], %[[DW]]
// -----

// Tests that integer inputs (tokens, targets) are not differentiated: the
// embedding table gets an embedding_grad, the indices and targets nothing.
// CHECK-LABEL: func.func @integer_inputs
func.func @integer_inputs(
    %wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
    %tokens: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
    %targets: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %0 = kiln.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %1 = kiln.matmul %0, %wte {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %2 = kiln.cross_entropy %1, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %2 : tensor<f32>
}
// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<16x8xf32> {kiln.name = "wte", kiln.role = #kiln.role<grad>})
// CHECK: %[[SEED:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = kiln.cross_entropy_grad %{{.*}}, %arg2, %[[SEED]]
// CHECK: %[[DEMB:.*]] = kiln.matmul %[[DLOGITS]], %arg0 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[DHEAD:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK: %[[DTABLE:.*]] = kiln.embedding_grad %arg1, %[[DEMB]]
// CHECK: %[[DWTE:.*]] = kiln.add %[[DHEAD]], %[[DTABLE]] : tensor<16x8xf32>
// CHECK: return %{{.*}}, %[[DWTE]] : tensor<f32>, tensor<16x8xf32>

// -----

// Tests that metric results are returned but never differentiated: only the
// loss seeds a cotangent, so the gradient of w ignores the metric's use of w,
// and the grad is appended after the metric.
// CHECK-LABEL: func.func @with_metric
// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.name = "w_sq", kiln.role = #kiln.role<metric>}, tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>})
// CHECK: %[[L:.*]] = kiln.reduce_sum %arg0
// CHECK: %[[SQ:.*]] = kiln.mul %arg0, %arg0
// CHECK: %[[M:.*]] = kiln.reduce_sum %[[SQ]]
// CHECK-NOT: kiln.mul
// CHECK: %[[G:.*]] = kiln.broadcast
// CHECK: return %[[L]], %[[M]], %[[G]]
func.func @with_metric(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "w_sq"}) {
  %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
  %1 = kiln.mul %w, %w : tensor<4xf32>
  %2 = kiln.reduce_sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %0, %2 : tensor<f32>, tensor<f32>
}
