// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision | FileCheck %s

// Tests that precision = bf16 makes a forward GEMM and the two backward GEMMs
// that read the same values read bf16 copies, one convert per value (made
// right after its definition and shared), while every result stays f32.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[W:[^:]*]]: tensor<8x16xf32> {{.*}}, %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-DAG: %[[XB:.*]] = kiln.convert %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-DAG: %[[WB:.*]] = kiln.convert %[[W]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK: %[[Y:.*]] = kiln.matmul %[[XB]], %[[WB]] : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[G:.*]] = kiln.gelu %[[Y]] : tensor<4x16xf32>
// CHECK: %[[GB:.*]] = kiln.convert %[[G]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: %[[DX:.*]] = kiln.matmul %[[GB]], %[[WB]] {transpose_rhs = true} : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xf32>
// CHECK: %[[DW:.*]] = kiln.matmul %[[XB]], %[[GB]] {transpose_lhs = true} : tensor<4x8xbf16>, tensor<4x16xbf16> -> tensor<8x16xf32>
// CHECK-NOT: kiln.convert
// CHECK: return
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @step(%w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<4x8xf32>, tensor<8x16xf32>) {
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %g = kiln.gelu %y : tensor<4x16xf32>
    %dx = kiln.matmul %g, %w {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    %dw = kiln.matmul %x, %g {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
    return %dx, %dw : tensor<4x8xf32>, tensor<8x16xf32>
  }
}

// -----

// Tests that fp32 (and no precision setting) leaves GEMMs in f32.
// CHECK-LABEL: func.func @fp32
// CHECK-NOT: kiln.convert
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = fp32>} {
  func.func @fp32(%w: tensor<8x16xf32>, %x: tensor<4x8xf32>) -> tensor<4x16xf32> {
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
}

// -----

// Tests that tf32 is a GEMM setting for codegen: the IR keeps f32 operands.
// CHECK-LABEL: func.func @tf32
// CHECK-NOT: kiln.convert
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = tf32>} {
  func.func @tf32(%w: tensor<8x16xf32>, %x: tensor<4x8xf32>) -> tensor<4x16xf32> {
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
}

// -----

// Tests that GEMMs which already read bf16 (or f16) are not converted again
// and that non-GEMM users of a value keep reading the f32 original.
// CHECK-LABEL: func.func @mixed
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
// CHECK-NOT: kiln.convert
// CHECK: return
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @mixed(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>,
                   %c: tensor<4x8xf16>, %d: tensor<8x16xf16>)
      -> (tensor<4x16xf32>, tensor<4x16xf16>) {
    %y = kiln.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
    %z = kiln.matmul %c, %d : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
    return %y, %z : tensor<4x16xf32>, tensor<4x16xf16>
  }
}

// -----

// Tests that the f32 original stays what non-GEMM ops read: the layer-norm
// style elementwise user of x is untouched, only the GEMM reads the copy.
// CHECK-LABEL: func.func @users
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[XB:.*]] = kiln.convert %[[X]]
// CHECK: kiln.exp %[[X]] : tensor<4x8xf32>
// CHECK: kiln.matmul %[[XB]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @users(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>)
      -> (tensor<4x8xf32>, tensor<4x16xf32>) {
    %e = kiln.exp %x : tensor<4x8xf32>
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %e, %y : tensor<4x8xf32>, tensor<4x16xf32>
  }
}

// -----

