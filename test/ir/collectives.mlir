// RUN: kiln-opt %s --split-input-file | kiln-opt --split-input-file | FileCheck %s

// Tests that every collective parses and prints back (round trip), with its
// reduction, axis, dim, root and reason.
// CHECK-LABEL: func.func @round_trip
// CHECK: kiln.all_reduce mean %{{.*}}, %{{.*}} over "data" {reason = "data parallel"} : tensor<4x6xf32>, tensor<6xf32>
// CHECK: kiln.reduce_scatter sum %{{.*}} over "data" dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
// CHECK: kiln.all_gather %{{.*}} over "data" dim = 1 : tensor<2x6xf32> -> tensor<2x12xf32>
// CHECK: kiln.mesh_broadcast %{{.*}} over "data" root = 1 : tensor<6xf32>
// CHECK: kiln.local_shard %{{.*}} over "data" dim = 0 {reason = "ZeRO"} : tensor<6xf32> -> tensor<3xf32>
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @round_trip(%a: tensor<4x6xf32>, %b: tensor<6xf32>)
      -> (tensor<4x6xf32>, tensor<6xf32>, tensor<2x12xf32>, tensor<3xf32>) {
    %r:2 = kiln.all_reduce mean %a, %b over "data" {reason = "data parallel"}
        : tensor<4x6xf32>, tensor<6xf32>
    %s = kiln.reduce_scatter sum %r#0 over "data" dim = 0
        : tensor<4x6xf32> -> tensor<2x6xf32>
    %g = kiln.all_gather %s over "data" dim = 1
        : tensor<2x6xf32> -> tensor<2x12xf32>
    %w = kiln.mesh_broadcast %b over "data" root = 1 : tensor<6xf32>
    %l = kiln.local_shard %w over "data" dim = 0 {reason = "ZeRO"}
        : tensor<6xf32> -> tensor<3xf32>
    return %r#0, %r#1, %g, %l : tensor<4x6xf32>, tensor<6xf32>, tensor<2x12xf32>, tensor<3xf32>
  }
}

// -----

// Tests that the tensor-parallel ops round-trip: mesh_vary with its reason,
// sharding_constraint with one axis (or "") per dimension.
// CHECK-LABEL: func.func @tensor_parallel_round_trip
// CHECK: kiln.mesh_vary %{{.*}} over "model" {reason = "column-parallel input"} : tensor<4x6xf32>
// CHECK: kiln.sharding_constraint %{{.*}} ["", "model"] : tensor<4x6xf32>
module attributes {kiln.mesh = {data = 2 : i64, model = 2 : i64}} {
  func.func @tensor_parallel_round_trip(%a: tensor<4x6xf32>) -> tensor<4x6xf32> {
    %v = kiln.mesh_vary %a over "model" {reason = "column-parallel input"} : tensor<4x6xf32>
    %c = kiln.sharding_constraint %v ["", "model"] : tensor<4x6xf32>
    return %c : tensor<4x6xf32>
  }
}
