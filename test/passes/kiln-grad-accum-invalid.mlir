// RUN: kiln-opt %s --split-input-file --kiln-grad-accum --verify-diagnostics

// Tests that grad_accum must be a positive integer.
// expected-error@+1 {{'kiln.train' grad_accum must be a positive integer, got 0 : i64}}
module attributes {kiln.train = {grad_accum = 0 : i64}} {
}

// -----

// Tests that accumulation needs the gradients (runs after autodiff).
module attributes {kiln.train = {grad_accum = 2 : i64}} {
  // expected-error@+1 {{has no kiln.role = "grad" results; --kiln-grad-accum must run after --kiln-autodiff}}
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests that running it twice is rejected.
module attributes {kiln.train = {grad_accum = 2 : i64}} {
  // expected-error@+1 {{already has a loss accumulator argument (was --kiln-grad-accum already run?)}}
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = "loss", kiln.name = "loss"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %l, %w : tensor<f32>, tensor<f32>
  }
}
