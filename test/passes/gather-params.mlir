// RUN: kiln-opt %s --split-input-file --kiln-gather-params | FileCheck %s

// Tests ZeRO-3 (zero = 3, mesh data = 2): a parameter whose elements split
// in two becomes this rank's flat slice (kiln.shard_axis, kiln.whole_shape)
// in @step and @eval, and each group of its readers -- the forward's, then
// the backward's (after the loss's cotangent seed) -- reads its own
// all-gather, created just before the group's first reader. One that does
// not split (b: 3 elements) stays whole.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<param>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK-SAME: %[[B:[^:]*]]: tensor<3xf32> {kiln.name = "b", kiln.role = #kiln.role<param>}
// CHECK: %[[G1:.*]] = kiln.all_gather %[[W]] over "data" dim = 0 {reason = "ZeRO-3: the parameter gathered for the forward, freed before the backward"} : tensor<16xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[W1:.*]] = kiln.reshape %[[G1]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK-NEXT: kiln.mul %[[W1]], %{{.*}}
// CHECK: kiln.reduce_sum %[[B]]
// CHECK: %[[G2:.*]] = kiln.all_gather %[[W]] over "data" dim = 0 {reason = "ZeRO-3: the parameter gathered again for the backward"}
// CHECK-NEXT: %[[W2:.*]] = kiln.reshape %[[G2]]
// CHECK-NEXT: kiln.mul %{{.*}}, %[[W2]]
// CHECK-LABEL: func.func @eval
// CHECK-SAME: %[[EW:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<param>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK: kiln.all_gather %[[EW]] over "data" dim = 0 {reason = "ZeRO-3: the parameter gathered for the forward"}
// CHECK-NOT: kiln.all_gather
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 3>} {
  func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %b: tensor<3xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
                  %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %seed = kiln.constant dense<1.0> : tensor<4x8xf32>
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %2 = kiln.reduce_sum %b dims = [0] : tensor<3xf32> -> tensor<f32>
    %3 = kiln.add %1, %2 : tensor<f32>
    %4 = kiln.mul %seed, %w : tensor<4x8xf32>
    return %3, %4 : tensor<f32>, tensor<4x8xf32>
  }
  func.func @eval(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<eval_loss>}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.mul %0, %w : tensor<4x8xf32>
    %2 = kiln.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// Tests that below stage 3 nothing changes.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<param>}
// CHECK-NOT: kiln.all_gather
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 2>} {
  func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.reduce_sum %w dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Tests that a cast shared by the forward's and the backward's readers
// (mixed precision's one bf16 copy of a weight) is made again from the
// backward's own gather: nothing of the forward's gather lives on.
// CHECK-LABEL: func.func @step
// CHECK: %[[G1:.*]] = kiln.all_gather %arg0 {{.*}}freed before the backward
// CHECK-NEXT: %[[W1:.*]] = kiln.reshape %[[G1]]
// CHECK-NEXT: %[[C1:.*]] = kiln.convert %[[W1]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: kiln.mul %[[C1]], %arg1
// CHECK: %[[G2:.*]] = kiln.all_gather %arg0 {{.*}}gathered again for the backward
// CHECK-NEXT: %[[W2:.*]] = kiln.reshape %[[G2]]
// CHECK-NEXT: %[[C2:.*]] = kiln.convert %[[W2]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT: kiln.mul %{{.*}}, %[[C2]]
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 3>} {
  func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %x: tensor<4x8xbf16> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xbf16> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %seed = kiln.constant dense<1.0> : tensor<4x8xbf16>
    %c = kiln.convert %w : tensor<4x8xf32> -> tensor<4x8xbf16>
    %0 = kiln.mul %c, %x : tensor<4x8xbf16>
    %1 = kiln.convert %0 : tensor<4x8xbf16> -> tensor<4x8xf32>
    %2 = kiln.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %3 = kiln.mul %seed, %c : tensor<4x8xbf16>
    return %2, %3 : tensor<f32>, tensor<4x8xbf16>
  }
}

// -----

// Tests that two views read together by one backward op are both made
// again after the backward's gather (their clones sit at the same place:
// the gather goes before the first of them in block order).
// CHECK-LABEL: func.func @step
// CHECK: kiln.all_gather %arg0 {{.*}}freed before the backward
// CHECK: %[[G:.*]] = kiln.all_gather %arg0 {{.*}}gathered again for the backward
// CHECK-NEXT: %[[W:.*]] = kiln.reshape %[[G]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[A:.*]] = kiln.reshape %[[W]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[B:.*]] = kiln.reshape %[[W]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: kiln.mul %[[B]], %[[A]]
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 3>} {
  func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %x: tensor<32xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<32xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %seed = kiln.constant dense<1.0> : tensor<32xf32>
    %r1 = kiln.reshape %w : tensor<4x8xf32> -> tensor<32xf32>
    %r2 = kiln.reshape %w : tensor<4x8xf32> -> tensor<32xf32>
    %0 = kiln.mul %r1, %x : tensor<32xf32>
    %1 = kiln.mul %r2, %0 : tensor<32xf32>
    %2 = kiln.reduce_sum %1 dims = [0] : tensor<32xf32> -> tensor<f32>
    %s = kiln.mul %seed, %x : tensor<32xf32>
    %3 = kiln.mul %r1, %r2 : tensor<32xf32>
    %4 = kiln.mul %s, %3 : tensor<32xf32>
    return %2, %4 : tensor<f32>, tensor<32xf32>
  }
}

// -----

// Tests prefetching one block ahead: parameters are grouped by block (the
// name up to its last '.'), and a block's gathers go where the block read
// before it starts, on each side -- Block.1's forward gather before
// Block.0's first reader, Block.0's backward gather before Block.1's first
// backward reader (the backward reads the blocks in reverse).
// CHECK-LABEL: func.func @step
// CHECK: %[[F0:.*]] = kiln.all_gather %arg0 {{.*}}freed before the backward
// CHECK-NEXT: %[[V0:.*]] = kiln.reshape %[[F0]]
// CHECK-NEXT: %[[F1:.*]] = kiln.all_gather %arg1 {{.*}}freed before the backward
// CHECK-NEXT: %[[V1:.*]] = kiln.reshape %[[F1]]
// CHECK-NEXT: %[[A:.*]] = kiln.mul %[[V0]], %arg2
// CHECK-NEXT: %[[B:.*]] = kiln.mul %[[V1]], %[[A]]
// CHECK: %[[G0:.*]] = kiln.all_gather %arg0 {{.*}}gathered again for the backward
// CHECK-NEXT: %[[W0:.*]] = kiln.reshape %[[G0]]
// CHECK-NEXT: %[[G1:.*]] = kiln.all_gather %arg1 {{.*}}gathered again for the backward
// CHECK-NEXT: %[[W1:.*]] = kiln.reshape %[[G1]]
// CHECK-NEXT: kiln.mul %{{.*}}, %[[W1]]
// CHECK-NEXT: kiln.mul %{{.*}}, %[[W0]]
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 3>} {
  func.func @step(%w0: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "Block.0.w"},
                  %w1: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "Block.1.w"},
                  %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "Block.0.w"}) {
    %seed = kiln.constant dense<1.0> : tensor<4x8xf32>
    %0 = kiln.mul %w0, %x : tensor<4x8xf32>
    %1 = kiln.mul %w1, %0 : tensor<4x8xf32>
    %2 = kiln.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %3 = kiln.mul %seed, %w1 : tensor<4x8xf32>
    %4 = kiln.mul %3, %w0 : tensor<4x8xf32>
    return %2, %4 : tensor<f32>, tensor<4x8xf32>
  }
}
