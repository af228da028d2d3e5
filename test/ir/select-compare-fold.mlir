// RUN: kiln-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that a comparison of two splat constants folds to a splat i1 and
// that a select on a splat condition folds to the chosen value.
// CHECK-LABEL: func.func @fold_splat_cmp_select
// CHECK-NOT: kiln.cmp
// CHECK-NOT: kiln.select
// CHECK: return %arg1
func.func @fold_splat_cmp_select(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %two = kiln.constant dense<2.0> : tensor<4xf32>
  %c = kiln.cmp "gt", %one, %two : tensor<4xf32> -> tensor<4xi1>
  %r = kiln.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that NaN compares unordered: false for lt, true for ne.
// CHECK-LABEL: func.func @fold_nan
// CHECK-DAG: kiln.constant dense<false> : tensor<4xi1>
// CHECK-DAG: kiln.constant dense<true> : tensor<4xi1>
func.func @fold_nan() -> (tensor<4xi1>, tensor<4xi1>) {
  %nan = kiln.constant dense<0x7FC00000> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %lt = kiln.cmp "lt", %nan, %one : tensor<4xf32> -> tensor<4xi1>
  %ne = kiln.cmp "ne", %nan, %one : tensor<4xf32> -> tensor<4xi1>
  return %lt, %ne : tensor<4xi1>, tensor<4xi1>
}

// -----

// Tests that integer comparisons are signed (-1 < 2).
// CHECK-LABEL: func.func @fold_signed
// CHECK: kiln.constant dense<true> : tensor<4xi1>
func.func @fold_signed() -> tensor<4xi1> {
  %m = kiln.constant dense<-1> : tensor<4xi32>
  %two = kiln.constant dense<2> : tensor<4xi32>
  %lt = kiln.cmp "lt", %m, %two : tensor<4xi32> -> tensor<4xi1>
  return %lt : tensor<4xi1>
}

// -----

// Tests that select(c, a, a) folds to a and that a splat integer converts
// to a splat float (exactly: 3 -> 3.0).
// CHECK-LABEL: func.func @fold_same_and_convert
// CHECK-DAG: %[[THREE:.*]] = kiln.constant dense<3.000000e+00> : tensor<4xf32>
// CHECK: return %arg1, %[[THREE]]
func.func @fold_same_and_convert(%c: tensor<4xi1>, %a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r = kiln.select %c, %a, %a : tensor<4xi1>, tensor<4xf32>
  %three = kiln.constant dense<3> : tensor<4xi32>
  %f = kiln.convert %three : tensor<4xi32> -> tensor<4xf32>
  return %r, %f : tensor<4xf32>, tensor<4xf32>
}
