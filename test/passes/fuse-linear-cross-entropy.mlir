// RUN: kiln-opt %s --split-input-file --kiln-fuse-linear-cross-entropy="rows=4" | FileCheck %s

// Tests that cross_entropy of x @ transpose(w) (a transpose op or the
// matmul's transpose_rhs) becomes linear_cross_entropy of x and targets
// flattened to [N, D] and [N], with valid_classes kept, and that the GEMM
// and the transpose go.
// CHECK-LABEL: func.func @step
// CHECK-DAG: %[[X:.*]] = kiln.reshape %arg1 : tensor<2x5x8xf32> -> tensor<10x8xf32>
// CHECK-DAG: %[[T:.*]] = kiln.reshape %arg2 : tensor<2x5xi32> -> tensor<10xi32>
// CHECK: %[[L:.*]] = kiln.linear_cross_entropy %[[X]], %arg0, %[[T]] {chunk_rows = 4 : i64, valid_classes = 60 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
// CHECK-NOT: kiln.matmul
// CHECK-NOT: kiln.transpose
// CHECK: return %[[L]]
func.func @step(%w: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %x: tensor<2x5x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %t: tensor<2x5xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %wt = kiln.transpose %w permutation = [1, 0] : tensor<64x8xf32> -> tensor<8x64xf32>
  %logits = kiln.matmul %x, %wt : tensor<2x5x8xf32>, tensor<8x64xf32> -> tensor<2x5x64xf32>
  %loss = kiln.cross_entropy %logits, %t {valid_classes = 60 : i64} : tensor<2x5x64xf32>, tensor<2x5xi32>
  return %loss : tensor<f32>
}

// -----

// Tests that logits read by another op too keep the plain ops, with the
// reason on the loss, and that an untied head stored [D, V] (x @ v) is
// fused through a transpose of v to [V, D].
// CHECK-LABEL: func.func @step
// CHECK: kiln.cross_entropy {{.*}} {kiln.not_fused_linear = "the logits are also read by another op"}
// CHECK: %[[VT:.*]] = kiln.transpose %arg1 permutation = [1, 0] : tensor<8x64xf32> -> tensor<64x8xf32>
// CHECK: kiln.linear_cross_entropy %{{.*}}, %[[VT]], %{{.*}} {chunk_rows = 4 : i64} : tensor<10x8xf32>, tensor<64x8xf32>, tensor<10xi32>
// CHECK-NOT: kiln.matmul %arg2, %arg1
func.func @step(%w: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %v: tensor<8x64xf32> {kiln.role = #kiln.role<param>, kiln.name = "v"},
                %x: tensor<10x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %t: tensor<10xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<10x64xf32> {kiln.role = #kiln.role<metric>, kiln.name = "l"}) {
  %logits = kiln.matmul %x, %w {transpose_rhs = true} : tensor<10x8xf32>, tensor<64x8xf32> -> tensor<10x64xf32>
  %loss = kiln.cross_entropy %logits, %t : tensor<10x64xf32>, tensor<10xi32>
  %logits2 = kiln.matmul %x, %v : tensor<10x8xf32>, tensor<8x64xf32> -> tensor<10x64xf32>
  %loss2 = kiln.cross_entropy %logits2, %t : tensor<10x64xf32>, tensor<10xi32>
  %sum = kiln.add %loss, %loss2 : tensor<f32>
  return %sum, %logits : tensor<f32>, tensor<10x64xf32>
}
