// RUN: kiln-opt %s --split-input-file --kiln-eval-function --verify-diagnostics

// Tests that a module without a loss function is an error.
// expected-error@+1 {{--kiln-eval-function needs exactly one function with a kiln.role = #kiln.role<loss> result, found 0}}
module {
}

// -----

// Tests that @eval must not exist yet.
module {
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    return %w : tensor<f32>
  }
  // expected-error@+1 {{already exists; --kiln-eval-function creates @eval from the loss function}}
  func.func @eval() {
    return
  }
}

// -----

// Tests that the clone is taken before autodiff.
module {
  // expected-error@+1 {{already has gradients; --kiln-eval-function must run before --kiln-autodiff}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}
