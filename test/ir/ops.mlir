// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round-trips every kiln op and #kiln.init through the custom and the
// generic assembly forms.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = kiln.add %a, %b : tensor<4x8xf32>
  // CHECK: kiln.sub %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %1 = kiln.sub %0, %b : tensor<4x8xf32>
  // CHECK: kiln.mul %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %2 = kiln.mul %1, %b : tensor<4x8xf32>
  // CHECK: kiln.div %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %3 = kiln.div %2, %b : tensor<4x8xf32>
  // CHECK: kiln.neg %{{.*}} : tensor<4x8xf32>
  %4 = kiln.neg %3 : tensor<4x8xf32>
  // CHECK: kiln.exp %{{.*}} : tensor<4x8xf32>
  %5 = kiln.exp %4 : tensor<4x8xf32>
  // CHECK: kiln.log %{{.*}} : tensor<4x8xf32>
  %6 = kiln.log %5 : tensor<4x8xf32>
  // CHECK: kiln.tanh %{{.*}} : tensor<4x8xf32>
  %7 = kiln.tanh %6 : tensor<4x8xf32>
  // CHECK: kiln.sqrt %{{.*}} : tensor<4x8xf32>
  %8 = kiln.sqrt %7 : tensor<4x8xf32>
  // CHECK: kiln.gelu %{{.*}} : tensor<4x8xf32>
  %9 = kiln.gelu %8 : tensor<4x8xf32>
  // CHECK: kiln.gelu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %10 = kiln.gelu_grad %8, %9 : tensor<4x8xf32>
  return %10 : tensor<4x8xf32>
}

