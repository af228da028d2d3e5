// RUN: kiln-opt %s --split-input-file --kiln-attention-layout | FileCheck %s

// Tests a GPT-style step: q, k, v transposed from the projections'
// [B, T, H, D], attention's output transposed back, the backward's dout
// transposed in and dq, dk, dv transposed out (dv also widened for its bias
// gradient). Both ops take layout bthd, read the projections directly, and
// no transpose is left; the bias gradient's convert widens dv' itself.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[QP:.*]]: tensor<2x16x4x8xbf16>, %[[KP:.*]]: tensor<2x16x4x8xbf16>, %[[VP:.*]]: tensor<2x16x4x8xbf16>, %[[DY:.*]]: tensor<2x16x4x8xbf16>)
// CHECK-NOT: kiln.transpose
// CHECK: %[[O:.*]], %[[LSE:.*]] = kiln.attention %[[QP]], %[[KP]], %[[VP]] {layout = #kiln<attention_layout bthd>, scale = 3.500000e-01 : f32} : (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>) -> (tensor<2x16x4x8xbf16>, tensor<2x4x16xf32>)
// CHECK-NOT: kiln.transpose
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = kiln.attention_grad %[[QP]], %[[KP]], %[[VP]], %[[O]], %[[LSE]], %[[DY]] {layout = #kiln<attention_layout bthd>, scale = 3.500000e-01 : f32}
// CHECK-SAME: -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>)
// CHECK: %[[W:.*]] = kiln.convert %[[DV]] : tensor<2x16x4x8xbf16> -> tensor<2x16x4x8xf32>
// CHECK-NOT: kiln.transpose
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[W]]
func.func @step(%qp: tensor<2x16x4x8xbf16>, %kp: tensor<2x16x4x8xbf16>, %vp: tensor<2x16x4x8xbf16>, %dy: tensor<2x16x4x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xf32>) {
  %q = kiln.transpose %qp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %v = kiln.transpose %vp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %y = kiln.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dout = kiln.transpose %dy permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %lse, %dout {scale = 0.35 : f32}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqp = kiln.transpose %dq permutation = [0, 2, 1, 3] : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dkp = kiln.transpose %dk permutation = [0, 2, 1, 3] : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvw = kiln.convert %dv : tensor<2x4x16x8xbf16> -> tensor<2x4x16x8xf32>
  %dvwp = kiln.transpose %dvw permutation = [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %y, %dqp, %dkp, %dvwp : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xf32>
}

// -----

// Tests a Llama-style forward: q is a rope's result rounded to bf16 (GQA:
// k has 2 heads and is a plain transpose here). q gets one new transpose
// after its convert, which --kiln-fuse-rope folds into the rope; the mask
// region comes along.
// CHECK-LABEL: func.func @step
// CHECK: %[[R:.*]] = kiln.rope
// CHECK: %[[QB:.*]] = kiln.convert %[[R]] : tensor<1x4x16x8xf32> -> tensor<1x4x16x8xbf16>
// CHECK-NEXT: %[[QT:.*]] = kiln.transpose %[[QB]] permutation = [0, 2, 1, 3] : tensor<1x4x16x8xbf16> -> tensor<1x16x4x8xbf16>
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %[[QT]], %arg1, %arg2 {layout = #kiln<attention_layout bthd>, scale = 3.500000e-01 : f32} : (tensor<1x16x4x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>) -> (tensor<1x16x4x8xbf16>, tensor<1x4x16xf32>)
// CHECK-NEXT: mask
// CHECK: arith.cmpi sle
// CHECK: return %[[O]]
func.func @step(%x: tensor<1x4x16x8xf32>, %kp: tensor<1x16x2x8xbf16>, %vp: tensor<1x16x2x8xbf16>) -> tensor<1x16x4x8xbf16> {
  %r = kiln.rope %x {inv_freq = array<f32: 1.0, 0.1, 0.01, 0.001>} : tensor<1x4x16x8xf32> -> tensor<1x4x16x8xf32>
  %q = kiln.convert %r : tensor<1x4x16x8xf32> -> tensor<1x4x16x8xbf16>
  %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<1x16x2x8xbf16> -> tensor<1x2x16x8xbf16>
  %v = kiln.transpose %vp permutation = [0, 2, 1, 3] : tensor<1x16x2x8xbf16> -> tensor<1x2x16x8xbf16>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
      : (tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>)
      -> (tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>)
    mask(%b: index, %h: index, %i: index, %j: index) {
      %keep = arith.cmpi sle, %j, %i : index
      kiln.yield %keep : i1
    }
  %y = kiln.transpose %o permutation = [0, 2, 1, 3] : tensor<1x4x16x8xbf16> -> tensor<1x16x4x8xbf16>
  return %y : tensor<1x16x4x8xbf16>
}

// -----

// Tests what stays: v is a function argument (its [B, T, H, D] form would
// cost a kernel), so the op keeps layout bhtd and every transpose stays.
// CHECK-LABEL: func.func @eval
// CHECK: kiln.transpose
// CHECK: kiln.transpose
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %arg2 {scale = 3.500000e-01 : f32}
// CHECK: kiln.transpose
// CHECK-NOT: attention_layout
func.func @eval(%qp: tensor<1x16x4x8xf32>, %kp: tensor<1x16x4x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x16x4x8xf32> {
  %q = kiln.transpose %qp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
      : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>)
      -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>)
  %y = kiln.transpose %o permutation = [0, 2, 1, 3] : tensor<1x4x16x8xf32> -> tensor<1x16x4x8xf32>
  return %y : tensor<1x16x4x8xf32>
}

// -----

// Tests a transpose another op also reads: attention reads its input, the
// transpose stays for the other reader; the output, read both as it is and
// transposed back, gets one transpose for the reader that wants [B, H, T, D].
// CHECK-LABEL: func.func @step
// CHECK: %[[Q:.*]] = kiln.transpose %arg0
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %arg0, %arg1, %arg2 {layout = #kiln<attention_layout bthd>
// CHECK-NEXT: %[[OB:.*]] = kiln.transpose %[[O]] permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
// CHECK: return %[[Q]], %[[O]], %[[OB]]
func.func @step(%qp: tensor<1x16x4x8xf32>, %kp: tensor<1x16x4x8xf32>, %vp: tensor<1x16x4x8xf32>)
    -> (tensor<1x4x16x8xf32>, tensor<1x16x4x8xf32>, tensor<1x4x16x8xf32>) {
  %q = kiln.transpose %qp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %v = kiln.transpose %vp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
      : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>)
      -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>)
  %y = kiln.transpose %o permutation = [0, 2, 1, 3] : tensor<1x4x16x8xf32> -> tensor<1x16x4x8xf32>
  return %q, %y, %o : tensor<1x4x16x8xf32>, tensor<1x16x4x8xf32>, tensor<1x4x16x8xf32>
}

// -----

// Tests a rope whose result something else also reads (here the function's
// result): --kiln-fuse-rope could not fold a transpose after it, so the op
// keeps layout bhtd rather than add a transpose kernel.
// CHECK-LABEL: func.func @step
// CHECK-NOT: attention_layout
// CHECK: kiln.attention %{{.*}} {scale = 3.500000e-01 : f32}
func.func @step(%x: tensor<1x4x16x8xbf16>, %kp: tensor<1x16x4x8xbf16>, %vp: tensor<1x16x4x8xbf16>)
    -> (tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>) {
  %q = kiln.rope %x {inv_freq = array<f32: 1.0, 0.1, 0.01, 0.001>} : tensor<1x4x16x8xbf16> -> tensor<1x4x16x8xbf16>
  %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xbf16> -> tensor<1x4x16x8xbf16>
  %v = kiln.transpose %vp permutation = [0, 2, 1, 3] : tensor<1x16x4x8xbf16> -> tensor<1x4x16x8xbf16>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
      : (tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>)
      -> (tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>)
  return %o, %q : tensor<1x4x16x8xbf16>, tensor<1x4x16x8xbf16>
}
