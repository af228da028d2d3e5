// RUN: kiln-opt %s --split-input-file --allow-unregistered-dialect --kiln-optimizer --verify-diagnostics

// Tests that a module without kiln.train is rejected.
// expected-error@+1 {{--kiln-optimizer needs the module attribute 'kiln.train'}}
module {
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that sgd needs its weight decay too.
// expected-error@+1 {{'kiln.train' needs 'weight_decay' for the sgd optimizer}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd,
    momentum = 0.9 : f32>} {
}

// -----

// Tests that every AdamW hyperparameter must be present.
// expected-error@+1 {{'kiln.train' needs 'epsilon' for the adamw optimizer}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    weight_decay = 0.1 : f32>} {
}

// -----

// Tests that a module without a loss function is an error.
// expected-error@+1 {{--kiln-optimizer needs exactly one function with a kiln.role = #kiln.role<loss> result, found 0}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
}

// -----

// Tests that the optimizer must run after autodiff (no grad results).
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{has no kiln.role = #kiln.role<grad> results; --kiln-optimizer must run after --kiln-autodiff}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests that running the optimizer twice is rejected.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
  // expected-error@+1 {{already exists (was --kiln-optimizer already run?)}}
  func.func @update() {
    return
  }
}

// -----

// Tests that every parameter needs a gradient result of its name.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{has no gradient result for parameter 'v'}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %v: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "v"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that a parameter needs a kiln.name.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{parameter argument #0 has no kiln.name}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %w, %w : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that a gradient must have its parameter's type.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{gradient of parameter 'w' has type 'tensor<f32>', expected 'tensor<2xf32>'}}
  func.func @step(%w: tensor<2xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = #kiln.role<input>, kiln.name = "l"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %l, %l : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests that AdamW parameters must be f32.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{parameter 'w' must be f32 for the adamw optimizer, found 'tensor<2xbf16>'}}
  func.func @step(%w: tensor<2xbf16> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %l: tensor<f32> {kiln.role = #kiln.role<input>, kiln.name = "l"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<2xbf16> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    return %l, %w : tensor<f32>, tensor<2xbf16>
  }
}

// -----

// Tests that a loss function without a body is rejected.
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  // expected-error@+1 {{must have a single-block body}}
  func.func private @step(tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
}