// Tests that a forward GEMM (one the loss depends on) writes bf16 and its
// readers read a widening convert placed right before the first of them;
// the logits GEMM writes bf16 too, and cross_entropy and its gradient read
// those bf16 logits as they are (their kernels widen each element as they
// load it: no f32 copy of the logits, no convert), while the backward GEMM
// of the gradient keeps an f32 result. The logits' gradient, read by that
// GEMM only, is produced in bf16 by cross_entropy_grad itself (step 7).
// CHECK-LABEL: func.func @forward_results
// CHECK: %[[H:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[HW:.*]] = kiln.convert %[[H]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: kiln.tanh %[[HW]] : tensor<4x8xf32>
// CHECK: %[[L:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK-NOT: kiln.convert %[[L]]
// CHECK: kiln.cross_entropy %[[L]], %{{.*}} : tensor<4x16xbf16>, tensor<4xi32>
// CHECK-NOT: kiln.convert
// CHECK: %[[D:.*]] = kiln.cross_entropy_grad %[[L]], %{{.*}}, %{{.*}} : tensor<4x16xbf16>, tensor<4xi32>
// CHECK-NOT: kiln.convert
// CHECK: kiln.matmul %[[D]], %{{.*}} {transpose_rhs = true} : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @forward_results(%w1: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1"},
                             %w2: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                             %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                             %t: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "h"}) {
    %h = kiln.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %a = kiln.tanh %h : tensor<4x8xf32>
    %logits = kiln.matmul %a, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %loss = kiln.cross_entropy %logits, %t : tensor<4x16xf32>, tensor<4xi32>
    %one = kiln.constant dense<1.0> : tensor<f32>
    %dlogits = kiln.cross_entropy_grad %logits, %t, %one : tensor<4x16xf32>, tensor<4xi32>
    %da = kiln.matmul %dlogits, %w2 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    return %loss, %da : tensor<f32>, tensor<4x8xf32>
  }
}


// -----

// Tests that a backward GEMM whose only reader is the next GEMM (through
// that GEMM's bf16 operand convert) writes bf16 itself (step 7), while the
// GEMM whose result is returned keeps f32.
// CHECK-LABEL: func.func @backward_gemm_read_in_bf16
// CHECK: %[[DH:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xbf16>
// CHECK-NOT: kiln.convert %[[DH]]
// CHECK: %[[DX:.*]] = kiln.matmul %[[DH]], %{{.*}} {transpose_rhs = true} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xf32>
// CHECK: return %{{.*}}, %[[DX]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @backward_gemm_read_in_bf16(%w1: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1"},
                                        %w2: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                                        %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                                        %t: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
    %h = kiln.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %logits = kiln.matmul %h, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %loss = kiln.cross_entropy %logits, %t : tensor<4x16xf32>, tensor<4xi32>
    %one = kiln.constant dense<1.0> : tensor<f32>
    %dlogits = kiln.cross_entropy_grad %logits, %t, %one : tensor<4x16xf32>, tensor<4xi32>
    %dh = kiln.matmul %dlogits, %w2 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    %dx = kiln.matmul %dh, %w1 {transpose_rhs = true} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    return %loss, %dx : tensor<f32>, tensor<4x8xf32>
  }
}

// -----

// Tests that a logits gradient with an f32 reader besides its GEMM (here
// returned as is) stays f32 (of bf16 logits) and the GEMM reads its bf16
// convert.
// CHECK-LABEL: func.func @logits_grad_read_in_f32
// CHECK: %[[D:.*]] = kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x16xbf16>, tensor<4xi32> -> tensor<4x16xf32>
// CHECK: kiln.convert %[[D]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: return %{{.*}}, %{{.*}}, %[[D]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @logits_grad_read_in_f32(%w2: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                                     %a: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"},
                                     %t: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "a"},
          tensor<4x16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "logits"}) {
    %logits = kiln.matmul %a, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %loss = kiln.cross_entropy %logits, %t : tensor<4x16xf32>, tensor<4xi32>
    %one = kiln.constant dense<1.0> : tensor<f32>
    %dlogits = kiln.cross_entropy_grad %logits, %t, %one : tensor<4x16xf32>, tensor<4xi32>
    %da = kiln.matmul %dlogits, %w2 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    return %loss, %da, %dlogits : tensor<f32>, tensor<4x8xf32>, tensor<4x16xf32>
  }
}

// -----

