// RUN: kiln-opt %s --split-input-file --allow-unregistered-dialect --kiln-autodiff --verify-diagnostics

// Tests that an op between a parameter and the loss that does not implement
// DifferentiableOpInterface is reported on that op.
func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  // expected-error@+1 {{'arith.mulf' op lies between a parameter and the loss but does not implement DifferentiableOpInterface}}
  %0 = arith.mulf %w, %w : tensor<4xf32>
  %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that a module without a loss function is an error.
// expected-error@+1 {{--kiln-autodiff found no function with a kiln.role = #kiln.role<loss> result}}
module {
  func.func @forward(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// Tests that a function that already returns more than the loss (autodiff
// ran before) is rejected.
// expected-error@+1 {{result #1 has kiln.role = #kiln.role<grad>; only the loss and metrics may be returned before autodiff (was --kiln-autodiff already run?)}}
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// Tests that a loss that is not a rank-0 float tensor is rejected.
// expected-error@+1 {{loss must be a rank-0 floating-point tensor, found 'tensor<4xf32>'}}
func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<4xf32> {kiln.role = #kiln.role<loss>}) {
  return %w : tensor<4xf32>
}

// -----

// Tests that a loss function without a body is rejected.
// expected-error@+1 {{has a kiln.role = #kiln.role<loss> result but no body}}
func.func private @step(tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>})

// -----

// Tests that a loss function with several blocks is rejected.
// expected-error@+1 {{must have a single block to be differentiated, found 2}}
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  return %w : tensor<f32>
^unreachable:
  return %w : tensor<f32>
}

// -----

// Tests that a single-block loss function must end with func.return.
// expected-error@+1 {{must end with func.return}}
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  "test.terminator"(%w) : (tensor<f32>) -> ()
}

// -----

// Tests that a parameter needs a kiln.name for its gradient result.
// expected-error@+1 {{parameter argument #0 has no kiln.name}}
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  return %w : tensor<f32>
}

// -----

// Tests that an integer parameter is rejected (it cannot have a gradient).
// expected-error@+1 {{parameter 'n' must be a floating-point tensor, found 'tensor<4xi32>'}}
func.func @step(%n: tensor<4xi32> {kiln.role = #kiln.role<param>, kiln.name = "n"},
                %w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  return %w : tensor<f32>
}

// -----

// Tests that a VJP rule that cannot apply reports on its op: layer_norm's
// saved mean is not differentiable.
func.func @step(%x: tensor<2x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "x"},
                %g: tensor<8xf32> {kiln.role = #kiln.role<input>, kiln.name = "g"},
                %b: tensor<8xf32> {kiln.role = #kiln.role<input>, kiln.name = "b"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  // expected-error@+1 {{cannot differentiate through the mean/rstd results}}
  %y, %mean, %rstd = kiln.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  %0 = kiln.reduce_sum %mean dims = [0] : tensor<2xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a function may have only one loss.
// expected-error@+1 {{has more than one kiln.role = #kiln.role<loss> result}}
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.role = #kiln.role<loss>}) {
  return %w, %w : tensor<f32>, tensor<f32>
}
