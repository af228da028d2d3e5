// RUN: kiln-opt %s --split-input-file --allow-unregistered-dialect --kiln-optimizer --verify-diagnostics

// Tests that a module without kiln.train is rejected.
// expected-error@+1 {{--kiln-optimizer needs the module attribute 'kiln.train'}}
module {
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that kiln.train must name the optimizer.
// expected-error@+1 {{'kiln.train' has no string 'optimizer' entry}}
module attributes {kiln.train = {beta1 = 0.9 : f32}} {
}

// -----

// Tests that an unknown optimizer is rejected.
// expected-error@+1 {{unsupported optimizer 'lion' in 'kiln.train' (supported: adamw, adam, sgd)}}
module attributes {kiln.train = {optimizer = "lion"}} {
}

// -----

// Tests that sgd needs its weight decay too.
// expected-error@+1 {{'kiln.train' needs a numeric 'weight_decay' for the sgd optimizer}}
module attributes {kiln.train = {optimizer = "sgd", momentum = 0.9 : f32}} {
}

// -----

// Tests that the weight-decay exclusions are booleans.
// expected-error@+1 {{'kiln.train' entry 'decay_norms' must be true or false, got 1 : i64}}
module attributes {kiln.train = {optimizer = "sgd", weight_decay = 0.0 : f32,
    decay_norms = 1}} {
}

// -----

// Tests that a negative clipping threshold is rejected.
// expected-error@+1 {{'kiln.train' clip must be finite and non-negative, got -1}}
module attributes {kiln.train = {optimizer = "sgd", weight_decay = 0.0 : f32,
    clip = -1.0 : f32}} {
}

// -----

// Tests that every AdamW hyperparameter must be present and numeric.
// expected-error@+1 {{'kiln.train' needs a numeric 'epsilon' for the adamw optimizer}}
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = "small", weight_decay = 0.1 : f32}} {
}

// -----

// Tests that a module without a loss function is an error.
// expected-error@+1 {{--kiln-optimizer needs exactly one function with a kiln.role = "loss" result, found 0}}
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
}

// -----

// Tests that the optimizer must run after autodiff (no grad results).
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{has no kiln.role = "grad" results; --kiln-optimizer must run after --kiln-autodiff}}
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests that running the optimizer twice is rejected.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
  // expected-error@+1 {{already exists (was --kiln-optimizer already run?)}}
  func.func @update() {
    return
  }
}

// -----

// Tests that every parameter needs a gradient result of its name.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{has no gradient result for parameter 'v'}}
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"},
                  %v: tensor<f32> {kiln.role = "param", kiln.name = "v"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that a parameter needs a kiln.name.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{parameter argument #0 has no kiln.name}}
  func.func @step(%w: tensor<f32> {kiln.role = "param"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that a gradient must have its parameter's type.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{gradient of parameter 'w' has type 'tensor<f32>', expected 'tensor<2xf32>'}}
  func.func @step(%w: tensor<2xf32> {kiln.role = "param", kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = "input", kiln.name = "l"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"}) {
    return %l, %l : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that AdamW parameters must be f32.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{parameter 'w' must be f32 for the adamw optimizer, found 'tensor<2xbf16>'}}
  func.func @step(%w: tensor<2xbf16> {kiln.role = "param", kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = "input", kiln.name = "l"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<2xbf16> {kiln.role = "grad", kiln.name = "w"}) {
    return %l, %w : tensor<f32>, tensor<2xbf16>
  }
}

// -----

// Tests that a loss function without a body is rejected.
module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
    beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}} {
  // expected-error@+1 {{must have a single-block body}}
  func.func private @step(tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"},
          tensor<f32> {kiln.role = "grad", kiln.name = "w"})
}
