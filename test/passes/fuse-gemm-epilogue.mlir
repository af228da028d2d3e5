// RUN: kiln-opt %s --split-input-file --kiln-fuse-gemm-epilogue | FileCheck %s

// Tests that matmul + bias (a [N] vector broadcast along the rows) + gelu
// becomes one "gemm" kernel, and that the gelu input, read again by the
// backward's gelu_grad, is yielded as the kernel's aux output.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm (%arg0, %arg1, %arg2)
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: tensor<2x4x8xf32>, %[[W:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<16xf32>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[BB:.*]] = kiln.broadcast %[[B]] dims = [2]
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[P]], %[[BB]]
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[S]]
// CHECK-NEXT: kiln.yield %[[S]], %[[G]]
// CHECK: kiln.gelu_grad %[[F]]#0, %arg3
// CHECK: return %[[F]]#1
func.func @step(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>,
                %dy: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %bb = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
  %s = kiln.add %p, %bb : tensor<2x4x16xf32>
  %g = kiln.gelu %s : tensor<2x4x16xf32>
  %d = kiln.gelu_grad %s, %dy : tensor<2x4x16xf32>
  return %g, %d : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Tests that the forward's gelu joins the GEMM when remat recomputed another
// gelu of the same sum in the backward (parsed last, it is the sum's first
// user): the fused gelu is the one that runs first, and the copy reads the
// kernel's aux output like gelu_grad.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm (%arg0, %arg1, %arg2)
// CHECK: %[[S:.*]] = kiln.add
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[S]]
// CHECK-NEXT: kiln.yield %[[S]], %[[G]]
// CHECK: %[[D:.*]] = kiln.gelu_grad %[[F]]#0, %arg3
// CHECK-NEXT: %[[G2:.*]] = kiln.gelu %[[F]]#0 {kiln.recompute}
// CHECK-NEXT: kiln.mul %[[G2]], %[[D]]
func.func @step(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>,
                %dy: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %bb = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
  %s = kiln.add %p, %bb : tensor<2x4x16xf32>
  %g = kiln.gelu %s : tensor<2x4x16xf32>
  %d = kiln.gelu_grad %s, %dy : tensor<2x4x16xf32>
  %g2 = kiln.gelu %s {kiln.recompute} : tensor<2x4x16xf32>
  %m = kiln.mul %g2, %d : tensor<2x4x16xf32>
  return %g, %m : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Tests that the bias may be the add's first operand, and that without a
// gelu the kernel is matmul + bias only, yielding just the sum.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = kiln.fusion gemm (%arg0, %arg1, %arg2)
// CHECK: kiln.matmul
// CHECK-NEXT: %[[BB:.*]] = kiln.broadcast
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[BB]], %{{.*}}
// CHECK-NEXT: kiln.yield %[[S]] : tensor<4x16xf32>
// CHECK: return %[[F]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>)
    -> tensor<4x16xf32> {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = kiln.add %bb, %p : tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// Tests that a gelu without a bias is an epilogue of its own (GELU), the
// product yielded as the aux output because the backward reads it.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm (%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[P:.*]] = kiln.matmul
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[P]]
// CHECK-NEXT: kiln.yield %[[P]], %[[G]]
// CHECK: kiln.gelu_grad %[[F]]#0
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %dy: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %g = kiln.gelu %p : tensor<4x16xf32>
  %d = kiln.gelu_grad %p, %dy : tensor<4x16xf32>
  return %g, %d : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests the same with remat's copy of the gelu in the backward (parsed last:
// the product's first user): the forward's gelu is the epilogue.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm (%arg0, %arg1)
// CHECK: kiln.yield
// CHECK: %[[D:.*]] = kiln.gelu_grad %[[F]]#0
// CHECK-NEXT: kiln.gelu %[[F]]#0 {kiln.recompute}
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %dy: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %g = kiln.gelu %p : tensor<4x16xf32>
  %d = kiln.gelu_grad %p, %dy : tensor<4x16xf32>
  %g2 = kiln.gelu %p {kiln.recompute} : tensor<4x16xf32>
  %m = kiln.mul %g2, %d : tensor<4x16xf32>
  return %g, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests the backward of a linear layer with GELU: the GEMM producing the
