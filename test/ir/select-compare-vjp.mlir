// RUN: kiln-opt %s --split-input-file --kiln-autodiff | FileCheck %s

// Tests that select's VJP routes the gradient to the chosen side
// (select(c, g, 0) for the true value, select(c, 0, g) for the false one)
// and that the comparison and the int -> float convert get none.
// CHECK-LABEL: func.func @where_grad
func.func @where_grad(
    %w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
    %u: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "u"},
    %n: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "n"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %nf = kiln.convert %n : tensor<4xi32> -> tensor<4xf32>
  %c = kiln.cmp "lt", %w, %nf : tensor<4xf32> -> tensor<4xi1>
  %s = kiln.select %c, %w, %u : tensor<4xi1>, tensor<4xf32>
  %l = kiln.reduce_sum %s dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK: %[[C:.*]] = kiln.cmp "lt"
// CHECK: %[[G:.*]] = kiln.broadcast
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[DW:.*]] = kiln.select %[[C]], %[[G]], %[[ZERO]]
// CHECK: %[[DU:.*]] = kiln.select %[[C]], %[[ZERO]], %[[G]]
// CHECK: return %{{.*}}, %[[DW]], %[[DU]]
