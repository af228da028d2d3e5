// RUN: kiln-opt %s --split-input-file --kiln-fusion | FileCheck %s
//
// What the argument-copy kernels of --kiln-fusion (the bf16 copies of
// parameters, grouped per element count at the function's start) refuse.

// Tests that a pointwise op reading an argument's bf16 copy does not join
// the copies' kernel (it would tie a late op to the start of the function):
// the copy records why, and the reader's chain is a kernel of its own.
// CHECK-LABEL: func.func @step
// CHECK: kiln.convert %arg0 {{.*}}kiln.not_fused = "into kiln.convert at {{.*}}: the bf16 copies of arguments fuse only with each other
// CHECK: kiln.fusion pointwise
// CHECK: kiln.convert
// CHECK: kiln.tanh
func.func @step(%w: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %wb = kiln.convert %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %ww = kiln.convert %wb : tensor<4x8xbf16> -> tensor<4x8xf32>
  %t = kiln.tanh %ww : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// Tests that copies with different element counts never share a kernel
// (one loop covers one count): each stays a kernel of its own.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.convert %arg0
// CHECK: kiln.convert %arg1
// CHECK-NOT: kiln.fusion
func.func @step(%a: tensor<4x8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xbf16>, tensor<8xbf16>) {
  %ab = kiln.convert %a : tensor<4x8xf32> -> tensor<4x8xbf16>
  %bb = kiln.convert %b : tensor<8xf32> -> tensor<8xbf16>
  return %ab, %bb : tensor<4x8xbf16>, tensor<8xbf16>
}