// incoming gradient takes gelu_grad (DGELU, the forward's gelu input read as
// the aux input) and the bias gradient, the sum of the result over the rows
// (DGELU_BGRAD); the weight-gradient GEMM takes the bias gradient of its
// rhs, the output gradient dY (BGRADB), summed over k = the rows of dY.
// CHECK-LABEL: func.func @step
// CHECK: %[[D:.*]]:2 = kiln.fusion gemm (%arg0, %arg1, %arg2)
// CHECK-NEXT: ^bb0(%[[DY:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[PRE:[^:]*]]: tensor<4x16xf32>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[DY]], %[[W]] {transpose_rhs = true}
// CHECK-NEXT: %[[GG:.*]] = kiln.gelu_grad %[[PRE]], %[[P]]
// CHECK-NEXT: %[[DB:.*]] = kiln.reduce_sum %[[GG]] dims = [0]
// CHECK-NEXT: kiln.yield %[[GG]], %[[DB]]
// CHECK: %[[W2:.*]]:2 = kiln.fusion gemm (%arg3, %arg0)
// CHECK-NEXT: ^bb0(%[[H:[^:]*]]: tensor<4x16xf32>, %[[DY2:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DW:.*]] = kiln.matmul %[[H]], %[[DY2]] {transpose_lhs = true}
// CHECK-NEXT: %[[DB2:.*]] = kiln.reduce_sum %[[DY2]] dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT: kiln.yield %[[DW]], %[[DB2]]
// CHECK: return %[[D]]#0, %[[D]]#1, %[[W2]]#0, %[[W2]]#1
func.func @step(%dy: tensor<4x8xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x16xf32>,
                %h: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>) {
  %db2 = kiln.reduce_sum %dy dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %p = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %gg = kiln.gelu_grad %pre, %p : tensor<4x16xf32>
  %db = kiln.reduce_sum %gg dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
  %dw = kiln.matmul %h, %dy {transpose_lhs = true} : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  return %gg, %db, %dw, %db2 : tensor<4x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests that the bias gradient of an output gradient [B, T, N] is found
// through reshapes: the GEMM reads dY as [B*T, N] and sums its rows.
// CHECK-LABEL: func.func @step
// CHECK: %[[V:.*]] = kiln.reshape %arg0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm (%arg1, %[[V]])
// CHECK: kiln.reduce_sum %{{.*}} dims = [0] : tensor<8x8xf32> -> tensor<8xf32>
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @step(%dy: tensor<2x4x8xf32>, %h: tensor<8x16xf32>)
    -> (tensor<16x8xf32>, tensor<8xf32>) {
  %db = kiln.reduce_sum %dy dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %v = kiln.reshape %dy : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %dw = kiln.matmul %h, %v {transpose_lhs = true} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  return %dw, %db : tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests that the gelu stays out when its input is read before the gelu runs
// (the kernel sits at its last member): matmul + bias still fuse.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = kiln.fusion gemm
// CHECK-NOT: kiln.gelu %
// CHECK: kiln.yield
// CHECK: kiln.tanh %[[F]]
// CHECK: kiln.gelu %[[F]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %s = kiln.add %p, %bb : tensor<4x16xf32>
  %t = kiln.tanh %s : tensor<4x16xf32>
  %g = kiln.gelu %s : tensor<4x16xf32>
  return %g, %t : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a GELU epilogue whose gelu input must be kept (aux) needs N
// divisible by 8 (cuBLASLt's aux leading dimension): N = 12 keeps the bias
// epilogue only, and the gelu stays a kernel of its own.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = kiln.fusion gemm
// CHECK: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: kiln.gelu %[[F]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>,
                %dy: tensor<4x12xf32>) -> (tensor<4x12xf32>, tensor<4x12xf32>) {
  %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<12xf32> -> tensor<4x12xf32>
  %s = kiln.add %p, %bb : tensor<4x12xf32>
  %g = kiln.gelu %s : tensor<4x12xf32>
  %d = kiln.gelu_grad %s, %dy : tensor<4x12xf32>
  return %g, %d : tensor<4x12xf32>, tensor<4x12xf32>
}

// -----

// Tests that a bf16 GEMM (precision = bf16: bf16 product widened, f32 bias
// added, the sum rounded to bf16) becomes one "gemm" kernel on the fp32
// accumulator: the matmul now yields f32, the bias is rounded to bf16 outside
// (cuBLASLt reads it in D's type) and widened inside, and the sum is rounded
// once; the gelu reads the unrounded sum, and the rounded sum is yielded as
// the aux output that the backward's widening convert reads after the kernel.
// CHECK-LABEL: func.func @step
// CHECK: %[[B16:.*]] = kiln.convert %arg2 : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: %[[F:.*]]:2 = kiln.fusion gemm (%arg0, %arg1, %[[B16]])
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: tensor<2x4x8xbf16>, %[[W:[^:]*]]: tensor<8x16xbf16>, %[[B:[^:]*]]: tensor<16xbf16>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[X]], %[[W]] : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[BB:.*]] = kiln.broadcast %[[B]] dims = [2] : tensor<16xbf16> -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[BW:.*]] = kiln.convert %[[BB]] : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[P]], %[[BW]] : tensor<2x4x16xf32>
// CHECK-NEXT: %[[SB:.*]] = kiln.convert %[[S]] : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[S]] : tensor<2x4x16xf32>
// CHECK-NEXT: %[[GB:.*]] = kiln.convert %[[G]] : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
// CHECK-NEXT: kiln.yield %[[SB]], %[[GB]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[GI:.*]] = kiln.convert %[[F]]#0 : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
// CHECK: kiln.gelu_grad %[[GI]], %arg3
// CHECK: return %[[F]]#1
func.func @step(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>,
                %dy: tensor<2x4x16xf32>) -> (tensor<2x4x16xbf16>, tensor<2x4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xbf16>
  %bb = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
  %pw = kiln.convert %p : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %s = kiln.add %pw, %bb : tensor<2x4x16xf32>
  %sb = kiln.convert %s : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %gi = kiln.convert %sb : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %g = kiln.gelu %gi : tensor<2x4x16xf32>
  %gb = kiln.convert %g : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %d = kiln.gelu_grad %gi, %dy : tensor<2x4x16xf32>
  return %gb, %d : tensor<2x4x16xbf16>, tensor<2x4x16xf32>
}

