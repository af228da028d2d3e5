// RUN: kiln-opt %s --split-input-file --kiln-attention-match | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-attention-match --canonicalize | FileCheck %s --check-prefix=DEAD

// Masks and biases built from kiln.iota, kiln.cmp, kiln.select and
// kiln.convert (the language's where(), comparisons and float()) are
// rebuilt at (b, h, i, j) inside kiln.attention's regions; after the
// phase's canonicalizer no [T, S] (or [B, H, T, S]) tensor is left.

// Tests that where(j <= i and j > i - 3, scores, -inf) -- a causal sliding
// window of 3 built from iota -- becomes a mask region of index compares
// with no capture.
// CHECK-LABEL: func.func @sliding_window_where
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 2.500000e-01 : f32}
// CHECK-NOT: score(
// CHECK: mask(%{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) {
// CHECK-DAG: %[[JJ:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-DAG: %[[II:.*]] = arith.index_cast %[[I]] : index to i32
// CHECK: %[[C1:.*]] = arith.cmpi sle, %[[JJ]], %[[II]] : i32
// CHECK: %[[LO:.*]] = arith.subi %[[II]], %{{.*}} : i32
// CHECK: %[[C2:.*]] = arith.cmpi sgt, %[[JJ]], %[[LO]] : i32
// CHECK: %[[K:.*]] = arith.select %[[C1]], %[[C2]], %{{.*}} : i1
// CHECK: kiln.yield %[[K]] : i1
// DEAD-LABEL: func.func @sliding_window_where
// DEAD-NOT: tensor<8x8x
// DEAD-NOT: tensor<1x2x8x8x
// DEAD: kiln.attention
func.func @sliding_window_where(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<1x2x8x8xf32>
  %d = kiln.mul %s, %c : tensor<1x2x8x8xf32>
  %iota = kiln.iota : tensor<8xi32>
  %i = kiln.broadcast %iota dims = [0] : tensor<8xi32> -> tensor<8x8xi32>
  %j = kiln.broadcast %iota dims = [1] : tensor<8xi32> -> tensor<8x8xi32>
  %causal = kiln.cmp "le", %j, %i : tensor<8x8xi32> -> tensor<8x8xi1>
  %three = kiln.constant dense<3> : tensor<8x8xi32>
  %lo = kiln.sub %i, %three : tensor<8x8xi32>
  %window = kiln.cmp "gt", %j, %lo : tensor<8x8xi32> -> tensor<8x8xi1>
  %false = kiln.constant dense<false> : tensor<8x8xi1>
  %keep = kiln.select %causal, %window, %false : tensor<8x8xi1>, tensor<8x8xi1>
  %keep4 = kiln.broadcast %keep dims = [2, 3] : tensor<8x8xi1> -> tensor<1x2x8x8xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x2x8x8xf32>
  %m = kiln.select %keep4, %d, %ninf : tensor<1x2x8x8xi1>, tensor<1x2x8x8xf32>
  %p = kiln.softmax %m : tensor<1x2x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

// Tests that an additive mask scores + where(j < len[b], 0, -inf) keeps the
// per-sample lengths [B] as the only capture, read at b.
// CHECK-LABEL: func.func @length_additive
// CHECK: kiln.attention %arg0, %arg1, %arg2 captures(%arg3) {scale = 1.000000e+00 : f32}
// CHECK-NOT: score(
// CHECK: mask(%[[B:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[J:.*]]: index, %[[LEN:.*]]: tensor<2xi32>) {
// CHECK-DAG: %[[JJ:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-DAG: %[[N:.*]] = tensor.extract %[[LEN]][%[[B]]] : tensor<2xi32>
// CHECK: %[[K:.*]] = arith.cmpi slt, %[[JJ]], %[[N]] : i32
// CHECK: kiln.yield %[[K]] : i1
// DEAD-LABEL: func.func @length_additive
// DEAD-NOT: tensor<2x8xi1>
// DEAD-NOT: tensor<2x2x4x8xf32>
// DEAD: kiln.attention
func.func @length_additive(%q: tensor<2x2x4x16xf32>, %k: tensor<2x2x8x16xf32>,
                           %v: tensor<2x2x8x16xf32>, %len: tensor<2xi32>) -> tensor<2x2x4x16xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<2x2x4x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x4x8xf32>
  %iota = kiln.iota : tensor<8xi32>
  %j = kiln.broadcast %iota dims = [1] : tensor<8xi32> -> tensor<2x8xi32>
  %n = kiln.broadcast %len dims = [0] : tensor<2xi32> -> tensor<2x8xi32>
  %keep = kiln.cmp "lt", %j, %n : tensor<2x8xi32> -> tensor<2x8xi1>
  %zero = kiln.constant dense<0.0> : tensor<2x8xf32>
  %ninf = kiln.constant dense<0xFF800000> : tensor<2x8xf32>
  %add = kiln.select %keep, %zero, %ninf : tensor<2x8xi1>, tensor<2x8xf32>
  %add4 = kiln.broadcast %add dims = [0, 3] : tensor<2x8xf32> -> tensor<2x2x4x8xf32>
  %a = kiln.add %s, %add4 : tensor<2x2x4x8xf32>
  %p = kiln.softmax %a : tensor<2x2x4x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x2x4x8xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x4x16xf32>
  return %o : tensor<2x2x4x16xf32>
}

