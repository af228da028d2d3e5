// RUN: kiln-opt %s --split-input-file --kiln-fuse-gemm-epilogue | FileCheck %s
//
// The refused candidates of --kiln-fuse-gemm-epilogue: each leaves the GEMM
// without an epilogue and records the reason on the matmul (kiln.not_fused).

// Tests that a bias broadcast along the columns (a [M] vector, dims = [0])
// is no GEMM epilogue: nothing is fused and the matmul says why.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.matmul {{.*}}kiln.not_fused = "into kiln.add at {{.*}} as a GEMM epilogue: the other operand is not a [N] vector broadcast along the rows
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %c: tensor<4xf32>)
    -> tensor<4x16xf32> {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %cc = kiln.broadcast %c dims = [0] : tensor<4xf32> -> tensor<4x16xf32>
  %s = kiln.add %p, %cc : tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// Tests that a product also read before its bias add (an activation metric
// of the GEMM output) is not fused: no epilogue writes the product before
// the bias, so the kernel would have nothing to give that reader.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.matmul {{.*}}kiln.not_fused = "into kiln.add at {{.*}} as a GEMM epilogue: the GEMM result is also read elsewhere
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %sq = kiln.mul %p, %p : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = kiln.add %p, %bb : tensor<4x16xf32>
  return %s, %sq : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a batched GEMM (batch 2, per-batch rhs) gets no epilogue: the
// bias and aux of a cuBLASLt epilogue are per matrix.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.matmul {{.*}}kiln.not_fused = "into kiln.gelu at {{.*}} as a GEMM epilogue: a batched GEMM (batch 2) has no epilogue
func.func @step(%x: tensor<2x4x8xf32>, %w: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  %p = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<2x8x16xf32> -> tensor<2x4x16xf32>
  %g = kiln.gelu %p : tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

// Tests that a sum over the rows of a GEMM's lhs that the GEMM does not
// reduce over k (dX = dY W^T reads dY as [M, K] with k = the columns) is no
// bias-gradient epilogue of that GEMM.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.reduce_sum
func.func @step(%dy: tensor<4x8xf32>, %w: tensor<16x8xf32>)
    -> (tensor<4x16xf32>, tensor<8xf32>) {
  %db = kiln.reduce_sum %dy dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %dx = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  return %dx, %db : tensor<4x16xf32>, tensor<8xf32>
}

// -----

// Tests that a bf16 GEMM whose f32 bias sum is also read unrounded is not
// fused (the kernel stores only the rounded sum), with the reason recorded,
// and that the unfused chain is left as it was.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.matmul {{.*}}kiln.not_fused = "into kiln.add at {{.*}} as a GEMM epilogue: the bf16 GEMM's bias sum is read other than by one rounding to bf16
// CHECK-SAME: -> tensor<4x16xbf16>
// CHECK-NOT: kiln.fusion
func.func @step(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %pw = kiln.convert %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %s = kiln.add %pw, %bb : tensor<4x16xf32>
  %sb = kiln.convert %s : tensor<4x16xf32> -> tensor<4x16xbf16>
  return %sb, %s : tensor<4x16xbf16>, tensor<4x16xf32>
}
