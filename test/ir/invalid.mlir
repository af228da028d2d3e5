// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Tests that kiln ops reject dynamic shapes (all shapes are static).
func.func @dynamic_shape(%a: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{statically shaped tensor}}
  %0 = kiln.exp %a : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Tests that iota produces a 1-D tensor.
func.func @iota_rank() -> tensor<2x4xi32> {
  // expected-error @+1 {{result must be rank 1, got 'tensor<2x4xi32>'}}
  %0 = kiln.iota : tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// -----

// Tests that broadcast keeps the element type.
func.func @broadcast_element_type(%a: tensor<8xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{element types differ: 'tensor<8xf32>' -> 'tensor<4x8xf16>'}}
  %0 = kiln.broadcast %a dims = [1] : tensor<8xf32> -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

// Tests that broadcast has one dims entry per input dim.
func.func @broadcast_dims_count(%a: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dims has 2 entries, expected the input rank 1}}
  %0 = kiln.broadcast %a dims = [0, 1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that broadcast dims are result dims.
func.func @broadcast_dims_range(%a: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dims[0] = 2 is out of range for result 'tensor<4x8xf32>'}}
  %0 = kiln.broadcast %a dims = [2] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that broadcast dims are strictly increasing (no transposing broadcast).
func.func @broadcast_dims_order(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{dims must be strictly increasing, got [1, 0]}}
  %0 = kiln.broadcast %a dims = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a broadcast input dim has size 1 or the result dim size.
func.func @broadcast_dim_size(%a: tensor<3xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{input dim 0 has size 3, expected 1 or 8 (result dim 1)}}
  %0 = kiln.broadcast %a dims = [1] : tensor<3xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that reduce_sum dims are input dims.
