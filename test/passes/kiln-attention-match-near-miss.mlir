// RUN: kiln-opt %s --split-input-file --kiln-attention-match=remarks=true --verify-diagnostics
// RUN: kiln-opt %s --split-input-file --kiln-attention-match | FileCheck %s

// Near misses: softmaxes that look like attention but are not rewritten.
// Each keeps its graph and gets kiln.not_attention with the failed
// condition and the model-file location of the op involved (remarks=true
// also reports it as a remark on the softmax).

// Tests that a softmax over a transposed score (over the query dimension,
// not the keys) is not attention.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "the softmax runs over a transposed score (kiln.transpose at m.kiln:3:9), not over the key dimension of q @ k{{.*}}"}
func.func @softmax_over_queries(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>,
                                %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = kiln.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %t = kiln.transpose %s permutation = [0, 1, 3, 2] : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32> loc("m.kiln":3:9)
  // expected-remark @+1 {{not attention: the softmax runs over a transposed score}}
  %p = kiln.softmax %t : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a scale by a tensor that is not a splat is not attention.
// CHECK-LABEL: func.func @scale_not_splat
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "the scale kiln.mul at m.kiln:7:5 is not by a splat constant"}
func.func @scale_not_splat(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>,
                           %v: tensor<1x2x4x8xf32>, %w: tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %s = kiln.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %d = kiln.mul %s, %w : tensor<1x2x4x4xf32> loc("m.kiln":7:5)
  // expected-remark @+1 {{not attention: the scale kiln.mul at m.kiln:7:5 is not by a splat constant}}
  %p = kiln.softmax %d : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that probabilities also returned (e.g. as a metric) are not
// attention: the flash kernel would never form them.
// CHECK-LABEL: func.func @probabilities_returned
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "the probabilities are also used by func.return at m.kiln:9:1 (only p @ v may read them)"}
func.func @probabilities_returned(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>,
                                  %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = kiln.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  // expected-remark @+1 {{not attention: the probabilities are also used by func.return}}
  %p = kiln.softmax %s : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32> loc("m.kiln":9:1)
}

// -----

// Tests that scores also used elsewhere (here: returned after the scale)
// are not attention: the [T, S] tensor is needed anyway.
// CHECK-LABEL: func.func @scores_reused
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "the scores of kiln.div at m.kiln:4:2 are also used by func.return at {{.*}}"}
func.func @scores_reused(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>,
                         %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = kiln.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %c = kiln.constant dense<2.0> : tensor<1x2x4x4xf32>
  %d = kiln.div %s, %c : tensor<1x2x4x4xf32> loc("m.kiln":4:2)
  // expected-remark @+1 {{not attention: the scores of kiln.div at m.kiln:4:2 are also used by func.return}}
  %p = kiln.softmax %d : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o, %d : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// Tests that a causal mask filling with 0 instead of -inf is not attention
// (masked keys would still get probability).
// CHECK-LABEL: func.func @mask_fill_zero
// CHECK-NOT: kiln.attention
// CHECK: kiln.not_attention = "kiln.causal_mask at m.kiln:5:3 fills with 0.000000, not -inf"
func.func @mask_fill_zero(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>,
                          %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = kiln.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %m = kiln.causal_mask %s fill = 0.0 : tensor<1x2x4x4xf32> loc("m.kiln":5:3)
  // expected-remark @+1 {{not attention: kiln.causal_mask at m.kiln:5:3 fills with 0.000000, not -inf}}
  %p = kiln.softmax %m : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a softmax over rank-3 scores (no head dimension) is not
// attention, and neither is one whose scores are not a product q @ kᵀ.
// CHECK-LABEL: func.func @not_scores
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %arg0 {kiln.not_attention = "the scores are rank 3, not [B, H, T, S]"}
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "kiln.exp at m.kiln:8:8 between q @ k{{.*}} and the softmax is not a scale, bias or mask"}
func.func @not_scores(%x: tensor<2x4x4xf32>, %y: tensor<1x2x4x4xf32>,
                      %v: tensor<1x2x4x8xf32>) -> (tensor<2x4x4xf32>, tensor<1x2x4x8xf32>) {
  // expected-remark @+1 {{not attention: the scores are rank 3, not [B, H, T, S]}}
  %p = kiln.softmax %x : tensor<2x4x4xf32>
  %e = kiln.exp %y : tensor<1x2x4x4xf32> loc("m.kiln":8:8)
  // expected-remark @+1 {{not attention: kiln.exp at m.kiln:8:8 between}}
  %p2 = kiln.softmax %e : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p2, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %p, %o : tensor<2x4x4xf32>, tensor<1x2x4x8xf32>
}