// Tests that logits made again by a backward GEMM (a classifier chunk whose
// gradient runs apart from its loss recomputes them) are rounded to bf16 as
// the forward's are, so the gradient is that of the loss's very logits.
// CHECK-LABEL: func.func @logits_remade_in_backward
// CHECK: %[[L:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK: kiln.cross_entropy %[[L]]
// CHECK: %[[R:.*]] = kiln.matmul %{{.*}}, %{{.*}} {kiln.remade} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: kiln.cross_entropy_grad %[[R]], %{{.*}}, %{{.*}} : tensor<4x16xbf16>, tensor<4xi32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @logits_remade_in_backward(%w2: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                                       %a: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"},
                                       %t: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "t"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "a"}) {
    %logits = kiln.matmul %a, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %loss = kiln.cross_entropy %logits, %t : tensor<4x16xf32>, tensor<4xi32>
    %one = kiln.constant dense<1.0> : tensor<f32>
    %again = kiln.matmul %a, %w2 {kiln.remade} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %dlogits = kiln.cross_entropy_grad %again, %t, %one : tensor<4x16xf32>, tensor<4xi32>
    %da = kiln.matmul %dlogits, %w2 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    return %loss, %da : tensor<f32>, tensor<4x8xf32>
  }
}
// -----

// Tests that a bias add of a forward GEMM and a softmax output are stored in
// bf16 (one convert right after them) and that every non-GEMM reader,
// forward (gelu) and backward (gelu_grad, softmax_grad), reads a widening of
// that bf16 tensor, while the GEMM reads it directly.
// CHECK-LABEL: func.func @stored
// CHECK: %[[B:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT: %[[BB:.*]] = kiln.convert %[[B]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[BW:.*]] = kiln.convert %[[BB]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: kiln.gelu %[[BW]]
// CHECK: %[[P:.*]] = kiln.softmax
// CHECK-NEXT: %[[PB:.*]] = kiln.convert %[[P]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: kiln.matmul %[[PB]]
// CHECK: kiln.gelu_grad %[[BW]]
// CHECK: %[[PW:.*]] = kiln.convert %[[PB]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: kiln.softmax_grad %[[PW]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @stored(%w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %bias: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
                    %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                    %g: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "g"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "d"}) {
    %h = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %bb = kiln.broadcast %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %hb = kiln.add %h, %bb : tensor<4x8xf32>
    %a = kiln.gelu %hb : tensor<4x8xf32>
    %p = kiln.softmax %a : tensor<4x8xf32>
    %y = kiln.matmul %p, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %loss = kiln.reduce_sum %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %dp = kiln.gelu_grad %hb, %g : tensor<4x8xf32>
    %dx = kiln.softmax_grad %p, %dp : tensor<4x8xf32>
    return %loss, %dx : tensor<f32>, tensor<4x8xf32>
  }
}

// -----

// Tests what stays f32 under precision = bf16: the residual stream (an add
// that is not a bias add, read by layer_norm and kept for layer_norm_grad),
// layer_norm's mean and rstd, and the loss; only the GEMM reads bf16 copies.
// CHECK-LABEL: func.func @stays_f32
// CHECK: %[[R:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
// CHECK-NOT: kiln.convert %[[R]]
// CHECK: %{{[^,]*}}, %[[M:[^,]*]], %[[S:[^ ]*]] = kiln.layer_norm %[[R]]
// CHECK-NOT: kiln.convert %[[M]]
// CHECK-NOT: kiln.convert %[[S]]
// CHECK: kiln.layer_norm_grad %[[R]], %{{.*}}, %[[M]], %[[S]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @stays_f32(%w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                       %lw: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "lw"},
                       %lb: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "lb"},
                       %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                       %g: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "g"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "d"}) {
    %h = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %r = kiln.add %x, %h : tensor<4x8xf32>
    %y, %mean, %rstd = kiln.layer_norm %r, %lw, %lb {epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
    %loss = kiln.reduce_sum %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %dx, %dw, %db = kiln.layer_norm_grad %r, %lw, %mean, %rstd, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    return %loss, %dx : tensor<f32>, tensor<4x8xf32>
  }
}

// -----

