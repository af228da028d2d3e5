// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Tests that a kiln.fusion's yielded types must be its result types.
func.func @yield_type(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{yielded value 0 has type 'tensor<4xf32>' but result 0 has type 'tensor<8xf32>'}}
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = kiln.exp %x : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// Tests that a kiln.fusion yields one value per result.
func.func @yield_count(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields 2 values but has 1 results}}
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = kiln.exp %x : tensor<4xf32>
    kiln.yield %e, %e : tensor<4xf32>, tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that the block arguments of a kiln.fusion have the operand types.
func.func @arg_type(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{block argument 0 has type 'tensor<8xf32>' but operand 0 has type 'tensor<4xf32>'}}
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<8xf32>):
    %e = kiln.exp %x : tensor<8xf32>
    kiln.yield %e : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// Tests that a kiln.fusion has one block argument per operand.
func.func @arg_count(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 1 operands but its body has 2 block arguments}}
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %e = kiln.add %x, %y : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that kiln.fusion regions do not nest.
func.func @nested(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{cannot be nested in another kiln.fusion}}
    %i = kiln.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%y: tensor<4xf32>):
      %e = kiln.exp %y : tensor<4xf32>
      kiln.yield %e : tensor<4xf32>
    }
    kiln.yield %i : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that only kiln ops go into a kiln.fusion.
func.func @foreign(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.fusion pointwise (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{cannot be in a kiln.fusion (only kiln ops become kernels)}}
    %c = func.call @foreign(%x) : (tensor<4xf32>) -> tensor<4xf32>
    kiln.yield %c : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that the kind is one codegen knows.
func.func @kind(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected ::mlir::kiln::FusionKind to be one of: pointwise, row, optimizer, sum, gemm}}
  // expected-error @+1 {{failed to parse Kiln_FusionKindAttr parameter 'value'}}
  %r = kiln.fusion vertical (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = kiln.exp %x : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that the region is isolated: the kernel reads only its operands.
func.func @captured(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = kiln.fusion pointwise () : () -> tensor<4xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    %e = kiln.exp %a : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a kiln.fusion of kind gemm begins with its kiln.matmul.
func.func @gemm_no_matmul(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{of kind gemm must begin with a kiln.matmul}}
  %r = kiln.fusion gemm (%a) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>):
    %g = kiln.gelu %x : tensor<4x8xf32>
    kiln.yield %g : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Tests that a kiln.fusion of kind gemm holds one GEMM call.
func.func @gemm_two_matmuls(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = kiln.fusion gemm (%a) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%x: tensor<4x4xf32>):
    %p = kiln.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    // expected-error @+1 {{is a second kiln.matmul in a kiln.fusion of kind gemm}}
    %q = kiln.matmul %p, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    kiln.yield %q : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

// Tests that only epilogue ops may follow the matmul of a gemm kernel.
func.func @gemm_bad_epilogue(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = kiln.fusion gemm (%a) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%x: tensor<4x4xf32>):
    %p = kiln.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    // expected-error @+1 {{cannot be in the epilogue of a kiln.fusion of kind gemm}}
    %e = kiln.exp %p : tensor<4x4xf32>
    kiln.yield %e : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}
