// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-partition

// Tests that a parameter split along two dimensions (over two axes) is an
// error: its block on a rank would be a corner of the whole tensor, which
// initialisation and checkpoints do not lay out.
module attributes {kiln.mesh = {model = 2 : i64, tensor = 2 : i64}} {
  // expected-error @below {{parameter "w" is split along 2 dimensions; a parameter may be split along one}}
  func.func @step(%arg0: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %arg1: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.sharding = ["tensor", "model"]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %1 = kiln.reduce_sum %arg1 dims = [0, 1] : tensor<64x256xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}