// -----

// Tests the same in bf16: remat's copy of the widening and the gelu (parsed
// last: the rounded sum's and the widening's first users) stays outside, and
// the forward's join the GEMM.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm
// CHECK: %[[G:.*]] = kiln.gelu
// CHECK: kiln.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[GI:.*]] = kiln.convert %[[F]]#0 : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
// CHECK: kiln.gelu_grad %[[GI]], %arg3
// CHECK-NEXT: %[[GI2:.*]] = kiln.convert %[[F]]#0 {kiln.recompute}
// CHECK-NEXT: kiln.gelu %[[GI2]] {kiln.recompute}
func.func @step(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>,
                %dy: tensor<2x4x16xf32>) -> (tensor<2x4x16xbf16>, tensor<2x4x16xf32>) {
  %p = kiln.matmul %x, %w : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xbf16>
  %bb = kiln.broadcast %b dims = [2] : tensor<16xf32> -> tensor<2x4x16xf32>
  %pw = kiln.convert %p : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %s = kiln.add %pw, %bb : tensor<2x4x16xf32>
  %sb = kiln.convert %s : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %gi = kiln.convert %sb : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %g = kiln.gelu %gi : tensor<2x4x16xf32>
  %gb = kiln.convert %g : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %d = kiln.gelu_grad %gi, %dy : tensor<2x4x16xf32>
  %gi2 = kiln.convert %sb {kiln.recompute} : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %g2 = kiln.gelu %gi2 {kiln.recompute} : tensor<2x4x16xf32>
  %m = kiln.mul %g2, %d : tensor<2x4x16xf32>
  return %gb, %m : tensor<2x4x16xbf16>, tensor<2x4x16xf32>
}

