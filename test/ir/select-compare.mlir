// RUN: kiln-opt %s -split-input-file | kiln-opt -split-input-file | FileCheck %s
// RUN: kiln-opt %s -split-input-file --mlir-print-op-generic | kiln-opt -split-input-file | FileCheck %s

// Tests that kiln.cmp, kiln.select and the integer forms of kiln.convert
// round-trip through the custom and the generic assembly forms, and that
// i1 tensors flow through the data-movement ops.
// CHECK-LABEL: func.func @causal_where
func.func @causal_where(%s: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %iota = kiln.iota : tensor<4xi32>
  %i = kiln.broadcast %iota dims = [0] : tensor<4xi32> -> tensor<4x4xi32>
  %j = kiln.broadcast %iota dims = [1] : tensor<4xi32> -> tensor<4x4xi32>
  // CHECK: kiln.cmp "le", %{{.*}}, %{{.*}} : tensor<4x4xi32> -> tensor<4x4xi1>
  %keep = kiln.cmp "le", %j, %i : tensor<4x4xi32> -> tensor<4x4xi1>
  // CHECK: kiln.broadcast %{{.*}} dims = [1, 2] : tensor<4x4xi1> -> tensor<2x4x4xi1>
  %keep3 = kiln.broadcast %keep dims = [1, 2] : tensor<4x4xi1> -> tensor<2x4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<2x4x4xf32>
  // CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x4xi1>, tensor<2x4x4xf32>
  %r = kiln.select %keep3, %s, %ninf : tensor<2x4x4xi1>, tensor<2x4x4xf32>
  return %r : tensor<2x4x4xf32>
}

// -----

// Tests every comparison predicate on floats and int <-> float converts.
// CHECK-LABEL: func.func @predicates
func.func @predicates(%a: tensor<8xf32>, %b: tensor<8xf32>, %n: tensor<8xi32>)
    -> (tensor<8xi1>, tensor<8xi1>, tensor<8xi1>, tensor<8xi1>, tensor<8xi1>,
        tensor<8xf32>, tensor<8xi64>) {
  // CHECK: kiln.cmp "lt"
  %0 = kiln.cmp "lt", %a, %b : tensor<8xf32> -> tensor<8xi1>
  // CHECK: kiln.cmp "gt"
  %1 = kiln.cmp "gt", %a, %b : tensor<8xf32> -> tensor<8xi1>
  // CHECK: kiln.cmp "ge"
  %2 = kiln.cmp "ge", %a, %b : tensor<8xf32> -> tensor<8xi1>
  // CHECK: kiln.cmp "eq"
  %3 = kiln.cmp "eq", %a, %b : tensor<8xf32> -> tensor<8xi1>
  // CHECK: kiln.cmp "ne"
  %4 = kiln.cmp "ne", %a, %b : tensor<8xf32> -> tensor<8xi1>
  // CHECK: kiln.convert %{{.*}} : tensor<8xi32> -> tensor<8xf32>
  %5 = kiln.convert %n : tensor<8xi32> -> tensor<8xf32>
  // CHECK: kiln.convert %{{.*}} : tensor<8xf32> -> tensor<8xi64>
  %6 = kiln.convert %a : tensor<8xf32> -> tensor<8xi64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8xi1>, tensor<8xi1>, tensor<8xi1>, tensor<8xi1>, tensor<8xi1>, tensor<8xf32>, tensor<8xi64>
}
