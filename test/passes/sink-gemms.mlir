// RUN: kiln-opt %s --split-input-file --kiln-sink-gemms | FileCheck %s

// Tests that a backward GEMM whose product is read later (%dh, by the mul)
// moves right before that reader, past the weight gradient's GEMM: its
// operands are an argument (%w2) and %dy, which the weight gradient reads
// anyway, so the move lengthens 64 bytes of %dy's life and frees %dh's 256
// there. The forward GEMM (%y, which the loss depends on) stays where it is
// although its reader is far; the returned weight gradient stays too.
// CHECK-LABEL: func.func @step
// CHECK: %[[Y:.*]] = kiln.matmul %arg0, %arg1 :
// CHECK-NEXT: kiln.exp %arg0
// CHECK: %[[DW:.*]] = kiln.matmul %{{.*}}, %[[DY:.*]] {transpose_lhs = true}
// CHECK-NEXT: %[[DH:.*]] = kiln.matmul %[[DY]], %arg1 {transpose_rhs = true}
// CHECK-NEXT: kiln.mul %[[DH]], %arg0
// CHECK: return
func.func @step(%h: tensor<8x16xbf16> {kiln.role = #kiln.role<input>, kiln.name = "h"},
                %w2: tensor<16x4xbf16> {kiln.role = #kiln.role<param>, kiln.name = "w2"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<16x4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w2"},
        tensor<8x16xbf16> {kiln.role = #kiln.role<grad>, kiln.name = "h"}) {
  %y = kiln.matmul %h, %w2 : tensor<8x16xbf16>, tensor<16x4xbf16> -> tensor<8x4xbf16>
  %e = kiln.exp %h : tensor<8x16xbf16>
  %yf = kiln.convert %y : tensor<8x4xbf16> -> tensor<8x4xf32>
  %l = kiln.reduce_sum %yf dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %dy = kiln.constant dense<1.000000e+00> : tensor<8x4xbf16>
  %dh = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x4xbf16>, tensor<16x4xbf16> -> tensor<8x16xbf16>
  %dw = kiln.matmul %e, %dy {transpose_lhs = true} : tensor<8x16xbf16>, tensor<8x4xbf16> -> tensor<16x4xf32>
  %da = kiln.mul %dh, %h : tensor<8x16xbf16>
  return %l, %dw, %da : tensor<f32>, tensor<16x4xf32>, tensor<8x16xbf16>
}

// -----

// Tests that a backward GEMM stays when the move would lengthen more bytes
// than its product frees: %g ([8, 64], 1 KiB) is read by the GEMM alone,
// its product %p is 64 bytes.
// CHECK-LABEL: func.func @step
// CHECK: %[[G:.*]] = kiln.exp
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[G]], %arg1 :
// CHECK-NEXT: kiln.exp %arg0
// CHECK-NEXT: %[[R:.*]] = kiln.matmul
// CHECK-NEXT: kiln.add %[[P]], %[[R]]
func.func @step(%x: tensor<8x64xbf16> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %w: tensor<64x4xbf16> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<8x4xbf16> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
  %xf = kiln.convert %x : tensor<8x64xbf16> -> tensor<8x64xf32>
  %l = kiln.reduce_sum %xf dims = [0, 1] : tensor<8x64xf32> -> tensor<f32>
  %seed = kiln.constant dense<1.000000e+00> : tensor<8x64xbf16>
  %g = kiln.exp %seed : tensor<8x64xbf16>
  %p = kiln.matmul %g, %w : tensor<8x64xbf16>, tensor<64x4xbf16> -> tensor<8x4xbf16>
  %q = kiln.exp %x : tensor<8x64xbf16>
  %r = kiln.matmul %q, %w : tensor<8x64xbf16>, tensor<64x4xbf16> -> tensor<8x4xbf16>
  %s = kiln.add %p, %r : tensor<8x4xbf16>
  return %l, %s : tensor<f32>, tensor<8x4xbf16>
}

// -----

// Tests that a backward GEMM stays when an op between it and its reader
// updates one of its operands in place (codegen gives kiln.accumulate's
// result its accumulator's buffer): moved past it, the GEMM would read the
// updated bytes.
// CHECK-LABEL: func.func @step
// CHECK: %[[DH:.*]] = kiln.matmul %[[ACC:.*]], %arg1 {transpose_rhs = true}
// CHECK-NEXT: kiln.accumulate %[[ACC]]
func.func @step(%h: tensor<8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "h"},
                %w2: tensor<16x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<8x4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w2"},
        tensor<8x16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "h"}) {
  %l = kiln.reduce_sum %h dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  %seed = kiln.constant dense<1.000000e+00> : tensor<8x4xf32>
  %dy = kiln.exp %seed : tensor<8x4xf32>
  %dh = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x4xf32>, tensor<16x4xf32> -> tensor<8x16xf32>
  %acc = kiln.accumulate %dy, %seed {scale = 1.000000e+00 : f32} : tensor<8x4xf32>
  %da = kiln.mul %dh, %h : tensor<8x16xf32>
  return %l, %acc, %da : tensor<f32>, tensor<8x4xf32>, tensor<8x16xf32>
}
