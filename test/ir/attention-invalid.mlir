// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Tests that q, k and v must share one element type.
func.func @elem_type(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xbf16>) {
  // expected-error @+1 {{needs q, k and v of one element type}}
  %out, %lse = kiln.attention %q, %k, %k {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that the query heads must be a multiple of the kv heads.
func.func @gqa(%q: tensor<1x3x5x8xf32>, %k: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{needs the query heads (3) to be a multiple of the kv heads (2)}}
  %out, %lse = kiln.attention %q, %k, %k {scale = 1.0 : f32}
      : (tensor<1x3x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x3x5x8xf32>, tensor<1x3x5xf32>)
  return
}

// -----

// Tests that q and k must have one head dim.
func.func @head_dim(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x6xf32>) {
  // expected-error @+1 {{needs q and k with one head dim, found 8 and 6}}
  %out, %lse = kiln.attention %q, %k, %k {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x6xf32>, tensor<1x2x5x6xf32>)
      -> (tensor<1x2x5x6xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that k and v must have the same length.
func.func @kv_len(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x7x8xf32>, %v: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{needs k and v with the same kv heads and length}}
  %out, %lse = kiln.attention %q, %k, %v {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x6x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that out has q's rows and v's head dim.
func.func @out_type(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x7x8xf32>, %v: tensor<1x2x7x4xf32>) {
  // expected-error @+1 {{result 'out' has type 'tensor<1x2x5x8xf32>' but expected 'tensor<1x2x5x4xf32>'}}
  %out, %lse = kiln.attention %q, %k, %v {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x7x4xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that lse is [B, H, T].
func.func @lse_type(%q: tensor<1x2x5x8xbf16>) {
  // expected-error @+1 {{result 'lse' has type 'tensor<1x2x4xf32>' but expected 'tensor<1x2x5xf32>'}}
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>)
      -> (tensor<1x2x5x8xbf16>, tensor<1x2x4xf32>)
  return
}

// -----

// Tests that f16 captures are refused (the kernels read f32, bf16, i32, i64).
func.func @capture_type(%q: tensor<1x2x5x8xf32>, %c: tensor<2xf16>) {
  // expected-error @+1 {{capture 0 has type 'tensor<2xf16>' (expected f32, bf16, i32 or i64 elements)}}
  %out, %lse = kiln.attention %q, %q, %q captures(%c) {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xf16>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that the score region takes one argument per capture.
func.func @score_arg_count(%q: tensor<1x2x5x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{has a score region with 5 arguments but expected 6 (5 + one per capture)}}
  %out, %lse = kiln.attention %q, %q, %q captures(%c) {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index) {
      kiln.yield %s : f32
    }
  return
}

// -----

// Tests that the mask region's arguments have the documented types.
func.func @mask_arg_type(%q: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{has a mask region whose argument 3 has type 'i32' but expected 'index'}}
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    mask(%b: index, %h: index, %i: index, %j: i32) {
      %t = arith.constant true
      kiln.yield %t : i1
    }
  return
}

// -----

// Tests that the score region must yield one f32.
func.func @score_yield(%q: tensor<1x2x5x8xf32>) {
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index) {
      %t = arith.constant true
      // expected-error @+1 {{in the score region must yield one 'f32'}}
      kiln.yield %t : i1
    }
  return
}

// -----

// Tests that the mask region must yield one i1.
func.func @mask_yield(%q: tensor<1x2x5x8xf32>) {
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    mask(%b: index, %h: index, %i: index, %j: index) {
      %z = arith.constant 0.0 : f32
      // expected-error @+1 {{in the mask region must yield one 'i1'}}
      kiln.yield %z : f32
    }
  return
}

// -----

// Tests that ops other than arith, math and tensor.extract are refused in a
// region, with the op named.
func.func @foreign_op(%q: tensor<1x2x5x8xf32>, %c: tensor<2xf32>) {
  %out, %lse = kiln.attention %q, %q, %q captures(%c) {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>) {
      %zero = arith.constant 0 : index
      // expected-error @+1 {{'tensor.dim' op is not allowed in the score region of kiln.attention}}
      %d = tensor.dim %c0, %zero : tensor<2xf32>
      kiln.yield %s : f32
    }
  return
}

// -----

// Tests that arith ops in a region must work on scalars, not tensors.
func.func @tensor_arith(%q: tensor<1x2x5x8xf32>, %c: tensor<2xf32>) {
  %out, %lse = kiln.attention %q, %q, %q captures(%c) {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>) {
      // expected-error @+1 {{'arith.addf' op in the score region must work on scalars}}
      %t = arith.addf %c0, %c0 : tensor<2xf32>
      kiln.yield %s : f32
    }
  return
}

// -----

// Tests that a region cannot read a value from outside (isolated from above).
func.func @from_above(%q: tensor<1x2x5x8xf32>, %x: f32) {
  // expected-note @+1 {{required by region isolation constraints}}
  %out, %lse = kiln.attention %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index) {
      // expected-error @+1 {{using value defined outside the region}}
      %r = arith.addf %s, %x : f32
      kiln.yield %r : f32
    }
  return
}

// -----

// Tests that kiln.attention needs its scale.
func.func @no_scale(%q: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{requires attribute 'scale'}}
  %out, %lse = kiln.attention %q, %q, %q
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that kiln.attention_grad returns one gradient per floating capture.
func.func @grad_count(%q: tensor<1x2x5x8xf32>, %lse: tensor<1x2x5xf32>, %c: tensor<2xf32>, %n: tensor<1xi32>) {
  // expected-error @+1 {{has 2 capture gradients but 1 floating-point captures}}
  %dq, %dk, %dv, %d0, %d1 = kiln.attention_grad %q, %q, %q, %q, %lse, %q captures(%c, %n) {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>, tensor<1xi32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that kiln.attention_grad's dk has k's type (summed over the group).
func.func @grad_dk(%q: tensor<1x2x5x8xf32>, %k: tensor<1x1x5x8xf32>, %lse: tensor<1x2x5xf32>) {
  // expected-error @+1 {{result 'dk' has type 'tensor<1x2x5x8xf32>' but expected 'tensor<1x1x5x8xf32>'}}
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x1x5x8xf32>)
  return
}

// -----

// Tests that kiln.attention_grad needs its six leading operands.
func.func @grad_operands(%q: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{expected 6 operands before captures, found 3}}
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q {scale = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
  return
}

// -----

// Tests that dropout must be a probability below 1.
func.func @dropout_one(%q: tensor<1x2x5x8xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{has dropout 1.000000e+00 (expected a probability in [0, 1))}}
  %out, %lse = kiln.attention %q, %q, %q captures(%rng) {scale = 1.0 : f32, dropout = 1.0 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xi64>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that dropout may not be negative.
func.func @dropout_negative(%q: tensor<1x2x5x8xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{has dropout -5.000000e-01 (expected a probability in [0, 1))}}
  %out, %lse = kiln.attention %q, %q, %q captures(%rng) {scale = 1.0 : f32, dropout = -0.5 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<2xi64>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that dropout needs the RNG state as its last capture.
func.func @dropout_no_rng(%q: tensor<1x2x5x8xf32>, %len: tensor<1xi32>) {
  // expected-error @+1 {{has dropout 2.500000e-01 but its last capture is not the RNG state tensor<2xi64>}}
  %out, %lse = kiln.attention %q, %q, %q captures(%len) {scale = 1.0 : f32, dropout = 0.25 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1xi32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// Tests that attention_grad checks dropout the same way.
func.func @grad_dropout_no_rng(%q: tensor<1x2x5x8xf32>, %lse: tensor<1x2x5xf32>) {
  // expected-error @+1 {{has dropout 2.500000e-01 but its last capture is not the RNG state tensor<2xi64>}}
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %q, %lse, %q {scale = 1.0 : f32, dropout = 0.25 : f32}
      : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>)
      -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
  return
}

// -----

// Tests that in layout bthd the heads are dim 2: q [B, T, H, D] with 3
// heads cannot share k's 2 kv heads.
func.func @bthd_gqa(%q: tensor<1x5x3x8xf32>, %k: tensor<1x5x2x8xf32>) {
  // expected-error @+1 {{needs the query heads (3) to be a multiple of the kv heads (2)}}
  %out, %lse = kiln.attention %q, %k, %k {layout = #kiln<attention_layout bthd>, scale = 1.0 : f32}
      : (tensor<1x5x3x8xf32>, tensor<1x5x2x8xf32>, tensor<1x5x2x8xf32>)
      -> (tensor<1x5x3x8xf32>, tensor<1x3x5xf32>)
  return
}

// -----

// Tests that in layout bthd out is [B, T, H, Dv] (lse stays [B, H, T]).
func.func @bthd_out(%q: tensor<1x5x4x8xf32>, %k: tensor<1x7x2x8xf32>) {
  // expected-error @+1 {{result 'out' has type 'tensor<1x4x5x8xf32>' but expected 'tensor<1x5x4x8xf32>'}}
  %out, %lse = kiln.attention %q, %k, %k {layout = #kiln<attention_layout bthd>, scale = 1.0 : f32}
      : (tensor<1x5x4x8xf32>, tensor<1x7x2x8xf32>, tensor<1x7x2x8xf32>)
      -> (tensor<1x4x5x8xf32>, tensor<1x4x5xf32>)
  return
}

// -----

// Tests that attention_grad's gradients follow the layout too: dk has k's
// [B, S, KVH, D] type.
func.func @bthd_grad(%q: tensor<1x5x4x8xf32>, %k: tensor<1x7x2x8xf32>, %o: tensor<1x5x4x8xf32>, %lse: tensor<1x4x5xf32>) {
  // expected-error @+1 {{result 'dk' has type 'tensor<1x2x7x8xf32>' but expected 'tensor<1x7x2x8xf32>'}}
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %k, %o, %lse, %o {layout = #kiln<attention_layout bthd>, scale = 1.0 : f32}
      : (tensor<1x5x4x8xf32>, tensor<1x7x2x8xf32>, tensor<1x7x2x8xf32>, tensor<1x5x4x8xf32>, tensor<1x4x5xf32>, tensor<1x5x4x8xf32>)
      -> (tensor<1x5x4x8xf32>, tensor<1x2x7x8xf32>, tensor<1x7x2x8xf32>)
  return
}