// -----

// Tests that where(drop, -inf, scores) keeps the negation of drop.
// CHECK-LABEL: func.func @where_drop_first
// CHECK: mask(
// CHECK: %[[D:.*]] = arith.cmpi sgt
// CHECK: %[[T:.*]] = arith.constant true
// CHECK: %[[K:.*]] = arith.xori %[[D]], %[[T]] : i1
// CHECK: kiln.yield %[[K]] : i1
func.func @where_drop_first(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                            %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %iota = kiln.iota : tensor<4xi32>
  %i = kiln.broadcast %iota dims = [2] : tensor<4xi32> -> tensor<1x1x4x4xi32>
  %j = kiln.broadcast %iota dims = [3] : tensor<4xi32> -> tensor<1x1x4x4xi32>
  %drop = kiln.cmp "gt", %j, %i : tensor<1x1x4x4xi32> -> tensor<1x1x4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x1x4x4xf32>
  %m = kiln.select %drop, %ninf, %s : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = kiln.softmax %m : tensor<1x1x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// Tests that an ALiBi bias slope[h] * float(j - i) built from iota folds
// into the score region as index_cast / subi / sitofp with only the slope
// [H] captured, next to an iota-built causal where() in the mask region.
// CHECK-LABEL: func.func @alibi_from_iota
// CHECK: kiln.attention %arg0, %arg1, %arg2 captures(%arg3) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: score(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[SL:.*]]: tensor<2xf32>) {
// CHECK-DAG: %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
// CHECK-DAG: %[[JJ:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-DAG: %[[II:.*]] = arith.index_cast %[[I]] : index to i32
// CHECK: %[[D:.*]] = arith.subi %[[JJ]], %[[II]] : i32
// CHECK: %[[DF:.*]] = arith.sitofp %[[D]] : i32 to f32
// CHECK: %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %[[DF]] : f32
// CHECK: %[[R:.*]] = arith.addf %[[S]], %[[BIAS]] : f32
// CHECK: kiln.yield %[[R]] : f32
// CHECK: mask(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<2xf32>) {
// CHECK: arith.cmpi sle
// DEAD-LABEL: func.func @alibi_from_iota
// DEAD-NOT: tensor<1x2x8x8x
// DEAD-NOT: tensor<8x8x
// DEAD: kiln.attention
func.func @alibi_from_iota(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                           %v: tensor<1x2x8x16xf32>, %slope: tensor<2xf32>) -> tensor<1x2x8x16xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  %iota = kiln.iota : tensor<8xi32>
  %i = kiln.broadcast %iota dims = [0] : tensor<8xi32> -> tensor<8x8xi32>
  %j = kiln.broadcast %iota dims = [1] : tensor<8xi32> -> tensor<8x8xi32>
  %dist = kiln.sub %j, %i : tensor<8x8xi32>
  %distf = kiln.convert %dist : tensor<8x8xi32> -> tensor<8x8xf32>
  %dist4 = kiln.broadcast %distf dims = [2, 3] : tensor<8x8xf32> -> tensor<1x2x8x8xf32>
  %sb = kiln.broadcast %slope dims = [1] : tensor<2xf32> -> tensor<1x2x8x8xf32>
  %bias = kiln.mul %sb, %dist4 : tensor<1x2x8x8xf32>
  %a = kiln.add %s, %bias : tensor<1x2x8x8xf32>
  %keep = kiln.cmp "le", %j, %i : tensor<8x8xi32> -> tensor<8x8xi1>
  %keep4 = kiln.broadcast %keep dims = [2, 3] : tensor<8x8xi1> -> tensor<1x2x8x8xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x2x8x8xf32>
  %m = kiln.select %keep4, %a, %ninf : tensor<1x2x8x8xi1>, tensor<1x2x8x8xf32>
  %p = kiln.softmax %m : tensor<1x2x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

// Tests that grouped-query heads written by hand -- k and v [B, KVH, S, D]
// broadcast to [B, KVH, G, S, D] and reshaped to [B, H, S, D] -- become
// kiln.attention on the original 2-head k and v (H = 4, G = 2).
// CHECK-LABEL: func.func @gqa_repeat
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f32} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
// DEAD-LABEL: func.func @gqa_repeat
// DEAD-NOT: tensor<1x2x2x8x16xf32>
// DEAD: kiln.attention
func.func @gqa_repeat(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                      %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %kb = kiln.broadcast %k dims = [0, 1, 3, 4] : tensor<1x2x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %kb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %vb = kiln.broadcast %v dims = [0, 1, 3, 4] : tensor<1x2x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = kiln.reshape %vb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = kiln.transpose %kr permutation = [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %vr : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// Tests the other hand-written repeat: reshape kv to [B, KVH, 1, S, D],
// broadcast the size-1 group dim, reshape to [B, H, S, D].
// CHECK-LABEL: func.func @gqa_unit_dim
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f32} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
func.func @gqa_unit_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                        %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %k5 = kiln.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %kb = kiln.broadcast %k5 dims = [0, 1, 2, 3, 4] : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %kb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %v5 = kiln.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %vb = kiln.broadcast %v5 dims = [0, 1, 2, 3, 4] : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = kiln.reshape %vb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %s = kiln.matmul %q, %kr {transpose_rhs = true} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %vr : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}
