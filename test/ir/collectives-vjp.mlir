// RUN: kiln-opt %s --split-input-file --kiln-autodiff --verify-diagnostics | FileCheck %s

// Tests that all_reduce's VJP is the same all_reduce of the cotangent, and
// that all_gather and reduce_scatter are each other's adjoints (mean scales
// the gathered cotangent by 1 / axis size).
// CHECK-LABEL: func.func @adjoints
// CHECK: %[[S:.*]] = kiln.reduce_scatter "mean"
// CHECK: %[[AG:.*]] = kiln.all_gather %{{.*}} over "data" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01> : tensor<4x3xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[AG]], %[[HALF]]
// CHECK: %[[RS:.*]] = kiln.reduce_scatter "sum" %[[SCALED]] over "data" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[AR:.*]] = kiln.all_reduce "sum" %[[RS]] over "data" : tensor<2x3xf32>
// CHECK: return %{{.*}}, %[[AR]]
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @adjoints(%w: tensor<2x3xf32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    %a = kiln.all_reduce "sum" %w over "data" : tensor<2x3xf32>
    %g = kiln.all_gather %a over "data" dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
    %s = kiln.reduce_scatter "mean" %g over "data" dim = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
    %sq = kiln.mul %s, %s : tensor<2x3xf32>
    %l = kiln.reduce_sum %sq dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that mesh_broadcast is not differentiable, and autodiff says where.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @broadcast(%w: tensor<3xf32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    // expected-error @+1 {{'kiln.mesh_broadcast' op lies between a parameter and the loss but does not implement DifferentiableOpInterface}}
    %b = kiln.mesh_broadcast %w over "data" root = 0 : tensor<3xf32>
    %l = kiln.reduce_sum %b dims = [0] : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
