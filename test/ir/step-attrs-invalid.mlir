// RUN: kiln-opt %s --split-input-file --verify-diagnostics

// The typed attributes of the training-step module: #kiln.train (the train
// section, module attribute kiln.train) and #kiln.role (kiln.role on a step
// function's arguments and results), each refused in any other form.

// Tests that kiln.train must be the typed attribute, not a dictionary.
// expected-error@+1 {{'kiln.train' must be a #kiln.train<...>, got {batch = 2 : i64}}}
module attributes {kiln.train = {batch = 2 : i64}} {
}

// -----

// Tests that the micro-batch's shape is required.
// expected-error@+1 {{struct is missing required parameter: seq}}
module attributes {kiln.train = #kiln.train<batch = 2>} {
}

// -----

// Tests that batch and seq must be positive.
// expected-error@+1 {{#kiln.train batch and seq must be positive, got 0 and 4}}
module attributes {kiln.train = #kiln.train<batch = 0, seq = 4>} {
}

// -----

// Tests that grad_accum must be positive.
// expected-error@+1 {{#kiln.train grad_accum must be positive, got 0}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, grad_accum = 0>} {
}

// -----

// Tests that the memory budget cannot be negative.
// expected-error@+1 {{#kiln.train memory_budget must be >= 0, got -1}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, memory_budget = -1>} {
}

// -----

// Tests that the ZeRO stage is 0 to 3.
// expected-error@+1 {{#kiln.train zero must be 0, 1, 2 or 3, got 4}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, zero = 4>} {
}

// -----

// Tests that a negative clipping threshold is rejected.
// expected-error@+1 {{#kiln.train clip must be finite and non-negative, got -1}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, clip = -1.0 : f32>} {
}

// -----

// Tests that an unknown precision is refused.
// expected-error@+2 {{invalid kiln.train precision (fp32, tf32 or bf16) specification: fp8}}
// expected-error@+1 {{failed to parse Kiln_TrainConfigAttr parameter 'precision'}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = fp8>} {
}

// -----

// Tests that an unknown optimizer is refused.
// expected-error@+2 {{invalid kiln.train optimizer (adamw, adam or sgd) specification: lion}}
// expected-error@+1 {{failed to parse Kiln_TrainConfigAttr parameter 'optimizer'}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = lion>} {
}

// -----

// Tests that an unknown remat mode is refused.
// expected-error@+2 {{invalid kiln.train remat (auto, none, pointwise, selective or full) specification: half}}
// expected-error@+1 {{failed to parse Kiln_TrainConfigAttr parameter 'remat'}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, remat = half>} {
}

// -----

// Tests that the weight-decay exclusions are booleans.
// expected-error@+2 {{invalid kind of attribute specified}}
// expected-error@+1 {{failed to parse Kiln_TrainConfigAttr parameter 'decay_norms'}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, decay_norms = 1>} {
}

// -----

// Tests that Adam's settings do not apply to sgd.
// expected-error@+1 {{#kiln.train 'beta1' does not apply to the sgd optimizer}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd,
    beta1 = 0.9 : f32, weight_decay = 0.0 : f32>} {
}

// -----

// Tests that sgd's settings do not apply to adamw.
// expected-error@+1 {{#kiln.train 'momentum' does not apply to the adamw optimizer}}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, momentum = 0.9 : f32>} {
}

// -----

// Tests that a kiln.role must be the typed attribute, not a string.
module {
  // expected-error@+1 {{argument 0's 'kiln.role' must be a #kiln.role<...>, got "param"}}
  func.func @step(%w: tensor<f32> {kiln.role = "param", kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests the same of a result's role.
module {
  // expected-error@+1 {{result 0's 'kiln.role' must be a #kiln.role<...>, got "loss"}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = "loss"}) {
    return %w : tensor<f32>
  }
}

// -----

// Tests that an unknown role is refused.
module {
  // expected-error@+2 {{expected ::mlir::kiln::Role to be one of: param, input, loss, grad, grad_norm, adam_m, adam_v, momentum, lr, step, metric, update_norm, param_norm, eval_loss, dropout_rng}}
  // expected-error@+1 {{failed to parse Kiln_RoleAttr parameter 'value'}}
  func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<weights>})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    return %w : tensor<f32>
  }
}