func.func @reduce_sum_range(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{dims[0] = 2 is out of range for input 'tensor<4x8xf32>'}}
  %0 = kiln.reduce_sum %a dims = [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that reduce_sum dims are sorted and unique.
func.func @reduce_sum_order(%a: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{dims must be sorted and unique, got [1, 0]}}
  %0 = kiln.reduce_sum %a dims = [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that the reduce_sum result drops exactly the reduced dims.
func.func @reduce_sum_result(%a: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{result type 'tensor<8xf32>' should be 'tensor<4xf32>'}}
  %0 = kiln.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that reshape keeps the element type.
func.func @reshape_element_type(%a: tensor<4x8xf32>) -> tensor<32xi32> {
  // expected-error @+1 {{element types differ: 'tensor<4x8xf32>' -> 'tensor<32xi32>'}}
  %0 = kiln.reshape %a : tensor<4x8xf32> -> tensor<32xi32>
  return %0 : tensor<32xi32>
}

// -----

// Tests that reshape keeps the element count.
func.func @reshape_count(%a: tensor<4x8xf32>) -> tensor<30xf32> {
  // expected-error @+1 {{element counts differ: 'tensor<4x8xf32>' has 32, 'tensor<30xf32>' has 30}}
  %0 = kiln.reshape %a : tensor<4x8xf32> -> tensor<30xf32>
  return %0 : tensor<30xf32>
}

// -----

// Tests that transpose takes a permutation.
func.func @transpose_permutation(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{permutation [0, 0, 1] is not a permutation of the 3 dims of 'tensor<2x3x4xf32>'}}
  %0 = kiln.transpose %a permutation = [0, 0, 1] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// Tests that the transpose result is the permuted input shape.
func.func @transpose_result(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{result type 'tensor<2x3x4xf32>' should be 'tensor<2x4x3xf32>'}}
  %0 = kiln.transpose %a permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// Tests that matmul operands share an element type.
func.func @matmul_element_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf16>) -> tensor<4x16xf32> {
  // expected-error @+1 {{element types differ: 'tensor<4x8xf32>', 'tensor<8x16xf16>' -> 'tensor<4x16xf32>'}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that matmul needs a matrix lhs.
func.func @matmul_lhs_rank(%a: tensor<8xf32>, %b: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{lhs must have rank >= 2, got 'tensor<8xf32>'}}
  %0 = kiln.matmul %a, %b : tensor<8xf32>, tensor<8x16xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that the matmul rhs is shared (rank 2) or batched like lhs.
func.func @matmul_rhs_rank(%a: tensor<2x3x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32> {
  // expected-error @+1 {{rhs must have rank 2 or the rank of lhs (4), got 'tensor<3x8x16xf32>'}}
  %0 = kiln.matmul %a, %b : tensor<2x3x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x3x4x16xf32>
  return %0 : tensor<2x3x4x16xf32>
}

// -----

// Tests that batched matmul operands have the same batch dims.
func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{batch dimensions of lhs 'tensor<2x4x8xf32>' and rhs 'tensor<3x8x16xf32>' differ}}
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Tests that the contracting dims agree, after the transpose flags.
func.func @matmul_contracting(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{contracting dimensions differ: lhs 'tensor<4x8xf32>' has K = 8, rhs 'tensor<8x16xf32>' has K = 16}}
  %0 = kiln.matmul %a, %b {transpose_rhs = true} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that the matmul result is [..., M, N].
func.func @matmul_result(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{result type 'tensor<4x16xf32>' should be 'tensor<2x4x16xf32>'}}
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that the embedding table is [V, D].
func.func @embedding_table(%t: tensor<64xf32>, %i: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{table must be rank 2 [V, D], got 'tensor<64xf32>'}}
  %0 = kiln.embedding %t, %i : tensor<64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that the embedding result is indices shape + [D].
func.func @embedding_result(%t: tensor<64x16xf32>, %i: tensor<2x8xi32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{result type 'tensor<2x16xf32>' should be 'tensor<2x8x16xf32>'}}
  %0 = kiln.embedding %t, %i : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// Tests that embedding indices are integers.
func.func @embedding_indices(%t: tensor<64x16xf32>, %i: tensor<2x8xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = kiln.embedding %t, %i : tensor<64x16xf32>, tensor<2x8xf32> -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

// Tests that the embedding_grad result is a [V, D] table.
func.func @embedding_grad_result(%i: tensor<2x8xi32>, %g: tensor<2x8x16xf32>) -> tensor<1024xf32> {
  // expected-error @+1 {{result must be rank 2 [V, D], got 'tensor<1024xf32>'}}
  %0 = kiln.embedding_grad %i, %g : tensor<2x8xi32>, tensor<2x8x16xf32> -> tensor<1024xf32>
  return %0 : tensor<1024xf32>
}

// -----

// Tests that the embedding_grad grad is indices shape + [D].
func.func @embedding_grad_grad(%i: tensor<2x8xi32>, %g: tensor<2x8x16xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{grad type 'tensor<2x8x16xf32>' should be 'tensor<2x8x32xf32>' (indices shape + [D])}}
  %0 = kiln.embedding_grad %i, %g : tensor<2x8xi32>, tensor<2x8x16xf32> -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// -----

// Tests that the table embedding_grad adds its rows into has the result's type.
func.func @embedding_grad_acc(%i: tensor<2x8xi32>, %g: tensor<2x8x16xf32>, %acc: tensor<32x16xf32>) -> tensor<64x16xf32> {
  // expected-error @+1 {{acc type 'tensor<32x16xf32>' should be the result's, 'tensor<64x16xf32>'}}
  %0 = kiln.embedding_grad %i, %g plus %acc : tensor<2x8xi32>, tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}

// -----

// Tests that layer_norm normalises a non-scalar.
func.func @layer_norm_rank(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1, got 'tensor<f32>'}}
  %y, %m, %r = kiln.layer_norm %x, %w, %w : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// Tests that the layer_norm weight is [C].
func.func @layer_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{weight type 'tensor<4xf32>' should be 'tensor<8xf32>'}}
  %y, %m, %r = kiln.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the layer_norm bias is [C].
func.func @layer_norm_bias(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{bias type 'tensor<2x8xf32>' should be 'tensor<8xf32>'}}
  %y, %m, %r = kiln.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the layer_norm output has the input type.
func.func @layer_norm_output(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{output type 'tensor<2x8xf16>' should be 'tensor<2x8xf32>'}}
  %y, %m, %r = kiln.layer_norm %x, %w, %w : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf16>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the layer_norm statistics are [...] (the last dim removed).
func.func @layer_norm_stats(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{mean/rstd types 'tensor<2x8xf32>', 'tensor<2xf32>' should be 'tensor<2xf32>'}}
  %y, %m, %r = kiln.layer_norm %x, %w, %w : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the layer_norm epsilon is non-negative.
func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be non-negative, got -1.0}}
  %y, %m, %r = kiln.layer_norm %x, %w, %w {epsilon = -1.0 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the layer_norm_grad weight is [C].
func.func @layer_norm_grad_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{weight type 'tensor<4xf32>' should be 'tensor<8xf32>'}}
  %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %s, %s, %x : (tensor<2x8xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Tests that the layer_norm_grad statistics are [...].
func.func @layer_norm_grad_stats(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{mean/rstd types 'tensor<8xf32>', 'tensor<8xf32>' should be 'tensor<2xf32>'}}
  %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %s, %s, %x : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that the layer_norm_grad output gradient and input gradient have the
// input type.
func.func @layer_norm_grad_grad(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{grad and input_grad types 'tensor<8xf32>', 'tensor<2x8xf32>' should be 'tensor<2x8xf32>'}}
  %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %s, %s, %g : (tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that the layer_norm_grad parameter gradients have the weight type.
func.func @layer_norm_grad_params(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{weight_grad/bias_grad types 'tensor<8xf32>', 'tensor<2x8xf32>' should be 'tensor<8xf32>'}}
  %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %s, %s, %x : (tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>)
  return
}

// -----

// Tests that softmax has a last dim to normalise over.
func.func @softmax_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{input must have rank >= 1, got 'tensor<f32>'}}
  %0 = kiln.softmax %x : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that softmax_grad has a last dim to normalise over.