// Tests that a reshape of an activation is read by a GEMM as the reshape of
// its one bf16 copy (convert commutes with reshape): the forward GEMM and the
// weight-gradient GEMM that views it as a matrix share one convert, and the
// f32 reshape is gone.
// CHECK-LABEL: func.func @views
// CHECK-SAME: (%{{[^:]*}}: tensor<8x16xf32> {{.*}}, %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: %[[XB:.*]] = kiln.convert %[[X]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[XV:.*]] = kiln.reshape %[[XB]] : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-NOT: kiln.convert %[[X]]
// CHECK-NOT: kiln.reshape %[[X]]
// CHECK: kiln.matmul %[[XB]]
// CHECK-NOT: kiln.convert %[[X]]
// CHECK-NOT: kiln.reshape %[[X]]
// CHECK: kiln.matmul %[[XV]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @views(%w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                   %x: tensor<2x4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                   %g: tensor<8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "g"})
      -> (tensor<2x4x16xf32>, tensor<8x16xf32>) {
    %y = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
    %xv = kiln.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %dw = kiln.matmul %xv, %g {transpose_lhs = true} : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    return %y, %dw : tensor<2x4x16xf32>, tensor<8x16xf32>
  }
}

// -----

// Tests that precision = bf16 runs attention in bf16: q, k, v are read as
// bf16 converts made right after their definitions and shared by the
// forward and the backward; out is bf16 (read widened by the f32 reduction,
// in bf16 by attention_grad), lse stays f32; attention_grad reads a bf16
// copy of dout and writes bf16 dq, dk, dv (widened for the f32 results),
// and the learned slope's gradient stays f32.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x2x5x8xf32> {{.*}}, %[[K:[^:]*]]: tensor<1x1x7x8xf32> {{.*}}, %[[V:[^:]*]]: tensor<1x1x7x8xf32> {{.*}}, %[[SL:[^:]*]]: tensor<2xf32> {{.*}}, %[[DO:[^:]*]]: tensor<1x2x5x8xf32>
// CHECK-DAG: %[[QB:.*]] = kiln.convert %[[Q]] : tensor<1x2x5x8xf32> -> tensor<1x2x5x8xbf16>
// CHECK-DAG: %[[KB:.*]] = kiln.convert %[[K]] : tensor<1x1x7x8xf32> -> tensor<1x1x7x8xbf16>
// CHECK-DAG: %[[VB:.*]] = kiln.convert %[[V]] : tensor<1x1x7x8xf32> -> tensor<1x1x7x8xbf16>
// CHECK-DAG: %[[DOB:.*]] = kiln.convert %[[DO]] : tensor<1x2x5x8xf32> -> tensor<1x2x5x8xbf16>
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = kiln.attention %[[QB]], %[[KB]], %[[VB]] captures(%[[SL]]) {{.*}} : (tensor<1x2x5x8xbf16>, tensor<1x1x7x8xbf16>, tensor<1x1x7x8xbf16>, tensor<2xf32>) -> (tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>)
// CHECK: %[[OW:.*]] = kiln.convert %[[OUT]] : tensor<1x2x5x8xbf16> -> tensor<1x2x5x8xf32>
// CHECK-NEXT: kiln.reduce_sum %[[OW]]
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]], %[[DS:.*]] = kiln.attention_grad %[[QB]], %[[KB]], %[[VB]], %[[OUT]], %[[LSE]], %[[DOB]] captures(%[[SL]]) {{.*}} -> (tensor<1x2x5x8xbf16>, tensor<1x1x7x8xbf16>, tensor<1x1x7x8xbf16>, tensor<2xf32>)
// CHECK-DAG: %[[DQW:.*]] = kiln.convert %[[DQ]] : tensor<1x2x5x8xbf16> -> tensor<1x2x5x8xf32>
// CHECK-DAG: %[[DKW:.*]] = kiln.convert %[[DK]] : tensor<1x1x7x8xbf16> -> tensor<1x1x7x8xf32>
// CHECK-DAG: %[[DVW:.*]] = kiln.convert %[[DV]] : tensor<1x1x7x8xbf16> -> tensor<1x1x7x8xf32>
// CHECK: return %{{.*}}, %[[DQW]], %[[DKW]], %[[DVW]], %[[DS]] :
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @attention(%q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "q"},
                       %k: tensor<1x1x7x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "k"},
                       %v: tensor<1x1x7x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "v"},
                       %slope: tensor<2xf32> {kiln.role = #kiln.role<param>, kiln.name = "slope"},
                       %dout: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "dout"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<1x2x5x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "q"},
          tensor<1x1x7x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "k"},
          tensor<1x1x7x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "v"},
          tensor<2xf32> {kiln.role = #kiln.role<grad>, kiln.name = "slope"}) {
    %out, %lse = kiln.attention %q, %k, %v captures(%slope) {scale = 0.125 : f32}
        : (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>)
        -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
      score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>) {
        %sl = tensor.extract %c0[%h] : tensor<2xf32>
        %r = arith.mulf %s, %sl : f32
        kiln.yield %r : f32
      }
    %loss = kiln.reduce_sum %out dims = [0, 1, 2, 3] : tensor<1x2x5x8xf32> -> tensor<f32>
    %dq, %dk, %dv, %ds = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope) {scale = 0.125 : f32}
        : (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>, tensor<2xf32>)
        -> (tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>)
      score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<2xf32>) {
        %sl = tensor.extract %c0[%h] : tensor<2xf32>
        %r = arith.mulf %s, %sl : f32
        kiln.yield %r : f32
      }
    return %loss, %dq, %dk, %dv, %ds : tensor<f32>, tensor<1x2x5x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>
  }
}

