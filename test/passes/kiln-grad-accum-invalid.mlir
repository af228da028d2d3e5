// RUN: kiln-opt %s --split-input-file --kiln-grad-accum --verify-diagnostics

// Tests that accumulation needs the gradients (runs after autodiff).
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, grad_accum = 2>} {
  // expected-error@+1 {{has no kiln.role = #kiln.role<grad> results; --kiln-grad-accum must run after --kiln-autodiff}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests that running it twice is rejected.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, grad_accum = 2>} {
  // expected-error@+1 {{already has a loss accumulator argument (was --kiln-grad-accum already run?)}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %l, %w : tensor<f32>, tensor<f32>
  }
}
