// RUN: kiln-opt %s --split-input-file --kiln-fuse-rope | FileCheck %s

// Tests the forward of q under bf16: the GEMM's f32 output, transposed to
// [B, H, T, D], rotated and rounded for attention, becomes one rope that
// reads the GEMM's layout and writes bf16.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[Q:.*]] = kiln.rope %arg0 {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.000000e+00, 1.000000e-01>} : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xbf16>
// CHECK-NEXT: return %[[Q]]
func.func @step(%p: tensor<2x16x4x4xf32>) -> tensor<2x4x16x4xbf16> {
  %t = kiln.transpose %p permutation = [0, 2, 1, 3] : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xf32>
  %r = kiln.rope %t {inv_freq = array<f32: 1.0, 0.1>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %q = kiln.convert %r : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
  return %q : tensor<2x4x16x4xbf16>
}

// -----

// Tests the forward of q as the model file writes it under bf16: the GEMM
// writes bf16 [B, T, H*D]; its widening, viewed as heads, is what the rope
// read. The rope now reads the bf16 view itself (no kernel writes an fp32
// copy of q); the widening stays for its other reader.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[W:.*]] = kiln.convert %arg0 : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
// CHECK-NEXT: %[[V:.*]] = kiln.reshape %arg0 : tensor<2x16x16xbf16> -> tensor<2x16x4x4xbf16>
// CHECK-NEXT: %[[Q:.*]] = kiln.rope %[[V]] {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.000000e+00, 1.000000e-01>} : tensor<2x16x4x4xbf16> -> tensor<2x4x16x4xbf16>
// CHECK-NEXT: return %[[Q]], %[[W]]
func.func @step(%g: tensor<2x16x16xbf16>) -> (tensor<2x4x16x4xbf16>, tensor<2x16x16xf32>) {
  %w = kiln.convert %g : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %p = kiln.reshape %w : tensor<2x16x16xf32> -> tensor<2x16x4x4xf32>
  %t = kiln.transpose %p permutation = [0, 2, 1, 3] : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xf32>
  %r = kiln.rope %t {inv_freq = array<f32: 1.0, 0.1>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %q = kiln.convert %r : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
  return %q, %w : tensor<2x4x16x4xbf16>, tensor<2x16x16xf32>
}

// -----

// Tests the backward: attention's bf16 gradient, widened, rotated back,
// rounded and transposed to the GEMM's layout, becomes one rope.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[G:.*]] = kiln.rope %arg0 {inv_freq = array<f32: 1.000000e+00, 1.000000e-01>, inverse = true, result_permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x4xbf16> -> tensor<2x16x4x4xbf16>
// CHECK-NEXT: return %[[G]]
func.func @step(%dq: tensor<2x4x16x4xbf16>) -> tensor<2x16x4x4xbf16> {
  %w = kiln.convert %dq : tensor<2x4x16x4xbf16> -> tensor<2x4x16x4xf32>
  %r = kiln.rope %w {inv_freq = array<f32: 1.0, 0.1>, inverse = true} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %n = kiln.convert %r : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
  %t = kiln.transpose %n permutation = [0, 2, 1, 3] : tensor<2x4x16x4xbf16> -> tensor<2x16x4x4xbf16>
  return %t : tensor<2x16x4x4xbf16>
}

// -----

// Tests what stays: a transpose another op also reads (folding it would not
// save its pass), a transpose that moves the feature dim, a narrowing
// convert before the rope (the rope would read unrounded values) and a
// widening one after it (the rope would skip a rounding), and a rope whose
// result has two readers.
// CHECK-LABEL: func.func @eval
// CHECK: %[[T:.*]] = kiln.transpose %arg0
// CHECK: kiln.rope %[[T]] {inv_freq = {{.*}}} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
// CHECK: %[[M:.*]] = kiln.transpose %arg1 permutation = [0, 1, 3, 2]
// CHECK: kiln.rope %[[M]] {inv_freq = {{.*}}} : tensor<2x4x4x16xf32> -> tensor<2x4x4x16xf32>
// CHECK: %[[N:.*]] = kiln.convert %arg2 : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
// CHECK: %[[R:.*]] = kiln.rope %[[N]] {inv_freq = {{.*}}} : tensor<2x4x16x4xbf16> -> tensor<2x4x16x4xbf16>
// CHECK: kiln.convert %[[R]] : tensor<2x4x16x4xbf16> -> tensor<2x4x16x4xf32>
// CHECK: %[[S:.*]] = kiln.rope %arg2 {inv_freq = {{.*}}} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
// CHECK: kiln.convert %[[S]] : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
// CHECK: kiln.add %[[S]], %[[S]]
func.func @eval(%p: tensor<2x16x4x4xf32>, %m: tensor<2x4x16x4xf32>, %x: tensor<2x4x16x4xf32>)
    -> (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>,
        tensor<2x4x16x4xbf16>, tensor<2x4x16x4xf32>) {
  %t = kiln.transpose %p permutation = [0, 2, 1, 3] : tensor<2x16x4x4xf32> -> tensor<2x4x16x4xf32>
  %r = kiln.rope %t {inv_freq = array<f32: 1.0, 0.1>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %mt = kiln.transpose %m permutation = [0, 1, 3, 2] : tensor<2x4x16x4xf32> -> tensor<2x4x4x16xf32>
  %mr = kiln.rope %mt {inv_freq = array<f32: 1.0, 0.1, 0.01, 0.001, 0.0001, 0.00001, 0.000001, 0.0000001>} : tensor<2x4x4x16xf32> -> tensor<2x4x4x16xf32>
  %n = kiln.convert %x : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
  %nr = kiln.rope %n {inv_freq = array<f32: 1.0, 0.1>} : tensor<2x4x16x4xbf16> -> tensor<2x4x16x4xbf16>
  %nw = kiln.convert %nr : tensor<2x4x16x4xbf16> -> tensor<2x4x16x4xf32>
  %s = kiln.rope %x {inv_freq = array<f32: 1.0, 0.1>} : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xf32>
  %sn = kiln.convert %s : tensor<2x4x16x4xf32> -> tensor<2x4x16x4xbf16>
  %sum = kiln.add %s, %s : tensor<2x4x16x4xf32>
  return %r, %t, %mr, %nw, %sn, %sum : tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16x4xbf16>, tensor<2x4x16x4xf32>
}
