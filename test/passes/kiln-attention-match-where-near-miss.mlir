// RUN: kiln-opt %s --split-input-file --kiln-attention-match=remarks=true --verify-diagnostics
// RUN: kiln-opt %s --split-input-file --kiln-attention-match | FileCheck %s

// Near misses of where()-masked attention: the graph stays, and the
// softmax says why in kiln.not_attention.

// Tests that where(keep, scores, 0) is not a mask (a masked key would get
// weight exp(0), not 0).
// CHECK-LABEL: func.func @where_not_neg_inf
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "kiln.select at m.kiln:4:7 does not choose between the scores and -inf"}
func.func @where_not_neg_inf(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                             %v: tensor<1x1x4x8xf32>, %keep: tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %zero = kiln.constant dense<0.0> : tensor<1x1x4x4xf32>
  %m = kiln.select %keep, %s, %zero : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32> loc("m.kiln":4:7)
  // expected-remark @+1 {{not attention: kiln.select at m.kiln:4:7 does not choose between the scores and -inf}}
  %p = kiln.softmax %m : tensor<1x1x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// Tests that a mask condition given as a boolean tensor argument (which the
// attention regions cannot capture) is not matched.
// CHECK-LABEL: func.func @boolean_argument
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax %{{.*}} {kiln.not_attention = "kiln.select at m.kiln:5:3: the boolean tensor argument cannot be captured by the attention regions"}
func.func @boolean_argument(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                            %v: tensor<1x1x4x8xf32>, %keep: tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x1x4x4xf32>
  %m = kiln.select %keep, %s, %ninf : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32> loc("m.kiln":5:3)
  // expected-remark @+1 {{not attention: kiln.select at m.kiln:5:3: the boolean tensor argument cannot be captured}}
  %p = kiln.softmax %m : tensor<1x1x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}

// -----

// Tests that a where() mask followed by a negative factor (which would turn
// -inf into +inf) is not matched.
// CHECK-LABEL: func.func @negative_factor_after_where
// CHECK-NOT: kiln.attention
// CHECK: kiln.not_attention = "kiln.mul at m.kiln:6:3 scales masked scores by a factor that is not a positive splat"
func.func @negative_factor_after_where(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                                       %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs = true} : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %iota = kiln.iota : tensor<4xi32>
  %i = kiln.broadcast %iota dims = [2] : tensor<4xi32> -> tensor<1x1x4x4xi32>
  %j = kiln.broadcast %iota dims = [3] : tensor<4xi32> -> tensor<1x1x4x4xi32>
  %keep = kiln.cmp "le", %j, %i : tensor<1x1x4x4xi32> -> tensor<1x1x4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x1x4x4xf32>
  %m = kiln.select %keep, %s, %ninf : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %c = kiln.constant dense<-2.0> : tensor<1x1x4x4xf32>
  %d = kiln.mul %m, %c : tensor<1x1x4x4xf32> loc("m.kiln":6:3)
  // expected-remark @+1 {{not attention: kiln.mul at m.kiln:6:3 scales masked scores}}
  %p = kiln.softmax %d : tensor<1x1x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
}
