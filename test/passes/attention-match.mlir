// RUN: kiln-opt %s --split-input-file --kiln-attention-match | FileCheck %s

// Tests that tiny_gpt's causal attention (kᵀ made by one transpose from
// [B, T, H, D], the scale as a division by a splat √D, kiln.causal_mask)
// becomes one kiln.attention: k = transpose(kᵀ), scale 1/4, no score
// region, the causal mask region j <= i + (S - T), and p @ v's user reads
// the attention output.
// CHECK-LABEL: func.func @causal_div
// CHECK-NOT: kiln.softmax
// CHECK: %[[KT:.*]] = kiln.transpose %arg1 permutation = [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
// CHECK-NOT: kiln.softmax
// CHECK: %[[K:.*]] = kiln.transpose %[[KT]] permutation = [0, 1, 3, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = kiln.attention %arg0, %[[K]], %arg2 {scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: score(
// CHECK-NEXT: mask(%{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) {
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[L:.*]] = arith.addi %[[I]], %[[Z]] : index
// CHECK-NEXT: %[[KEEP:.*]] = arith.cmpi sle, %[[J]], %[[L]] : index
// CHECK-NEXT: kiln.yield %[[KEEP]] : i1
// CHECK-NOT: kiln.softmax
// CHECK: return %[[O]]
func.func @causal_div(%q: tensor<2x4x8x16xf32>, %kraw: tensor<2x8x4x16xf32>,
                      %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = kiln.transpose %kraw permutation = [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %c = kiln.constant dense<4.0> : tensor<2x4x8x8xf32>
  %d = kiln.div %s, %c : tensor<2x4x8x8xf32>
  %m = kiln.causal_mask %d fill = 0xFF800000 : tensor<2x4x8x8xf32>
  %p = kiln.softmax %m : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a scale by a multiplication (splat on the left), k read with
// transpose_rhs and T != S give kiln.attention on the original k with
// scale 0.5 and neither region.
// CHECK-LABEL: func.func @mul_scale_cross
// CHECK-NOT: kiln.transpose
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %arg0, %arg1, %arg2 {scale = 5.000000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x3xf32>) -> (tensor<1x2x4x3xf32>, tensor<1x2x4xf32>)
// CHECK-NOT: score(
// CHECK-NOT: mask(
// CHECK: return %[[O]]
func.func @mul_scale_cross(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>,
                           %v: tensor<1x2x6x3xf32>) -> tensor<1x2x4x3xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x6xf32>
  %c = kiln.constant dense<0.5> : tensor<1x2x4x6xf32>
  %d = kiln.mul %c, %s : tensor<1x2x4x6xf32>
  %p = kiln.softmax %d : tensor<1x2x4x6xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x3xf32> -> tensor<1x2x4x3xf32>
  return %o : tensor<1x2x4x3xf32>
}

// -----

// Tests that an ALiBi-like bias slope[h] * (pos[j] - pos[i]), built from
// broadcasts of a per-head slope [H] and a position vector [S], is rebuilt
// from scalars in the score region: both tensors are captured as they are
// (no [T, S] tensor), read at h, j and i; the causal mask stays a region.
// CHECK-LABEL: func.func @alibi
// CHECK: %[[POS:.*]] = kiln.constant dense<[0.000000e+00, 1.000000e+00
// CHECK: kiln.attention %arg0, %{{.*}}, %arg2 captures(%arg3, %[[POS]]) {scale = 2.500000e-01 : f32}
// CHECK-NEXT: score(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[C0:.*]]: tensor<4xf32>, %[[C1:.*]]: tensor<8xf32>) {
// CHECK-NEXT: %[[SL:.*]] = tensor.extract %[[C0]][%[[H]]] : tensor<4xf32>
// CHECK-NEXT: %[[PJ:.*]] = tensor.extract %[[C1]][%[[J]]] : tensor<8xf32>
// CHECK-NEXT: %[[PI:.*]] = tensor.extract %[[C1]][%[[I]]] : tensor<8xf32>
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[PJ]], %[[PI]] : f32
// CHECK-NEXT: %[[BIAS:.*]] = arith.mulf %[[SL]], %[[D]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
// CHECK: mask(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<8xf32>) {
// CHECK: arith.cmpi sle
func.func @alibi(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                 %v: tensor<2x4x8x16xf32>, %slope: tensor<4xf32>) -> tensor<2x4x8x16xf32> {
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<2x4x8x8xf32>
  %d = kiln.mul %s, %c : tensor<2x4x8x8xf32>
  %pos = kiln.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]> : tensor<8xf32>
  %sb = kiln.broadcast %slope dims = [1] : tensor<4xf32> -> tensor<2x4x8x8xf32>
  %pj = kiln.broadcast %pos dims = [3] : tensor<8xf32> -> tensor<2x4x8x8xf32>
  %pi = kiln.broadcast %pos dims = [2] : tensor<8xf32> -> tensor<2x4x8x8xf32>
  %dist = kiln.sub %pj, %pi : tensor<2x4x8x8xf32>
  %bias = kiln.mul %sb, %dist : tensor<2x4x8x8xf32>
  %a = kiln.add %d, %bias : tensor<2x4x8x8xf32>
  %m = kiln.causal_mask %a fill = 0xFF800000 : tensor<2x4x8x8xf32>
  %p = kiln.softmax %m : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that the TSP distance bias -slope[h] * sqrt((x_i - x_j)^2 +
// (y_i - y_j)^2), from coordinate inputs [B, N] and a per-head slope, is
// folded into the score region with the coordinates captured as [B, N]
// (read at [b, i] and [b, j]) and each square computed once.
// CHECK-LABEL: func.func @tsp_distance
// CHECK: kiln.attention %arg0, %{{.*}}, %arg2 captures(%arg5, %arg3, %arg4) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: score(%[[S:.*]]: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[SLOPE:.*]]: tensor<4xf32>, %[[X:.*]]: tensor<2x8xf32>, %[[Y:.*]]: tensor<2x8xf32>) {
// CHECK-NEXT: %[[SL:.*]] = tensor.extract %[[SLOPE]][%[[H]]] : tensor<4xf32>
// CHECK-NEXT: %[[XI:.*]] = tensor.extract %[[X]][%[[B]], %[[I]]] : tensor<2x8xf32>
// CHECK-NEXT: %[[XJ:.*]] = tensor.extract %[[X]][%[[B]], %[[J]]] : tensor<2x8xf32>
// CHECK-NEXT: %[[DX:.*]] = arith.subf %[[XI]], %[[XJ]] : f32
// CHECK-NEXT: %[[DX2:.*]] = arith.mulf %[[DX]], %[[DX]] : f32
// CHECK-NEXT: %[[YI:.*]] = tensor.extract %[[Y]][%[[B]], %[[I]]] : tensor<2x8xf32>
// CHECK-NEXT: %[[YJ:.*]] = tensor.extract %[[Y]][%[[B]], %[[J]]] : tensor<2x8xf32>
// CHECK-NEXT: %[[DY:.*]] = arith.subf %[[YI]], %[[YJ]] : f32
// CHECK-NEXT: %[[DY2:.*]] = arith.mulf %[[DY]], %[[DY]] : f32
// CHECK-NEXT: %[[D2:.*]] = arith.addf %[[DX2]], %[[DY2]] : f32
// CHECK-NEXT: %[[DIST:.*]] = math.sqrt %[[D2]] : f32
// CHECK-NEXT: %[[BIAS:.*]] = arith.mulf %[[SL]], %[[DIST]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.subf %[[S]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
// CHECK-NOT: mask(
func.func @tsp_distance(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                        %v: tensor<2x4x8x16xf32>, %cx: tensor<2x8xf32>,
                        %cy: tensor<2x8xf32>, %slope: tensor<4xf32>) -> tensor<2x4x8x16xf32> {
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %xi = kiln.broadcast %cx dims = [0, 2] : tensor<2x8xf32> -> tensor<2x4x8x8xf32>
  %xj = kiln.broadcast %cx dims = [0, 3] : tensor<2x8xf32> -> tensor<2x4x8x8xf32>
  %yi = kiln.broadcast %cy dims = [0, 2] : tensor<2x8xf32> -> tensor<2x4x8x8xf32>
  %yj = kiln.broadcast %cy dims = [0, 3] : tensor<2x8xf32> -> tensor<2x4x8x8xf32>
  %dx = kiln.sub %xi, %xj : tensor<2x4x8x8xf32>
  %dy = kiln.sub %yi, %yj : tensor<2x4x8x8xf32>
  %dx2 = kiln.mul %dx, %dx : tensor<2x4x8x8xf32>
  %dy2 = kiln.mul %dy, %dy : tensor<2x4x8x8xf32>
  %d2 = kiln.add %dx2, %dy2 : tensor<2x4x8x8xf32>
  %dist = kiln.sqrt %d2 : tensor<2x4x8x8xf32>
  %sb = kiln.broadcast %slope dims = [1] : tensor<4xf32> -> tensor<2x4x8x8xf32>
  %bias = kiln.mul %sb, %dist : tensor<2x4x8x8xf32>
  %a = kiln.sub %s, %bias : tensor<2x4x8x8xf32>
  %p = kiln.softmax %a : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that genuine bias tensors become captures read at their own
// indices: a [B, H, T, S] input at [b, h, i, j], and a [B, T, S] input
// broadcast over heads at [b, i, j] (the broadcast dimension dropped).
// CHECK-LABEL: func.func @bias_inputs
// CHECK: kiln.attention %arg0, %{{.*}}, %arg2 captures(%arg3, %arg4) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: score(%[[S:.*]]: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[FULL:.*]]: tensor<2x4x8x8xf32>, %[[PERB:.*]]: tensor<2x8x8xf32>) {
// CHECK-NEXT: %[[F:.*]] = tensor.extract %[[FULL]][%[[B]], %[[H]], %[[I]], %[[J]]] : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[S]], %[[F]] : f32
// CHECK-NEXT: %[[P:.*]] = tensor.extract %[[PERB]][%[[B]], %[[I]], %[[J]]] : tensor<2x8x8xf32>
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[A]], %[[P]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
func.func @bias_inputs(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                       %v: tensor<2x4x8x16xf32>, %full: tensor<2x4x8x8xf32>,
                       %perb: tensor<2x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %a = kiln.add %s, %full : tensor<2x4x8x8xf32>
  %pb = kiln.broadcast %perb dims = [0, 2, 3] : tensor<2x8x8xf32> -> tensor<2x4x8x8xf32>
  %a2 = kiln.add %pb, %a : tensor<2x4x8x8xf32>
  %p = kiln.softmax %a2 : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that an additive lower-triangular constant (0 where j <= i + S - T,
// -inf elsewhere; T = 3, S = 4) is recognised as the causal mask: a mask
// region with offset S - T = 1, no score region and no capture.
// CHECK-LABEL: func.func @triangle_constant
// CHECK: kiln.attention %arg0, %{{.*}}, %arg2 {scale = 1.000000e+00 : f32}
// CHECK-NOT: score(
// CHECK-NEXT: mask(%{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) {
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[L:.*]] = arith.addi %[[I]], %[[ONE]] : index
// CHECK-NEXT: arith.cmpi sle, %[[J]], %[[L]] : index
func.func @triangle_constant(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x4xf32>,
                             %v: tensor<1x2x4x8xf32>) -> tensor<1x2x3x8xf32> {
  %s = kiln.matmul %q, %kt : tensor<1x2x3x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x3x4xf32>
  %tri = kiln.constant dense<[[0.0, 0.0, 0xFF800000, 0xFF800000],
                              [0.0, 0.0, 0.0, 0xFF800000],
                              [0.0, 0.0, 0.0, 0.0]]> : tensor<3x4xf32>
  %tb = kiln.broadcast %tri dims = [2, 3] : tensor<3x4xf32> -> tensor<1x2x3x4xf32>
  %a = kiln.add %s, %tb : tensor<1x2x3x4xf32>
  %p = kiln.softmax %a : tensor<1x2x3x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x3x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Tests that an additive -inf constant that is not causal (here the upper
// triangle is kept instead) is an ordinary additive mask: captured as the
// [T, S] constant and added in the score region, no mask region.
// CHECK-LABEL: func.func @anticausal_constant
// CHECK: %[[TRI:.*]] = kiln.constant
// CHECK: kiln.attention %arg0, %{{.*}}, %arg2 captures(%[[TRI]]) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: score(%[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[C:.*]]: tensor<2x2xf32>) {
// CHECK-NEXT: %[[X:.*]] = tensor.extract %[[C]][%[[I]], %[[J]]] : tensor<2x2xf32>
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[X]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
// CHECK-NOT: mask(
func.func @anticausal_constant(%q: tensor<1x1x2x8xf32>, %kt: tensor<1x1x8x2xf32>,
                               %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = kiln.matmul %q, %kt : tensor<1x1x2x8xf32>, tensor<1x1x8x2xf32> -> tensor<1x1x2x2xf32>
  %tri = kiln.constant dense<[[0.0, 0.0], [0xFF800000, 0.0]]> : tensor<2x2xf32>
  %tb = kiln.broadcast %tri dims = [2, 3] : tensor<2x2xf32> -> tensor<1x1x2x2xf32>
  %a = kiln.add %s, %tb : tensor<1x1x2x2xf32>
  %p = kiln.softmax %a : tensor<1x1x2x2xf32>
  %o = kiln.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32> -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}