func.func @softmax_grad_rank(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{input must have rank >= 1, got 'tensor<f32>'}}
  %0 = kiln.softmax_grad %x, %x : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that causal_mask has [..., T, S] dims.
func.func @causal_mask_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{input must have rank >= 2 [..., T, S], got 'tensor<8xf32>'}}
  %0 = kiln.causal_mask %x fill = 0.0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that cross_entropy logits are targets shape + [V].
func.func @cross_entropy_shapes(%l: tensor<2x8x64xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{logits 'tensor<2x8x64xf32>' must be targets 'tensor<2x4xi32>' shape + [V]}}
  %0 = kiln.cross_entropy %l, %t : tensor<2x8x64xf32>, tensor<2x4xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy's valid_classes keeps at least one class.
func.func @cross_entropy_no_valid_class(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>) -> tensor<f32> {
  // expected-error @+1 {{valid_classes = 0 must be in [1, 64] (the class dimension of 'tensor<2x8x64xf32>')}}
  %0 = kiln.cross_entropy %l, %t {valid_classes = 0 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy's valid_classes cannot exceed the class dimension.
func.func @cross_entropy_too_many_valid_classes(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>) -> tensor<f32> {
  // expected-error @+1 {{valid_classes = 65 must be in [1, 64] (the class dimension of 'tensor<2x8x64xf32>')}}
  %0 = kiln.cross_entropy %l, %t {valid_classes = 65 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that cross_entropy_grad's valid_classes is checked like the forward's.
func.func @cross_entropy_grad_valid_classes(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>, %g: tensor<f32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{valid_classes = 100 must be in [1, 64] (the class dimension of 'tensor<2x8x64xf32>')}}
  %0 = kiln.cross_entropy_grad %l, %t, %g {valid_classes = 100 : i64} : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that cross_entropy_grad's result has the logits' shape.
func.func @cross_entropy_grad_result_shape(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>, %g: tensor<f32>) -> tensor<2x8x32xbf16> {
  // expected-error @+1 {{result shape 'tensor<2x8x32xbf16>' differs from the logits' 'tensor<2x8x64xf32>'}}
  %0 = kiln.cross_entropy_grad %l, %t, %g : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<2x8x32xbf16>
  return %0 : tensor<2x8x32xbf16>
}

// -----

// Tests that cross_entropy_grad's loss result is a scalar f32, as cross_entropy's.
func.func @cross_entropy_grad_loss_type(%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>, %g: tensor<f32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{result #1 must be}}
  %0, %1 = kiln.cross_entropy_grad %l, %t, %g with loss tensor<2xf32> : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that cross_entropy_grad logits are targets shape + [V].
func.func @cross_entropy_grad_shapes(%l: tensor<2x8x64xf32>, %t: tensor<8xi32>, %g: tensor<f32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{logits 'tensor<2x8x64xf32>' must be targets 'tensor<8xi32>' shape + [V]}}
  %0 = kiln.cross_entropy_grad %l, %t, %g : tensor<2x8x64xf32>, tensor<8xi32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that Adam betas are in [0, 1).
func.func @adam_betas(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{beta1 and beta2 must be in [0, 1), got 1.0, 0.999}}
  %a, %b, %c, %d, %e = kiln.adam %p, %p, %p, %p, %s, %s, %s {beta1 = 1.0 : f32, beta2 = 0.999 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that the Adam weight decay is non-negative.
func.func @adam_decay(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{weight_decay must be finite and non-negative, got -0.1}}
  %a, %b, %c, %d, %e = kiln.adam %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, decoupled_weight_decay = false, epsilon = 1.0e-08 : f32, weight_decay = -0.1 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that the Adam epsilon is positive.
func.func @adam_epsilon(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{epsilon must be finite and positive, got 0.0}}
  %a, %b, %c, %d, %e = kiln.adam %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, decoupled_weight_decay = true, epsilon = 0.0 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that an accumulation scale is positive.
func.func @accumulate_scale(%a: tensor<8xf32>) {
  // expected-error @+1 {{scale must be finite and positive, got -0.5}}
  %0 = kiln.accumulate %a, %a {scale = -0.5 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that the clipping threshold is non-negative.
func.func @grad_scale_max_norm(%n: tensor<f32>) {
  // expected-error @+1 {{max_norm must be finite and non-negative (0: no clipping), got -1.0}}
  %0 = kiln.grad_scale %n, %n {max_norm = -1.0 : f32}
  return
}

// -----

// Tests that the plain SGD weight decay is finite.
func.func @sgd_decay(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{weight_decay must be finite and non-negative, got +Inf}}
  %a, %b, %c = kiln.sgd %p, %p, %s, %s {weight_decay = 0x7F800000 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that sgd_momentum needs a positive momentum.
func.func @sgd_momentum_zero(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{momentum must be finite and positive (use kiln.sgd without momentum), got 0.0}}
  %a, %b, %c, %d = kiln.sgd_momentum %p, %p, %p, %s, %s, %s {dampening = 0.0 : f32, momentum = 0.0 : f32, nesterov = false, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that nesterov momentum has no dampening.
func.func @sgd_nesterov_dampening(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{nesterov momentum needs dampening = 0, got 0.5}}
  %a, %b, %c, %d = kiln.sgd_momentum %p, %p, %p, %s, %s, %s {dampening = 0.5 : f32, momentum = 0.9 : f32, nesterov = true, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that dampening is in [0, 1].
func.func @sgd_dampening_range(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{dampening must be in [0, 1], got 2.0}}
  %a, %b, %c, %d = kiln.sgd_momentum %p, %p, %p, %s, %s, %s {dampening = 2.0 : f32, momentum = 0.9 : f32, nesterov = false, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that #kiln.init names a known initializer.
// expected-error @+1 {{unknown initializer kind 'uniform' (expected normal, zeros or ones)}}
func.func @init_kind(%w: tensor<8xf32> {kiln.init = #kiln.init<uniform, std = 0.1>}) {
  return
}

// -----

// Tests that a #kiln.init standard deviation is non-negative.
// expected-error @+1 {{initializer std must be non-negative, got -0.02}}
func.func @init_std(%w: tensor<8xf32> {kiln.init = #kiln.init<normal, std = -0.02>}) {
  return
}

// -----

// Tests that the layer_norm epsilon is finite.
func.func @layer_norm_epsilon_inf(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be finite, got +Inf}}
  %y, %m, %r = kiln.layer_norm %x, %w, %w {epsilon = 0x7F800000 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that the Adam weight decay is finite.
func.func @adam_decay_nan(%p: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{weight_decay must be finite and non-negative, got NaN}}
  %a, %b, %c, %d, %e = kiln.adam %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0x7FC00000 : f32} : tensor<8xf32>
  return
}

// -----

// Tests that a #kiln.init standard deviation is finite.
// expected-error @+1 {{initializer std must be finite, got +Inf}}
func.func @init_std_inf(%w: tensor<8xf32> {kiln.init = #kiln.init<normal, std = 0x7FF0000000000000>}) {
  return
}

// -----

// Tests that a conversion keeps the shape.
func.func @convert_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'kiln.convert' op all non-scalar operands/results must have the same shape and base type}}
  %0 = kiln.convert %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

// Tests that a GEMM's result is of its operands' type or f32, never narrower.
func.func @matmul_narrowing(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'kiln.matmul' op element types differ: 'tensor<4x8xf32>', 'tensor<8x16xf32>' -> 'tensor<4x16xbf16>'}}
  %0 = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xbf16>
  return
}

// -----

// Tests that elementwise_grad names an op that declares a derivative
// formula: tanh's VJP is written with kiln ops, so it has none.
func.func @elementwise_grad_no_formula(%a: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.tanh' declares no derivative formula (ScalarFormulaOpInterface)}}
  %0 = kiln.elementwise_grad %a, %g {op = "kiln.tanh"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that elementwise_grad names a registered op.
func.func @elementwise_grad_unknown(%a: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.swish' is not a registered op}}
  %0 = kiln.elementwise_grad %a, %g {op = "kiln.swish"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the formula ops take float tensors only.
func.func @silu_int(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = kiln.silu %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that rms_norm's weight covers the last dimension.
func.func @rms_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight}}
  %y, %r = kiln.rms_norm %x, %w : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that rms_norm's rstd has one value per row.
func.func @rms_norm_rstd(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{rstd type 'tensor<8xf32>' should be 'tensor<2xf32>'}}
  %y, %r = kiln.rms_norm %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that rms_norm's epsilon is non-negative.
func.func @rms_norm_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be non-negative, got -0.001}}
  %y, %r = kiln.rms_norm %x, %w {epsilon = -1.0e-03 : f32} : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

// Tests that rope pairs features i and i + D/2: D must be even.
func.func @rope_odd(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{the last dimension must be even (features pair i with i + D/2), got 5}}
  %0 = kiln.rope %x {inv_freq = array<f32: 1.0, 0.5>} : tensor<4x5xf32> -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that rope has one frequency per feature pair.
func.func @rope_freqs(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{inv_freq has 2 frequencies, expected D/2 = 3}}
  %0 = kiln.rope %x {inv_freq = array<f32: 1.0, 0.5>} : tensor<4x6xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// Tests that rope's permutations keep the feature dim (the pairs) in place.
func.func @rope_moves_features(%x: tensor<2x4x6xf32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{input_permutation must be a permutation of the 3 dims that keeps the last one in place}}
  %0 = kiln.rope %x {input_permutation = array<i64: 0, 2, 1>, inv_freq = array<f32: 1.0, 0.5>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
  return %0 : tensor<2x6x4xf32>
}

// -----

// Tests that rope's result is the rotation, transposed by result_permutation.
func.func @rope_result_shape(%x: tensor<2x4x3x6xf32>) -> tensor<2x4x3x6xbf16> {
  // expected-error @+1 {{result shape must be [2, 3, 4, 6], got 'tensor<2x4x3x6xbf16>'}}
  %0 = kiln.rope %x {inv_freq = array<f32: 1.0, 0.5, 0.25>, result_permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x3x6xf32> -> tensor<2x4x3x6xbf16>
  return %0 : tensor<2x4x3x6xbf16>
}

// -----

// Tests that rope needs positions: rank >= 2.
func.func @rope_rank(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{input must have rank >= 2 ([..., T, D]), got 'tensor<6xf32>'}}
  %0 = kiln.rope %x {inv_freq = array<f32: 1.0, 0.5, 0.25>} : tensor<6xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

// Tests that a slice stays inside its input.
func.func @slice_out_of_range(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{range [6, 9) of dim 1 is not a non-empty part of [0, 8)}}
  %0 = kiln.slice %x dim = 1, start = 6 : tensor<4x8xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that a slice changes only its dim.
func.func @slice_other_dim(%x: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{dim 0 differs (4 vs 2) but only dim 1 may change}}
  %0 = kiln.slice %x dim = 1, start = 0 : tensor<4x8xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that a slice names a dimension of its input.
func.func @slice_bad_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{dim 2 is out of range for 'tensor<4x8xf32>'}}
  %0 = kiln.slice %x dim = 2, start = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a pad's input fits in its result.
func.func @pad_too_small(%x: tensor<4x3xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{input of size 3 at offset 2 does not fit in dim 1 of 'tensor<4x4xf32>'}}
  %0 = kiln.pad %x dim = 1, before = 2 : tensor<4x3xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a pad keeps the element type.
func.func @pad_type(%x: tensor<4x3xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{element types differ: 'tensor<4x3xf32>' -> 'tensor<4x4xbf16>'}}
  %0 = kiln.pad %x dim = 1, before = 0 : tensor<4x3xf32> -> tensor<4x4xbf16>
  return %0 : tensor<4x4xbf16>
}

// -----

// Tests that concat's inputs add up to its result along the dim.
func.func @concat_sizes(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{inputs have 5 entries along dim 1 but the result has 6}}
  %0 = kiln.concat %a, %b dim = 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// Tests that concat's inputs agree on the other dims.
func.func @concat_other_dim(%a: tensor<4x3xf32>, %b: tensor<5x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{dim 0 differs (5 vs 4) but only dim 1 may change}}
  %0 = kiln.concat %a, %b dim = 1 : (tensor<4x3xf32>, tensor<5x2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that linear_cross_entropy reads x [N, D] and w [V, D].
func.func @linear_ce_shapes(%x: tensor<8x4xf32>, %w: tensor<16x5xf32>, %t: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+1 {{expects x [N, D], w [V, D] and targets [N], got 'tensor<8x4xf32>', 'tensor<16x5xf32>' and 'tensor<8xi32>'}}
  %0 = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 2 : i64} : tensor<8x4xf32>, tensor<16x5xf32>, tensor<8xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that a chunk has between 1 and N rows.
func.func @linear_ce_chunk(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %t: tensor<8xi32>) -> tensor<f32> {
  // expected-error @+1 {{chunk_rows = 9 must be in [1, 8]}}
  %0 = kiln.linear_cross_entropy %x, %w, %t {chunk_rows = 9 : i64} : tensor<8x4xf32>, tensor<16x4xf32>, tensor<8xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that matmul_accumulate's product has acc's shape.
func.func @matmul_accumulate_shape(%acc: tensor<16x4xf32>, %a: tensor<8x16xf32>, %b: tensor<8x4xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{the product of 'tensor<8x16xf32>' and 'tensor<8x4xf32>' does not have the shape of acc 'tensor<16x4xf32>'}}
  %0 = kiln.matmul_accumulate %acc, %a, %b : tensor<16x4xf32>, tensor<8x16xf32>, tensor<8x4xf32>
  return %0 : tensor<16x4xf32>
}