// The unary ops declared by their formulas, and the cotangent op of them.
// CHECK-LABEL: func.func @formula_unary
func.func @formula_unary(%a: tensor<4x8xbf16>, %g: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  // CHECK: kiln.sigmoid %{{.*}} : tensor<4x8xbf16>
  %0 = kiln.sigmoid %a : tensor<4x8xbf16>
  // CHECK: kiln.silu %{{.*}} : tensor<4x8xbf16>
  %1 = kiln.silu %0 : tensor<4x8xbf16>
  // CHECK: kiln.relu %{{.*}} : tensor<4x8xbf16>
  %2 = kiln.relu %1 : tensor<4x8xbf16>
  // CHECK: kiln.sin %{{.*}} : tensor<4x8xbf16>
  %3 = kiln.sin %2 : tensor<4x8xbf16>
  // CHECK: kiln.cos %{{.*}} : tensor<4x8xbf16>
  %4 = kiln.cos %3 : tensor<4x8xbf16>
  // CHECK: kiln.square %{{.*}} : tensor<4x8xbf16>
  %5 = kiln.square %4 : tensor<4x8xbf16>
  // CHECK: kiln.elementwise_grad %{{.*}}, %{{.*}} {op = "kiln.silu"} : tensor<4x8xbf16>
  %6 = kiln.elementwise_grad %5, %g {op = "kiln.silu"} : tensor<4x8xbf16>
  return %6 : tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @integer_elementwise
func.func @integer_elementwise(%a: tensor<8xi32>) -> tensor<8xi32> {
  // CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<8xi32>
  %0 = kiln.add %a, %a : tensor<8xi32>
  // CHECK: kiln.neg %{{.*}} : tensor<8xi32>
  %1 = kiln.neg %0 : tensor<8xi32>
  return %1 : tensor<8xi32>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<f32>, tensor<3xi32>, tensor<64xi32>) {
  // CHECK: kiln.constant dense<1.000000e+00> : tensor<f32>
  %0 = kiln.constant dense<1.0> : tensor<f32>
  // CHECK: kiln.constant dense<[1, 2, 3]> : tensor<3xi32>
  %1 = kiln.constant dense<[1, 2, 3]> : tensor<3xi32>
  // CHECK: kiln.iota : tensor<64xi32>
  %2 = kiln.iota : tensor<64xi32>
  return %0, %1, %2 : tensor<f32>, tensor<3xi32>, tensor<64xi32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<8xf32>, %b: tensor<4x1xf32>, %c: tensor<2x3x4xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<2x4x3xf32>) {
  // CHECK: kiln.broadcast %{{.*}} dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %0 = kiln.broadcast %a dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: kiln.broadcast %{{.*}} dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %1 = kiln.broadcast %b dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  // CHECK: kiln.reduce_sum %{{.*}} dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %2 = kiln.reduce_sum %0 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  // CHECK: kiln.reduce_sum %{{.*}} dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %3 = kiln.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  // CHECK: kiln.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %4 = kiln.reshape %c : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: kiln.transpose %{{.*}} permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %5 = kiln.transpose %c permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<2x4x3xf32>
}

// CHECK-LABEL: func.func @matmuls
func.func @matmuls(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %k: tensor<2x4x8xf32>,
                   %wt: tensor<16x8xf32>, %xt: tensor<2x8x4xf32>)
    -> (tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>) {
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %0 = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x4xf32>
  %1 = kiln.matmul %x, %k {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x4xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs = true, transpose_rhs = true} : tensor<2x8x4xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %2 = kiln.matmul %xt, %wt {transpose_lhs = true, transpose_rhs = true} : tensor<2x8x4xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %3 = kiln.matmul %xt, %xt {transpose_lhs = true} : tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  return %0, %1, %2, %3 : tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>
}

// CHECK-LABEL: func.func @embedding
func.func @embedding(%wte: tensor<64x16xf32>, %tokens: tensor<2x8xi32>) -> (tensor<2x8x16xf32>, tensor<64x16xf32>) {
  // CHECK: kiln.embedding %{{.*}}, %{{.*}} : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %0 = kiln.embedding %wte, %tokens : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  // CHECK: kiln.embedding_grad %{{.*}}, %{{.*}} : tensor<2x8xi32>, tensor<2x8x16xf32> -> tensor<64x16xf32>
  %1 = kiln.embedding_grad %tokens, %0 : tensor<2x8xi32>, tensor<2x8x16xf32> -> tensor<64x16xf32>
  // CHECK: kiln.embedding_grad %{{.*}}, %{{.*}} plus %{{.*}} : tensor<2x8xi32>, tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<64x16xf32>
  %2 = kiln.embedding_grad %tokens, %0 plus %1 : tensor<2x8xi32>, tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<64x16xf32>
  return %0, %2 : tensor<2x8x16xf32>, tensor<64x16xf32>
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  // The default epsilon (1e-5) is elided.
  // CHECK: kiln.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  // CHECK: kiln.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32}
  %y2, %mean2, %rstd2 = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-03 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  // CHECK: kiln.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %y
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %dw, %db : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @rope
func.func @rope(%q: tensor<2x4x16x4xf32>) -> tensor<2x4x16x4xf32> {
  // CHECK: kiln.rope %{{.*}} {inv_freq = array<f32: 1.000000e+00, 0.00999999977>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %0 = kiln.rope %q {inv_freq = array<f32: 1.0, 0.01>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  // CHECK: kiln.rope %{{.*}} {inv_freq = array<f32: 1.000000e+00, 0.00999999977>, inverse = true} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %1 = kiln.rope %0 {inv_freq = array<f32: 1.0, 0.01>, inverse = true} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  return %1 : tensor<2x4x16x4xf32>
}

// The form --kiln-fuse-rope makes: read through a transpose, write bf16; and
// the backward's: read bf16, write transposed.
// CHECK-LABEL: func.func @rope_permuted
func.func @rope_permuted(%p: tensor<2x16x4x4xf32>, %g: tensor<2x4x16x4xbf16>) -> (tensor<2x4x16x4xbf16>, tensor<2x16x4x4xbf16>) {
  // CHECK: kiln.rope %{{.*}} {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.000000e+00, 0.00999999977>} : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xbf16>
  %0 = kiln.rope %p {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.0, 0.01>} : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xbf16>
  // CHECK: kiln.rope %{{.*}} {inv_freq = array<f32: 1.000000e+00, 0.00999999977>, inverse = true, result_permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x4xbf16> -> tensor<2x16x4x4xbf16>
  %1 = kiln.rope %g {inv_freq = array<f32: 1.0, 0.01>, inverse = true, result_permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x4xbf16> -> tensor<2x16x4x4xbf16>
  return %0, %1 : tensor<2x4x16x4xbf16>, tensor<2x16x4x4xbf16>
}

// CHECK-LABEL: func.func @rms_norms
func.func @rms_norms(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<8xf32>) {
  // CHECK: kiln.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %y, %rstd = kiln.rms_norm %x, %w {epsilon = 1.0e-06 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  // CHECK: kiln.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %dx, %dw = kiln.rms_norm_grad %x, %w, %rstd, %y
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return %dx, %dw : tensor<2x4x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @attention_pieces
func.func @attention_pieces(%s: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  // CHECK: kiln.causal_mask %{{.*}} fill = 0xFF800000 : tensor<2x4x4xf32>
  %0 = kiln.causal_mask %s fill = 0xFF800000 : tensor<2x4x4xf32>
  // CHECK: kiln.softmax %{{.*}} : tensor<2x4x4xf32>
  %1 = kiln.softmax %0 : tensor<2x4x4xf32>
  // CHECK: kiln.softmax_grad %{{.*}}, %{{.*}} : tensor<2x4x4xf32>
  %2 = kiln.softmax_grad %1, %s : tensor<2x4x4xf32>
  // CHECK: kiln.causal_mask %{{.*}} fill = 0.000000e+00 : tensor<2x4x4xf32>
  %3 = kiln.causal_mask %2 fill = 0.0 : tensor<2x4x4xf32>
  return %3 : tensor<2x4x4xf32>
}

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x64xf32>) {
  // CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xi32>
  %0 = kiln.cross_entropy %logits, %targets : tensor<2x8x64xf32>, tensor<2x8xi32>
  // CHECK: kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xi32>
  %1 = kiln.cross_entropy_grad %logits, %targets, %0 : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0, %1 : tensor<f32>, tensor<2x8x64xf32>
}

// Tests that valid_classes (pad-dims' mask of padded classes) round-trips.
// CHECK-LABEL: func.func @padded_loss
func.func @padded_loss(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x64xf32>) {
  // CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  %0 = kiln.cross_entropy %logits, %targets {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  // CHECK: kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  %1 = kiln.cross_entropy_grad %logits, %targets, %0 {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0, %1 : tensor<f32>, tensor<2x8x64xf32>
}

// Tests that a cross_entropy_grad with a loss result (the chunks of a fused
// linear + cross-entropy) prints `with loss` and the loss's type.
// CHECK-LABEL: func.func @loss_grad_with_loss
func.func @loss_grad_with_loss(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>, %g: tensor<f32>) -> (tensor<2x8x64xbf16>, tensor<f32>) {
  // CHECK: %{{.*}}, %{{.*}} = kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} with loss tensor<f32> {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
  %0, %1 = kiln.cross_entropy_grad %logits, %targets, %g with loss tensor<f32> {valid_classes = 50 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
  return %0, %1 : tensor<2x8x64xbf16>, tensor<f32>
}

// Tests that a cross_entropy_grad of another element type than its logits
// (bf16, as mixed precision makes it) prints that type after `->`.
// CHECK-LABEL: func.func @bf16_loss_grad
func.func @bf16_loss_grad(%logits: tensor<2x8x64xf32>, %targets: tensor<2x8xi32>, %g: tensor<f32>) -> tensor<2x8x64xbf16> {
  // CHECK: kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
  %0 = kiln.cross_entropy_grad %logits, %targets, %g : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
  return %0 : tensor<2x8x64xbf16>
}

// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%p: tensor<8x16xf32>, %g: tensor<8x16xf32>, %m: tensor<8x16xf32>,
                     %v: tensor<8x16xf32>, %lr: tensor<f32>, %step: tensor<f32>,
                     %loss: tensor<f32>) {
  // CHECK: kiln.accumulate %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : tensor<8x16xf32>
  %acc = kiln.accumulate %m, %g {scale = 0.25 : f32} : tensor<8x16xf32>
  // CHECK: kiln.grad_scale %{{.*}}, %{{.*}} {max_norm = 1.000000e+00 : f32}
  %s = kiln.grad_scale %lr, %loss {max_norm = 1.0 : f32}
  // CHECK: kiln.adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, decoupled_weight_decay = true, epsilon = 9.99999993E-9 : f32, weight_decay = 1.000000e-01 : f32} : tensor<8x16xf32>
  %p1, %m1, %v1, %du, %pp = kiln.adam %p, %g, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<8x16xf32>
  // CHECK: kiln.sgd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {weight_decay = 0.000000e+00 : f32} : tensor<8x16xf32>
  %p2, %du2, %pp2 = kiln.sgd %p, %g, %lr, %s {weight_decay = 0.0 : f32} : tensor<8x16xf32>
  // CHECK: kiln.sgd_momentum %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 0.899999976 : f32, nesterov = true, weight_decay = 0.000000e+00 : f32} : tensor<8x16xf32>
  %p3, %b3, %du3, %pp3 = kiln.sgd_momentum %p, %g, %m, %lr, %step, %s
      {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = true, weight_decay = 0.0 : f32} : tensor<8x16xf32>
  return
}

// CHECK-LABEL: func.func @initializers
// CHECK-SAME: kiln.init = #kiln.init<normal, std = 0.02>
// CHECK-SAME: kiln.init = #kiln.init<zeros>
// CHECK-SAME: kiln.init = #kiln.init<ones>
func.func @initializers(%w: tensor<8xf32> {kiln.init = #kiln.init<normal, std = 0.02>},
                        %b: tensor<8xf32> {kiln.init = #kiln.init<zeros>},
                        %g: tensor<8xf32> {kiln.init = #kiln.init<ones>}) {
  return
}

// Tests the float conversion and a bf16 GEMM with an f32 result (mixed
// precision), which round-trip through the printer and the generic form.
// CHECK-LABEL: func.func @mixed_precision
// CHECK: %[[XB:.*]] = kiln.convert %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: kiln.matmul %[[XB]], %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
func.func @mixed_precision(%x: tensor<4x8xf32>, %w: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  %xb = kiln.convert %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %y = kiln.matmul %xb, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @slice_pad_concat
func.func @slice_pad_concat(%a: tensor<4x8xf32>, %b: tensor<4x3xbf16>) -> (tensor<4x3xf32>, tensor<4x8xbf16>, tensor<4x11xf32>) {
  // CHECK: kiln.slice %{{.*}} dim = 1, start = 2 : tensor<4x8xf32> -> tensor<4x3xf32>
  %0 = kiln.slice %a dim = 1, start = 2 : tensor<4x8xf32> -> tensor<4x3xf32>
  // CHECK: kiln.pad %{{.*}} dim = 1, before = 5 : tensor<4x3xbf16> -> tensor<4x8xbf16>
  %1 = kiln.pad %b dim = 1, before = 5 : tensor<4x3xbf16> -> tensor<4x8xbf16>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} dim = 1 : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x11xf32>
  %2 = kiln.concat %a, %0 dim = 1 : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x11xf32>
  return %0, %1, %2 : tensor<4x3xf32>, tensor<4x8xbf16>, tensor<4x11xf32>
}

// CHECK-LABEL: func.func @linear_cross_entropy
func.func @linear_cross_entropy(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %t: tensor<8xi32>, %g: tensor<f32>, %acc: tensor<16x4xf32>) -> (tensor<f32>, tensor<8x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>) {
  // CHECK: kiln.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 3 : i64, valid_classes = 12 : i64} : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32>
  %0 = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 3 : i64, valid_classes = 12 : i64} : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32>
  // CHECK: kiln.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {chunk_rows = 8 : i64} : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32>
  %1:2 = kiln.linear_cross_entropy_grad %x, %w, %t, %g {chunk_rows = 8 : i64} : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32>
  // CHECK: kiln.matmul_accumulate %{{.*}}, %{{.*}}, %{{.*}} {transpose_lhs = true} : tensor<16x4xf32>, tensor<8x16xf32>, tensor<8x4xf32>
  %d = kiln.constant dense<1.0> : tensor<8x16xf32>
  %2 = kiln.matmul_accumulate %acc, %d, %x {transpose_lhs = true} : tensor<16x4xf32>, tensor<8x16xf32>, tensor<8x4xf32>
  return %0, %1#0, %1#1, %2 : tensor<f32>, tensor<8x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
}
