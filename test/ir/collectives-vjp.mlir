// RUN: kiln-opt %s --split-input-file --kiln-autodiff --verify-diagnostics | FileCheck %s

// Tests that all_reduce's VJP is the same all_reduce of the cotangent, and
// that all_gather and reduce_scatter are each other's adjoints (mean scales
// the gathered cotangent by 1 / axis size).
// CHECK-LABEL: func.func @adjoints
// CHECK: %[[S:.*]] = kiln.reduce_scatter mean
// CHECK: %[[AG:.*]] = kiln.all_gather %{{.*}} over "data" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01> : tensor<4x3xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[AG]], %[[HALF]]
// CHECK: %[[RS:.*]] = kiln.reduce_scatter sum %[[SCALED]] over "data" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[AR:.*]] = kiln.all_reduce sum %[[RS]] over "data" : tensor<2x3xf32>
// CHECK: return %{{.*}}, %[[AR]]
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @adjoints(%w: tensor<2x3xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %a = kiln.all_reduce sum %w over "data" : tensor<2x3xf32>
    %g = kiln.all_gather %a over "data" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
    %s = kiln.reduce_scatter mean %g over "data" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
    %sq = kiln.mul %s, %s : tensor<2x3xf32>
    %l = kiln.reduce_sum %sq dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that mesh_broadcast is not differentiable, and autodiff says where.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @broadcast(%w: tensor<3xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    // expected-error @+1 {{'kiln.mesh_broadcast' op lies between a parameter and the loss but does not implement DifferentiableOpInterface}}
    %b = kiln.mesh_broadcast %w over "data" root = 0 : tensor<3xf32>
    %l = kiln.reduce_sum %b dims = [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests the VJPs over a tensor axis, where the ranks share one loss and
// the cotangent of a value every rank holds whole is whole (Megatron's
// conjugates): mesh_vary's VJP is the all-reduce of the ranks' parts (and
// the op is dropped after autodiff), all_reduce sum's is the identity,
// all_gather and local_shard are each other's adjoints, and all_reduce
// "mean"'s scales by 1 / axis size.
// CHECK-LABEL: func.func @tensor_axis
// CHECK-NOT: kiln.mesh_vary
// CHECK: %[[LS:.*]] = kiln.local_shard %{{.*}} over "model" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[G:.*]] = kiln.all_gather %[[LS]] over "model" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: %[[M:.*]] = kiln.all_reduce mean %[[G]] over "model"
// CHECK: %[[AR:.*]] = kiln.all_reduce sum %{{.*}} over "model"
// The backward: mean's 1 / 2, all_gather's local_shard, local_shard's
// all_gather, then mesh_vary's all-reduce; the forward's sum passes its
// cotangent through unchanged (no all-reduce for it).
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01>
// CHECK: kiln.mul %{{.*}}, %[[HALF]]
// CHECK: kiln.local_shard %{{.*}} over "model" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: kiln.all_gather %{{.*}} over "model" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: %[[BACK:.*]] = kiln.all_reduce sum %{{.*}} over "model" : tensor<4x3xf32>
// CHECK-NOT: kiln.all_reduce
// CHECK: return %{{.*}}, %[[BACK]]
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @tensor_axis(%w: tensor<4x3xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %v = kiln.mesh_vary %w over "model" : tensor<4x3xf32>
    %s = kiln.local_shard %v over "model" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
    %g = kiln.all_gather %s over "model" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
    %m = kiln.all_reduce mean %g over "model" : tensor<4x3xf32>
    %sq = kiln.mul %m, %m : tensor<4x3xf32>
    %r = kiln.all_reduce sum %sq over "model" : tensor<4x3xf32>
    %l = kiln.reduce_sum %r dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