// -----

// Tests that fp32 leaves attention in f32 (no converts).
// CHECK-LABEL: func.func @attention_fp32
// CHECK-NOT: kiln.convert
// CHECK: kiln.attention %{{.*}} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>)
// CHECK-NOT: kiln.convert
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = fp32>} {
  func.func @attention_fp32(%q: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32> {kiln.role = #kiln.role<loss>}) {
    %out, %lse = kiln.attention %q, %q, %q {scale = 0.125 : f32}
        : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>)
    return %out : tensor<1x1x4x8xf32>
  }
}

// -----

// Tests that a GEMM reading a view of attention's bf16 out (the heads
// transposed back and merged, as y = reshape(transpose(out))) reads the
// same transpose and reshape of out itself in bf16: no convert is left
// between out and the GEMM, and the f32 transpose, read by nothing else,
// is gone.
// CHECK-LABEL: func.func @heads
// CHECK: %[[OUT:.*]], %{{.*}} = kiln.attention
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[OUT]] {{.*}} : tensor<1x2x5x8xbf16> -> tensor<1x5x2x8xbf16>
// CHECK-NEXT: %[[Y:.*]] = kiln.reshape %[[T]] : tensor<1x5x2x8xbf16> -> tensor<5x16xbf16>
// CHECK-NOT: kiln.transpose
// CHECK: kiln.matmul %[[Y]], %{{.*}} : tensor<5x16xbf16>, tensor<16x4xbf16>
// CHECK-NOT: kiln.convert %[[OUT]]
// CHECK: return
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @heads(%q: tensor<1x2x5x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "q"},
                   %w: tensor<16x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %out, %lse = kiln.attention %q, %q, %q {scale = 0.125 : f32}
        : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>)
        -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
    %t = kiln.transpose %out permutation = [0, 2, 1, 3] : tensor<1x2x5x8xf32> -> tensor<1x5x2x8xf32>
    %y = kiln.reshape %t : tensor<1x5x2x8xf32> -> tensor<5x16xf32>
    %p = kiln.matmul %y, %w : tensor<5x16xf32>, tensor<16x4xf32> -> tensor<5x4xf32>
    %loss = kiln.reduce_sum %p dims = [0, 1] : tensor<5x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Tests that a transposed f32 value a GEMM reads becomes the transpose of
// its bf16 copy (half the bytes moved), while the f32 transpose stays for
// its f32 reader.
// CHECK-LABEL: func.func @transposed
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x4xf32>
// CHECK: %[[XB:.*]] = kiln.convert %[[X]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK-NEXT: %[[TB:.*]] = kiln.transpose %[[XB]] {{.*}} : tensor<8x4xbf16> -> tensor<4x8xbf16>
// CHECK: %[[T:.*]] = kiln.transpose %[[X]] {{.*}} : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: kiln.matmul %[[TB]], %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK: kiln.reduce_sum %[[T]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @transposed(%x: tensor<8x4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                        %w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<4x16xf32>, tensor<f32>) {
    %t = kiln.transpose %x permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
    %p = kiln.matmul %t, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %s = kiln.reduce_sum %t dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %p, %s : tensor<4x16xf32>, tensor<f32>
  }
}

