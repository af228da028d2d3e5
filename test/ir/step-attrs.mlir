// RUN: kiln-opt %s --split-input-file | FileCheck %s
// RUN: kiln-opt %s --split-input-file | kiln-opt --split-input-file | FileCheck %s

// Tests that #kiln.train round-trips with its enums as keywords, its f32
// settings bit for bit, and its defaults (grad_accum 1, precision fp32,
// memory_budget 0, zero 0, remat auto, optimizer adamw) left unprinted.
// CHECK-LABEL: module attributes
// CHECK-SAME: kiln.train = #kiln.train<batch = 8, seq = 128, clip = 1.000000e+00 : f32, beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999993E-9 : f32, weight_decay = 1.000000e-01 : f32, decay_norms = false>
module attributes {kiln.train = #kiln.train<seq = 128, batch = 8,
    grad_accum = 1, clip = 1.0 : f32, precision = fp32, remat = auto,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-8 : f32, weight_decay = 0.1 : f32, decay_norms = false>} {
}

// -----

// Tests that every other setting prints when it is not its default, and
// that a name may be quoted (as kiln.train's dictionary once spelled it).
// CHECK-LABEL: module attributes
// CHECK-SAME: kiln.train = #kiln.train<batch = 2, seq = 4, grad_accum = 4, precision = bf16, memory_budget = 1073741824, zero = 3, remat = selective, optimizer = sgd, momentum = 0.899999976 : f32, dampening = 0.000000e+00 : f32, nesterov = true, weight_decay = 0.000000e+00 : f32, decay_norms = true, decay_biases = true, decay_embeddings = true>
module attributes {kiln.train = #kiln.train<batch = 2, seq = 4,
    grad_accum = 4, precision = "bf16", memory_budget = 1073741824, zero = 3,
    remat = selective, optimizer = sgd, momentum = 0.9 : f32,
    dampening = 0.0 : f32, nesterov = true, weight_decay = 0.0 : f32,
    decay_norms = true, decay_biases = true, decay_embeddings = true>} {
}

// -----

// Tests that roles print as #kiln.role<...> on arguments and results.
// CHECK-LABEL: func.func @step
// CHECK-SAME: {kiln.name = "w", kiln.role = #kiln.role<param>}
// CHECK-SAME: {kiln.name = "x", kiln.role = #kiln.role<input>}
// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.name = "rms", kiln.role = #kiln.role<metric>})
func.func @step(%w: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                %x: tensor<f32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "rms"}) {
  return %w, %x : tensor<f32>, tensor<f32>
}
