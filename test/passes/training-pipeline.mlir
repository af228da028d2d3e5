// RUN: kiln-opt %s --kiln-training-pipeline=last-phase=optimizer | FileCheck %s
// RUN: kiln-opt %s --kiln-training-pipeline | FileCheck %s --check-prefix=FUSED
// RUN: not kiln-opt %s --kiln-training-pipeline=last-phase=bogus 2>&1 | FileCheck %s --check-prefix=BOGUS
// An unknown last-phase is an error naming the phases (it ran only the first).
// BOGUS: error: kiln-training-pipeline: unknown last-phase 'bogus' (phases: kiln, pad-dims, attention-match, sharding, eval, autodiff, grad-accum, mixed-precision, optimizer, data-parallel, remat, fusion)

// Tests that the pipeline up to the optimizer (cleanup, eval clone, autodiff,
// accumulation, optimizer, each followed by canonicalize/CSE) turns a forward loss into the
// three programs: @step (forward + backward of one micro-batch, grad_accum = 2
// accumulators, the metric), @update (grad norm, clipping, one AdamW update
// per param: the tied table is an embedding, the bias a bias, both excluded
// from decay) and @eval (forward only).
// The whole pipeline ends with fusion (its own cases: fusion.mlir).
// FUSED-LABEL: func.func @step
// FUSED: kiln.fusion
// FUSED-LABEL: func.func @update
// FUSED: kiln.fusion optimizer
// CHECK-LABEL: func.func @step
// CHECK-SAME: {kiln.name = "loss", kiln.role = #kiln.role<loss>}
// CHECK-SAME: {kiln.name = "wte", kiln.role = #kiln.role<grad>}
// CHECK-SAME: {kiln.name = "b_rms", kiln.role = #kiln.role<metric>}
// CHECK: %[[LOSS:.*]] = kiln.cross_entropy
// CHECK: %[[DLOGITS:.*]] = kiln.cross_entropy_grad
// CHECK: kiln.embedding_grad
// CHECK: %[[LA:.*]] = kiln.accumulate %arg4, %[[LOSS]] {scale = 5.000000e-01 : f32}
// CHECK: %[[GW:.*]] = kiln.accumulate %arg5
// CHECK: %[[GB:.*]] = kiln.accumulate %arg6
// CHECK: return %[[LA]], %{{.*}}, %[[GW]], %[[GB]]
// CHECK-LABEL: func.func @update
// CHECK-SAME: kiln.name = "wte", kiln.param_kind = "embedding", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "b", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK: %[[NORM:.*]] = kiln.sqrt
// CHECK: %[[SCALE:.*]] = kiln.grad_scale %[[NORM]], %arg4 {max_norm = 1.000000e+00 : f32}
// CHECK: kiln.adam %arg0, %arg2, {{.*}}, %[[SCALE]]
// CHECK: kiln.adam %arg1, %arg3, {{.*}}, %[[SCALE]]
// CHECK-LABEL: func.func @eval
// CHECK-SAME: -> (tensor<f32> {kiln.name = "eval_loss", kiln.role = #kiln.role<eval_loss>})
// CHECK-NOT: kiln.cross_entropy_grad
// CHECK: kiln.cross_entropy
// CHECK-NEXT: return
module attributes {kiln.train = #kiln.train<batch = 2, seq = 4, grad_accum = 2,
    clip = 1.0 : f32, optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  func.func @step(
      %wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
      %b: tensor<16xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
      %tokens: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
      %targets: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "b_rms"}) {
    %0 = kiln.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %1 = kiln.matmul %0, %wte {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %2 = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
    %3 = kiln.add %1, %2 : tensor<2x4x16xf32>
    %4 = kiln.cross_entropy %3, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
    %5 = kiln.mul %b, %b : tensor<16xf32>
    %6 = kiln.reduce_sum %5 dims = [0] : tensor<16xf32> -> tensor<f32>
    %7 = kiln.sqrt %6 : tensor<f32>
    return %4, %7 : tensor<f32>, tensor<f32>
  }
}
