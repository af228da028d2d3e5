// RUN: kiln-opt %s --kiln-training-pipeline | FileCheck %s

// Tests that the whole pipeline (cleanup, autodiff, optimizer, each followed
// by canonicalize and CSE) turns a forward loss into a training step: a tied
// embedding/unembedding table and a bias get gradients, a grad norm and an
// AdamW update each.
// CHECK-LABEL: func.func @step
// CHECK-SAME: {kiln.name = "wte", kiln.role = "adam_m"}
// CHECK-SAME: {kiln.name = "step", kiln.role = "step"}
// CHECK-SAME: {kiln.name = "grad_norm", kiln.role = "grad_norm"}
// CHECK: %[[LOSS:.*]] = kiln.cross_entropy
// CHECK: %[[DLOGITS:.*]] = kiln.cross_entropy_grad
// CHECK: %[[DB:.*]] = kiln.reduce_sum %[[DLOGITS]] dims = [0, 1] : tensor<2x4x16xf32> -> tensor<16xf32>
// CHECK: kiln.embedding_grad
// CHECK: %[[DWTE:.*]] = kiln.add
// CHECK: %[[NORM:.*]] = kiln.sqrt
// CHECK: %[[P0:.*]], %[[M0:.*]], %[[V0:.*]] = kiln.adamw %arg0, %[[DWTE]]
// CHECK: %[[P1:.*]], %[[M1:.*]], %[[V1:.*]] = kiln.adamw %arg1, %[[DB]]
// CHECK: return %[[LOSS]], %[[DWTE]], %[[DB]], %[[NORM]], %[[P0]], %[[P1]], %[[M0]], %[[M1]], %[[V0]], %[[V1]]
module attributes {kiln.train = {batch = 2 : i64, seq = 4 : i64,
    optimizer = "adamw", beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  func.func @step(
      %wte: tensor<16x8xf32> {kiln.role = "param", kiln.name = "wte"},
      %b: tensor<16xf32> {kiln.role = "param", kiln.name = "b"},
      %tokens: tensor<2x4xi32> {kiln.role = "input", kiln.name = "tokens"},
      %targets: tensor<2x4xi32> {kiln.role = "input", kiln.name = "targets"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    %0 = kiln.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %1 = kiln.matmul %0, %wte {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %2 = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
    %3 = kiln.add %1, %2 : tensor<2x4x16xf32>
    %4 = kiln.cross_entropy %3, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
    return %4 : tensor<f32>
  }
}
