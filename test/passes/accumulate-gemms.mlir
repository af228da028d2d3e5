// RUN: kiln-opt %s --split-input-file --kiln-accumulate-gemms | FileCheck %s

// Tests the q/k/v input-gradient sum of a transformer block: the second and
// third GEMMs add into the first one's buffer through 2-D views, and the sum
// is read through a view of the last accumulation.
// CHECK-LABEL: func.func @step
// CHECK: %[[P:.*]] = kiln.matmul %arg0, %arg3 {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
// CHECK-NOT: kiln.add
// CHECK: %[[A0:.*]] = kiln.reshape %[[P]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[K:.*]] = kiln.reshape %arg1 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK: %[[S1:.*]] = kiln.matmul_accumulate %[[A0]], %[[K]], %arg4 {transpose_rhs = true} : tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xbf16>
// CHECK: %[[V1:.*]] = kiln.reshape %[[S1]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[A1:.*]] = kiln.reshape %[[V1]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[V:.*]] = kiln.reshape %arg2 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK: %[[S2:.*]] = kiln.matmul_accumulate %[[A1]], %[[V]], %arg5 {transpose_rhs = true}
// CHECK: %[[R:.*]] = kiln.reshape %[[S2]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK-NOT: kiln.matmul %
// CHECK: return %[[R]]
func.func @step(%dq: tensor<2x4x8xbf16>, %dk: tensor<2x4x8xbf16>, %dv: tensor<2x4x8xbf16>,
                %wq: tensor<8x8xbf16>, %wk: tensor<8x8xbf16>, %wv: tensor<8x8xbf16>) -> tensor<2x4x8xf32> {
  %p = kiln.matmul %dq, %wq {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
  %r = kiln.matmul %dk, %wk {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
  %s = kiln.add %p, %r : tensor<2x4x8xf32>
  %u = kiln.matmul %dv, %wv {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
  %t = kiln.add %s, %u : tensor<2x4x8xf32>
  return %t : tensor<2x4x8xf32>
}

// -----

// Tests what stays: a product read twice (its buffer is still needed), a
// sum with a value that is not a GEMM product (the residual stream) and a
// batched GEMM (3-D rhs).
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.matmul_accumulate
// CHECK: return
func.func @step(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8x8xf32>,
                %b3: tensor<2x4x8xf32>, %w3: tensor<2x8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>) {
  %p = kiln.matmul %a, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %q = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %s = kiln.add %p, %q : tensor<4x8xf32>
  %r = kiln.add %x, %q : tensor<4x8xf32>
  %m = kiln.matmul %b3, %w3 : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %n = kiln.matmul %b3, %w3 : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %o = kiln.add %m, %n : tensor<2x4x8xf32>
  return %s, %r, %p, %o : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Tests a 2-D pair whose first product comes later in the block: the
// later GEMM (%p here) accumulates into the earlier one's buffer.
// CHECK-LABEL: func.func @step
// CHECK: %[[Q:.*]] = kiln.matmul %arg1, %arg2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = kiln.matmul_accumulate %[[Q]], %arg0, %arg2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: return %[[S]]
func.func @step(%a: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %q = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %p = kiln.matmul %a, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %s = kiln.add %p, %q : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests a tied embedding's gradient: the classifier's weight gradient (a
// matmul_accumulate of the chunks) plus the embedding's scatter of rows
// becomes one embedding_grad adding its rows into that gradient's buffer;
// an embedding_grad whose table gradient something else also reads stays
// as it is.
// CHECK-LABEL: func.func @step
// CHECK: %[[DW:.*]] = kiln.matmul_accumulate
// CHECK-NOT: kiln.add
// CHECK: %[[G:.*]] = kiln.embedding_grad %arg3, %arg4 plus %[[DW]] : tensor<2x3xi32>, tensor<2x3x4xf32>, tensor<16x4xf32> -> tensor<16x4xf32>
// CHECK: %[[E:.*]] = kiln.embedding_grad %arg3, %arg4 : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<16x4xf32>
// CHECK: %[[S:.*]] = kiln.add %[[E]], %arg5
// CHECK: return %[[G]], %[[S]], %[[E]]
func.func @step(%acc: tensor<16x4xf32>, %d: tensor<6x16xbf16>, %x: tensor<6x4xbf16>,
                %tokens: tensor<2x3xi32>, %g: tensor<2x3x4xf32>, %y: tensor<16x4xf32>)
    -> (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>) {
  %dw = kiln.matmul_accumulate %acc, %d, %x {transpose_lhs = true}
      : tensor<16x4xf32>, tensor<6x16xbf16>, tensor<6x4xbf16>
  %rows = kiln.embedding_grad %tokens, %g : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<16x4xf32>
  %sum = kiln.add %dw, %rows : tensor<16x4xf32>
  %rows2 = kiln.embedding_grad %tokens, %g : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<16x4xf32>
  %sum2 = kiln.add %rows2, %y : tensor<16x4xf32>
  return %sum, %sum2, %rows2 : tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
}
