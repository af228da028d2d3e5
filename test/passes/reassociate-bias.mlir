// RUN: kiln-opt %s --split-input-file --kiln-reassociate-bias | FileCheck %s

// Tests that x + y @ w + b, parsed as (x + P) + broadcast(b), becomes
// x + (P + broadcast(b)) when only the residual add reads the product.
// CHECK-LABEL: func.func @step
// CHECK: %[[P:.*]] = kiln.matmul
// CHECK: %[[BB:.*]] = kiln.broadcast
// CHECK: %[[S:.*]] = kiln.add %[[P]], %[[BB]] : tensor<4x16xf32>
// CHECK: %[[O:.*]] = kiln.add %arg0, %[[S]] : tensor<4x16xf32>
// CHECK-NOT: kiln.add
// CHECK: return %[[O]]
func.func @step(%x: tensor<4x16xf32>, %y: tensor<4x8xf32>, %w: tensor<8x16xf32>,
                %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = kiln.add %x, %p : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %o = kiln.add %r, %bb : tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}

// -----

// Tests that under bf16 (a bf16 GEMM result read through its widening) the
// moved bias sum is stored rounded to bf16 and widened for the residual add:
// x + f32(bf16(f32(P) + b)).
// CHECK-LABEL: func.func @eval
// CHECK: %[[P:.*]] = kiln.matmul {{.*}} -> tensor<4x16xbf16>
// CHECK: %[[W:.*]] = kiln.convert %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast
// CHECK: %[[S:.*]] = kiln.add %[[W]], %[[BB]] : tensor<4x16xf32>
// CHECK: %[[SB:.*]] = kiln.convert %[[S]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: %[[SW:.*]] = kiln.convert %[[SB]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[O:.*]] = kiln.add %arg0, %[[SW]] : tensor<4x16xf32>
// CHECK: return %[[O]]
func.func @eval(%x: tensor<4x16xf32>, %y: tensor<4x8xbf16>, %w: tensor<8x16xbf16>,
                %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %p = kiln.matmul %y, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %pw = kiln.convert %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %r = kiln.add %pw, %x : tensor<4x16xf32>
  %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
  %o = kiln.add %bb, %r : tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}