// -----

// Tests that a unary activation of a forward GEMM result (SwiGLU's
// silu(x w1)) is stored in bf16, as torch.autocast computes it: the forward
// product and a backward reader both read its one widening.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.*]] = kiln.matmul {{.*}} -> tensor<4x16xbf16>
// CHECK: %[[AW:.*]] = kiln.convert %[[A]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[S:.*]] = kiln.silu %[[AW]] : tensor<4x16xf32>
// CHECK: %[[SB:.*]] = kiln.convert %[[S]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: %[[SW:.*]] = kiln.convert %[[SB]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: kiln.mul %[[SW]], %{{.*}} : tensor<4x16xf32>
// CHECK: kiln.mul %{{.*}}, %[[SW]] : tensor<4x16xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @step(%w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %v: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "v"},
                  %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %g: tensor<4x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "g"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x16xf32>) {
    %a = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %b = kiln.matmul %x, %v : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %s = kiln.silu %a : tensor<4x16xf32>
    %p = kiln.mul %s, %b : tensor<4x16xf32>
    %loss = kiln.reduce_sum %p dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    %db = kiln.mul %g, %s : tensor<4x16xf32>
    return %loss, %db : tensor<f32>, tensor<4x16xf32>
  }
}

// -----

// Tests step 8: the backward GEMM writing the gradient of a SwiGLU product
// (silu(a) * b) writes it in bf16 when everything computed from it ends
// rounded to bf16 (da and db, read by GEMMs only); its pointwise readers read
// a widening convert. @sum_of_product: the same gradient also feeds a
// reduce_sum (a bias gradient), so it stays f32. (A function without a loss
// or metric result has no gradients: @step above keeps its GEMMs f32.)
// CHECK-LABEL: func.func @swiglu_gradient
// CHECK: %[[G:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
// CHECK: %[[GW:.*]] = kiln.convert %[[G]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: kiln.mul %[[GW]], %{{.*}} : tensor<4x16xf32>
// CHECK: kiln.mul %[[GW]], %{{.*}} : tensor<4x16xf32>
// CHECK-LABEL: func.func @sum_of_product
// CHECK: %[[G:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
// CHECK-NOT: kiln.convert %[[G]]
// CHECK: kiln.mul %[[G]], %{{.*}} : tensor<4x16xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = bf16>} {
  func.func @swiglu_gradient(%a: tensor<4x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"},
                             %b: tensor<4x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "b"},
                             %dy: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "dy"},
                             %w2: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                             %w1: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
    %loss = kiln.reduce_sum %a dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    %g = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %s = kiln.silu %a : tensor<4x16xf32>
    %gb = kiln.mul %g, %b : tensor<4x16xf32>
    %da = kiln.elementwise_grad %a, %gb {op = "kiln.silu"} : tensor<4x16xf32>
    %db = kiln.mul %g, %s : tensor<4x16xf32>
    %dxa = kiln.matmul %da, %w1 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    %dxb = kiln.matmul %db, %w1 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    %dx = kiln.add %dxa, %dxb : tensor<4x8xf32>
    return %loss, %dx : tensor<f32>, tensor<4x8xf32>
  }
  func.func @sum_of_product(%a: tensor<4x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"},
                            %dy: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "dy"},
                            %w2: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2"},
                            %w1: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "x"},
          tensor<16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "bias"}) {
    %loss = kiln.reduce_sum %a dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    %g = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    %ga = kiln.mul %g, %a : tensor<4x16xf32>
    %dx = kiln.matmul %ga, %w1 {transpose_rhs = true} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
    %dbias = kiln.reduce_sum %ga dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
    return %loss, %dx, %dbias : tensor<f32>, tensor<4x8xf32>, tensor<16xf32>
  }
}
