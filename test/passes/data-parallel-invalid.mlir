// RUN: kiln-opt %s --split-input-file --kiln-data-parallel --verify-diagnostics

// Tests that a data-parallel mesh needs @update (the pass runs after the
// optimizer phase).
// expected-error @+1 {{kiln.mesh asks for data parallelism but the module has no @update; --kiln-data-parallel runs after --kiln-optimizer}}
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @step(%g: tensor<4xf32>) -> tensor<4xf32> {
    return %g : tensor<4xf32>
  }
}

// -----

// Tests that @update needs gradients to average.
module attributes {kiln.mesh = {data = 2 : i64}} {
  // expected-error @+1 {{has no kiln.role = #kiln.role<grad> arguments to average over the data axis}}
  func.func @update(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}