// -----

// Tests that a bf16 GEMM with a bias only becomes a "gemm" kernel yielding
// just the rounded sum, and that nothing is left of the unfused chain.
// CHECK-LABEL: func.func @step
// CHECK: %[[B16:.*]] = kiln.convert %arg2 : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: %[[F:.*]] = kiln.fusion gemm (%arg0, %arg1, %[[B16]])
// CHECK: kiln.matmul {{.*}} -> tensor<4x16xf32>
// CHECK: kiln.yield %{{.*}} : tensor<4x16xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @step(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>)
    -> tensor<4x16xbf16> {
  %p = kiln.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %pw = kiln.convert %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %s = kiln.add %bb, %pw : tensor<4x16xf32>
  %sb = kiln.convert %s : tensor<4x16xf32> -> tensor<4x16xbf16>
  return %sb : tensor<4x16xbf16>
}

// -----

// Tests the bf16 backward of a linear layer with GELU (precision = bf16: the
// gelu input stored in bf16 and widened, bf16 GEMM operands, f32 results):
// the GEMM producing the incoming gradient takes gelu_grad of the widened
// aux and the rounding of its result (DGELU with a bf16 D: cuBLASLt's aux has
// D's type, so the stored bf16 gelu input is read, and no f32 copy of it is
// made), and the bias gradient then sums the widening of that bf16 result,
// which the weight-gradient GEMM reads: BGRADB there, in fp32.
// CHECK-LABEL: func.func @step
// CHECK: %[[D:.*]] = kiln.fusion gemm (%arg0, %arg1, %arg2)
// CHECK-NEXT: ^bb0(%[[DY:[^:]*]]: tensor<4x8xbf16>, %[[W:[^:]*]]: tensor<16x8xbf16>, %[[PRE:[^:]*]]: tensor<4x16xbf16>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[DY]], %[[W]] {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[X:.*]] = kiln.convert %[[PRE]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[GG:.*]] = kiln.gelu_grad %[[X]], %[[P]]
// CHECK-NEXT: %[[GB:.*]] = kiln.convert %[[GG]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK-NEXT: kiln.yield %[[GB]] : tensor<4x16xbf16>
// CHECK: %[[W2:.*]]:2 = kiln.fusion gemm (%arg3, %[[D]])
// CHECK-NEXT: ^bb0(%[[H:[^:]*]]: tensor<4x8xbf16>, %[[G2:[^:]*]]: tensor<4x16xbf16>):
// CHECK-NEXT: %[[DW:.*]] = kiln.matmul %[[H]], %[[G2]] {transpose_lhs = true}
// CHECK-NEXT: %[[GW:.*]] = kiln.convert %[[G2]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[DB:.*]] = kiln.reduce_sum %[[GW]] dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
// CHECK-NEXT: kiln.yield %[[DW]], %[[DB]]
// CHECK-NOT: kiln.gelu_grad
// CHECK: return %[[W2]]#0, %[[W2]]#1
func.func @step(%dy: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %pre: tensor<4x16xbf16>,
                %h: tensor<4x8xbf16>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %x = kiln.convert %pre : tensor<4x16xbf16> -> tensor<4x16xf32>
  %p = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
  %gg = kiln.gelu_grad %x, %p : tensor<4x16xf32>
  %gb = kiln.convert %gg : tensor<4x16xf32> -> tensor<4x16xbf16>
  %db = kiln.reduce_sum %gg dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
  %dw = kiln.matmul %h, %gb {transpose_lhs = true} : tensor<4x8xbf16>, tensor<4x16xbf16> -> tensor<8x16xf32>
  return %dw, %db : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Tests that under precision = bf16 the bias gradient of an f32 output
// gradient dY fuses into the weight-gradient GEMM that reads dY's bf16
// rounding (through a reshape): the GEMM sums its bf16 operand, widened, into
// an fp32 bias gradient (the rounding point the sum moves to is the one
// torch.autocast's linear backward has).
// CHECK-LABEL: func.func @step
// CHECK: %[[DYB:.*]] = kiln.convert %arg0 : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[V:.*]] = kiln.reshape %[[DYB]] : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[F:.*]]:2 = kiln.fusion gemm (%arg1, %[[V]])
// CHECK: kiln.matmul {{.*}} -> tensor<16x8xf32>
// CHECK-NEXT: %[[VW:.*]] = kiln.convert %{{.*}} : tensor<8x8xbf16> -> tensor<8x8xf32>
// CHECK-NEXT: kiln.reduce_sum %[[VW]] dims = [0] : tensor<8x8xf32> -> tensor<8xf32>
// CHECK-NOT: kiln.reduce_sum
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @step(%dy: tensor<2x4x8xf32>, %h: tensor<8x16xbf16>)
    -> (tensor<16x8xf32>, tensor<8xf32>) {
  %db = kiln.reduce_sum %dy dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %dyb = kiln.convert %dy : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %v = kiln.reshape %dyb : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %dw = kiln.matmul %h, %v {transpose_lhs = true} : tensor<8x16xbf16>, tensor<8x8xbf16> -> tensor<16x8xf32>
  return %dw, %db : tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests that the bias gradient of attention heads moved back to rows (a
// bf16 dq [B, H, T, D] transposed to [B, T, H, D]) fuses when the sum reads
// the f32 widening of that transpose and the GEMM the bf16 transpose: the
// same values in the same order (convert commutes with transpose).
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion gemm
// CHECK: kiln.reduce_sum %{{.*}} dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NOT: kiln.reduce_sum
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @step(%dq: tensor<1x2x4x4xbf16>, %h: tensor<4x16xbf16>)
    -> (tensor<16x8xf32>, tensor<8xf32>) {
  %t = kiln.transpose %dq permutation = [0, 2, 1, 3] : tensor<1x2x4x4xbf16> -> tensor<1x4x2x4xbf16>
  %v = kiln.reshape %t : tensor<1x4x2x4xbf16> -> tensor<4x8xbf16>
  %w = kiln.convert %dq : tensor<1x2x4x4xbf16> -> tensor<1x2x4x4xf32>
  %tw = kiln.transpose %w permutation = [0, 2, 1, 3] : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %x = kiln.reshape %tw : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %db = kiln.reduce_sum %x dims = [0, 1] : tensor<1x4x8xf32> -> tensor<8xf32>
  %dw = kiln.matmul %h, %v {transpose_lhs = true} : tensor<4x16xbf16>, tensor<4x8xbf16> -> tensor<16x8xf32>
  return %dw, %db : tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests that a bias gradient stays a reduce_sum of its own when the GEMM's
// bf16 operand holds other values: here the transpose the GEMM reads has
// another permutation than the one summed.
// CHECK-LABEL: func.func @step
// CHECK-NOT: kiln.fusion
// CHECK: kiln.reduce_sum
func.func @step(%dq: tensor<1x4x4x2xbf16>, %h: tensor<4x16xbf16>)
    -> (tensor<16x8xf32>, tensor<8xf32>) {
  %t = kiln.transpose %dq permutation = [0, 2, 1, 3] : tensor<1x4x4x2xbf16> -> tensor<1x4x4x2xbf16>
  %v = kiln.reshape %t : tensor<1x4x4x2xbf16> -> tensor<4x8xbf16>
  %w = kiln.convert %dq : tensor<1x4x4x2xbf16> -> tensor<1x4x4x2xf32>
  %x = kiln.reshape %w : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
  %db = kiln.reduce_sum %x dims = [0, 1] : tensor<1x4x8xf32> -> tensor<8xf32>
  %dw = kiln.matmul %h, %v {transpose_lhs = true} : tensor<4x16xbf16>, tensor<4x8xbf16> -> tensor<16x8xf32>
  return %dw, %db : tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests that the bf16 DGELU form needs every f32 reader of gelu_grad's
// result to be its bf16 rounding or a bias-gradient sum: with another f32
// reader (a mul), the f32 DGELU is used instead, reading the f32 widening of
// the gelu input as its aux and writing an f32 result.
// CHECK-LABEL: func.func @step
// CHECK: %[[X:.*]] = kiln.convert %arg2 : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[D:.*]] = kiln.fusion gemm (%arg0, %arg1, %[[X]])
// CHECK: kiln.gelu_grad
// CHECK-NEXT: kiln.yield %{{.*}} : tensor<4x16xf32>
// CHECK: kiln.mul %[[D]], %[[D]]
func.func @step(%dy: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %pre: tensor<4x16xbf16>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>) {
  %x = kiln.convert %pre : tensor<4x16xbf16> -> tensor<4x16xf32>
  %p = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
  %gg = kiln.gelu_grad %x, %p : tensor<4x16xf32>
  %gb = kiln.convert %gg : tensor<4x16xf32> -> tensor<4x16xbf16>
  %sq = kiln.mul %gg, %gg : tensor<4x16xf32>
  return %gb, %sq : tensor<4x16xbf16>, tensor<4x16xf32>
}

// -----

// Tests that a GEMM with bf16 operands whose f32 result is read only by its
// rounding to bf16 (the backward GEMM giving attention_grad its bf16 dout)
// writes bf16 itself: no f32 result and no convert are left.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %arg0, %arg1 {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[V:.*]] = kiln.reshape %[[P]] : tensor<4x16xbf16> -> tensor<4x2x8xbf16>
// CHECK-NEXT: return %[[V]]
func.func @step(%dy: tensor<4x8xbf16>, %w: tensor<16x8xbf16>) -> tensor<4x2x8xbf16> {
  %p = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
  %pb = kiln.convert %p : tensor<4x16xf32> -> tensor<4x16xbf16>
  %v = kiln.reshape %pb : tensor<4x16xbf16> -> tensor<4x2x8xbf16>
  return %v : tensor<4x2x8xbf16>
}

// -----

// Tests that the GEMM keeps its f32 result when anything but the rounding
// reads it (here an f32 residual add), and when its operands are f32.
// CHECK-LABEL: func.func @step
// CHECK: kiln.matmul %arg0, %arg1 {{.*}} -> tensor<4x16xf32>
// CHECK: kiln.convert %{{.*}} : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: kiln.matmul %arg3, %arg4 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: kiln.convert %{{.*}} : tensor<4x16xf32> -> tensor<4x16xbf16>
func.func @step(%dy: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %r: tensor<4x16xf32>,
                %x: tensor<4x8xf32>, %w2: tensor<8x16xf32>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>) {
  %p = kiln.matmul %dy, %w {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xf32>
  %pb = kiln.convert %p : tensor<4x16xf32> -> tensor<4x16xbf16>
  %s = kiln.add %p, %r : tensor<4x16xf32>
  %q = kiln.matmul %x, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %qb = kiln.convert %q : tensor<4x16xf32> -> tensor<4x16xbf16>
  return %pb, %s, %qb : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>
}
