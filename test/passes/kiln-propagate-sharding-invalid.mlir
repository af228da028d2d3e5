// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-propagate-sharding

// Tests that a split dimension an op needs whole is an error at the op,
// never a silent gather: softmax normalizes the rows w's columns split.
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  // expected-note @below {{the annotation is here}}
                  %arg1: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.sharding = ["", "model"]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.matmul %arg0, %arg1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    // expected-error @below {{this softmax needs the whole row it normalizes, but dimension 1 of its operand #0 [8, 256] is split over mesh axis 'model'}}
    %1 = kiln.softmax %0 : tensor<8x256xf32>
    %2 = kiln.reduce_sum %1 dims = [0, 1] : tensor<8x256xf32> -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// Tests that propagation never replicates a dimension the axis does not
// divide: w's 10 columns split over 2 reach a reshape to [8, 5, 2], whose
// major dimension (5, where the split lands) 2 ranks do not divide.
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  // expected-note @below {{the annotation is here}}
                  %arg1: tensor<64x10xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.sharding = ["", "model"]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.matmul %arg0, %arg1 : tensor<8x64xf32>, tensor<64x10xf32> -> tensor<8x10xf32>
    // expected-error @below {{reaches dimension 1 of this reshape's result #0 (size 5), which 2 ranks do not divide: it would have to be replicated}}
    %1 = kiln.reshape %0 : tensor<8x10xf32> -> tensor<8x5x2xf32>
    %2 = kiln.reduce_sum %1 dims = [0, 1, 2] : tensor<8x5x2xf32> -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// Tests conflicting annotations: x's columns and w's columns both over
// model meet at one matmul, where the first is the contracting dimension
// and the second the free one.
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(// expected-note @below {{one annotation is here}}
                  %arg0: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x", kiln.sharding = ["", "model"]},
                  // expected-note @below {{the other is here}}
                  %arg1: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.sharding = ["", "model"]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    // expected-error @below {{conflicting shardings at this matmul}}
    %0 = kiln.matmul %arg0, %arg1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<8x256xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// Tests two axes for one factor: x's contracting dimension split over
// model, w's over tensor -- the product's partial sums would be over
// neither axis's ranks alone.
module attributes {kiln.mesh = {model = 2 : i64, tensor = 2 : i64}} {
  func.func @step(// expected-note @below {{the other is here}}
                  %arg0: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x", kiln.sharding = ["", "model"]},
                  // expected-note @below {{one annotation is here}}
                  %arg1: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.sharding = ["tensor", ""]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    // expected-error @below {{conflicting shardings at this matmul: its operand #1 splits dimension 0 over 'tensor'}}
    %0 = kiln.matmul %arg0, %arg1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<8x256xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}
