// RUN: kiln-opt %s -split-input-file | FileCheck %s
// RUN: kiln-opt %s -split-input-file | kiln-opt -split-input-file | FileCheck %s

// Tests that kiln.attention with GQA, T != S, two captures, a score and a
// mask region round-trips.
// CHECK-LABEL: func.func @gqa_score_mask
// CHECK: %{{.*}}, %{{.*}} = kiln.attention %arg0, %arg1, %arg2 captures(%arg3, %arg4) {scale = 1.250000e-01 : f32} : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x64xf32>, tensor<2x4x37xf32>)
// CHECK-NEXT: score(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[C0:.*]]: tensor<4xf32>, %{{.*}}: tensor<2xi32>) {
// CHECK-NEXT: %[[SL:.*]] = tensor.extract %[[C0]][%[[H]]] : tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[SL]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
// CHECK: mask(%[[B:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[J:.*]]: index, %{{.*}}: tensor<4xf32>, %[[C1:.*]]: tensor<2xi32>) {
// CHECK-NEXT: %[[N:.*]] = tensor.extract %[[C1]][%[[B]]] : tensor<2xi32>
// CHECK-NEXT: %[[JJ:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-NEXT: %[[K:.*]] = arith.cmpi slt, %[[JJ]], %[[N]] : i32
// CHECK-NEXT: kiln.yield %[[K]] : i1
func.func @gqa_score_mask(%q: tensor<2x4x37x64xf32>, %k: tensor<2x2x53x64xf32>,
                          %v: tensor<2x2x53x64xf32>, %slope: tensor<4xf32>,
                          %len: tensor<2xi32>) -> tensor<2x4x37x64xf32> {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>, tensor<2xi32>)
      -> (tensor<2x4x37x64xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %r = arith.addf %s, %sl : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %keep = arith.cmpi slt, %jj, %n : i32
      kiln.yield %keep : i1
    }
  return %out : tensor<2x4x37x64xf32>
}

// -----

// Tests that both regions may be left out (plain softmax attention), with
// bf16 inputs and a head dim that is not a power of two.
// CHECK-LABEL: func.func @plain_bf16
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f32} : (tensor<1x2x5x80xbf16>, tensor<1x2x5x80xbf16>, tensor<1x2x5x96xbf16>) -> (tensor<1x2x5x96xbf16>, tensor<1x2x5xf32>)
// CHECK-NOT: score
// CHECK-NOT: mask
// CHECK: return
func.func @plain_bf16(%q: tensor<1x2x5x80xbf16>, %k: tensor<1x2x5x80xbf16>,
                      %v: tensor<1x2x5x96xbf16>) -> tensor<1x2x5x96xbf16> {
  %out, %lse = kiln.attention %q, %k, %v {scale = 1.0 : f32}
      : (tensor<1x2x5x80xbf16>, tensor<1x2x5x80xbf16>, tensor<1x2x5x96xbf16>)
      -> (tensor<1x2x5x96xbf16>, tensor<1x2x5xf32>)
  return %out : tensor<1x2x5x96xbf16>
}

// -----

// Tests that a causal mask alone (no score region) round-trips.
// CHECK-LABEL: func.func @causal
// CHECK-NOT: score(
// CHECK: mask(%[[B:.*]]: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) {
// CHECK-NEXT: %[[K:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK-NEXT: kiln.yield %[[K]] : i1
func.func @causal(%q: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %out, %lse = kiln.attention %q, %q, %q {scale = 0.5 : f32}
      : (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>)
      -> (tensor<1x1x3x4xf32>, tensor<1x1x3xf32>)
    mask(%b: index, %h: index, %i: index, %j: index) {
      %keep = arith.cmpi ule, %j, %i : index
      kiln.yield %keep : i1
    }
  return %out : tensor<1x1x3x4xf32>
}

// -----

// Tests that kiln.attention_grad round-trips with one gradient per floating
// capture (the i32 capture gets none) and math ops in the score region.
// CHECK-LABEL: func.func @grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = kiln.attention_grad %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 captures(%arg6, %arg7) {scale = 1.250000e-01 : f32} : (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>, tensor<1xi64>) -> (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>)
// CHECK: math.tanh
// CHECK: kiln.yield %{{.*}} : f32
func.func @grad(%q: tensor<1x2x5x8xf32>, %k: tensor<1x1x7x8xf32>, %v: tensor<1x1x7x8xf32>,
                %out: tensor<1x2x5x8xf32>, %lse: tensor<1x2x5xf32>, %dout: tensor<1x2x5x8xf32>,
                %slope: tensor<2xf32>, %len: tensor<1xi64>) -> tensor<2xf32> {
  %dq, %dk, %dv, %ds = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>, tensor<1xi64>)
      -> (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>, %c1: tensor<1xi64>) {
      %sl = tensor.extract %c0[%h] : tensor<2xf32>
      %t = math.tanh %s : f32
      %r = arith.mulf %t, %sl : f32
      kiln.yield %r : f32
    }
  return %ds : tensor<2xf32>
}

// -----

// Tests that layout bthd (q [B, T, H, D], k/v [B, S, KVH, D], lse [B, H, T])
// round-trips and that the default bhtd is left out of the text.
// CHECK-LABEL: func.func @tokens_major
// CHECK: kiln.attention %arg0, %arg1, %arg1 {layout = #kiln<attention_layout bthd>, scale = 1.250000e-01 : f32} : (tensor<2x37x4x64xf32>, tensor<2x53x2x64xf32>, tensor<2x53x2x64xf32>) -> (tensor<2x37x4x64xf32>, tensor<2x4x37xf32>)
// CHECK: kiln.attention %{{.*}} {scale = 1.250000e-01 : f32}
func.func @tokens_major(%q: tensor<2x37x4x64xf32>, %k: tensor<2x53x2x64xf32>, %q2: tensor<2x4x37x64xf32>, %k2: tensor<2x2x53x64xf32>) {
  %out, %lse = kiln.attention %q, %k, %k {layout = #kiln<attention_layout bthd>, scale = 0.125 : f32}
      : (tensor<2x37x4x64xf32>, tensor<2x53x2x64xf32>, tensor<2x53x2x64xf32>)
      -> (tensor<2x37x4x64xf32>, tensor<2x4x37xf32>)
  %out2, %lse2 = kiln.attention %q2, %k2, %k2 {layout = #kiln<attention_layout bhtd>, scale = 0.125 : f32}
      : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>)
      -> (tensor<2x4x37x64xf32>, tensor<2x4x37xf32>)
  return
}
