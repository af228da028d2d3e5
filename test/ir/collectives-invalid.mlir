// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Tests that a collective needs the module's mesh.
func.func @no_mesh(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{names mesh axis 'data', but the module has no kiln.mesh attribute}}
  %r = kiln.all_reduce sum %a over "data" : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that the axis must be one of the mesh's, and the error shows them.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @unknown_axis(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{names mesh axis 'tensor', but the module's kiln.mesh is {data = 2 : i64}}}
    %r = kiln.all_reduce sum %a over "tensor" : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// Tests that only sum and mean are reductions.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @bad_reduction(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+2 {{expected ::mlir::kiln::Reduction to be one of: sum, mean}}
    // expected-error @+1 {{failed to parse Kiln_ReductionAttr parameter 'value'}}
    %r = kiln.all_reduce max %a over "data" : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// Tests that reduce_scatter needs a dimension that splits evenly.
module attributes {kiln.mesh = {data = 4 : i64}} {
  func.func @uneven(%a: tensor<6x2xf32>) -> tensor<1x2xf32> {
    // expected-error @+1 {{dimension 0 of 'tensor<6x2xf32>' does not split into 4 equal slices (the mesh axis size)}}
    %r = kiln.reduce_scatter sum %a over "data" dim = 0 : tensor<6x2xf32> -> tensor<1x2xf32>
    return %r : tensor<1x2xf32>
  }
}

// -----

// Tests that all_gather's result is the input grown by the axis size.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @gather_type(%a: tensor<3x2xf32>) -> tensor<3x2xf32> {
    // expected-error @+1 {{result type 'tensor<3x2xf32>', expected 'tensor<6x2xf32>'}}
    %r = kiln.all_gather %a over "data" dim = 0 : tensor<3x2xf32> -> tensor<3x2xf32>
    return %r : tensor<3x2xf32>
  }
}

// -----

// Tests that all_gather's dim must exist.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @gather_dim(%a: tensor<3x2xf32>) -> tensor<3x2xf32> {
    // expected-error @+1 {{dim = 2 is not a dimension of 'tensor<3x2xf32>'}}
    %r = kiln.all_gather %a over "data" dim = 2 : tensor<3x2xf32> -> tensor<3x2xf32>
    return %r : tensor<3x2xf32>
  }
}

// -----

// Tests that the broadcast root must be a rank of the axis.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @root(%a: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{root = 2 is not a rank of mesh axis 'data' (size 2)}}
    %r = kiln.mesh_broadcast %a over "data" root = 2 : tensor<3xf32>
    return %r : tensor<3xf32>
  }
}

// -----

// Tests that all_reduce takes float tensors only.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @ints(%a: tensor<3xi32>) -> tensor<3xi32> {
    // expected-error @+1 {{operand #0 must be variadic of statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
    %r = kiln.all_reduce sum %a over "data" : tensor<3xi32>
    return %r : tensor<3xi32>
  }
}

// -----

// Tests that local_shard keeps one rank's equal slice, like reduce_scatter.
module attributes {kiln.mesh = {data = 4 : i64}} {
  func.func @shard_uneven(%a: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{dimension 0 of 'tensor<6xf32>' does not split into 4 equal slices (the mesh axis size)}}
    %r = kiln.local_shard %a over "data" dim = 0 : tensor<6xf32> -> tensor<1xf32>
    return %r : tensor<1xf32>
  }
}

// -----

// Tests that local_shard's result is one slice of its input.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @shard_shape(%a: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{result type 'tensor<2xf32>', expected 'tensor<4xf32>' ('tensor<8xf32>' split over 2 ranks along dim 0)}}
    %r = kiln.local_shard %a over "data" dim = 0 : tensor<8xf32> -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
}

// -----

// Tests that mesh_vary is for tensor axes only: the data axis's ranks
// never share one loss.
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @vary_data(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{needs a tensor axis, not the data axis}}
    %r = kiln.mesh_vary %a over "data" : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// Tests that a sharding constraint has one entry per dimension.
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @constraint_rank(%a: tensor<4x6xf32>) -> tensor<4x6xf32> {
    // expected-error @+1 {{has 1 sharding entries for a tensor of rank 2}}
    %r = kiln.sharding_constraint %a ["model"] : tensor<4x6xf32>
    return %r : tensor<4x6xf32>
  }
}

// -----

// Tests that a sharding constraint names axes of the mesh.
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @constraint_axis(%a: tensor<4x6xf32>) -> tensor<4x6xf32> {
    // expected-error @+1 {{names mesh axis 'tensor', but the module's kiln.mesh is {model = 2 : i64}}}
    %r = kiln.sharding_constraint %a ["", "tensor"] : tensor<4x6xf32>
    return %r : tensor<4x6xf32>
  }
}
