// RUN: kiln-opt %s --split-input-file --kiln-data-parallel | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=bucket-bytes=40 | FileCheck %s --check-prefix=SMALL

// Tests that @update's gradients and loss are averaged over the data axis in
// one bucket (last gradient first, the loss last) before anything reads
// them, and that every reader uses the averaged values.
// CHECK-LABEL: func.func @update
// CHECK-NEXT: %[[R:.*]]:3 = kiln.all_reduce mean %arg2, %arg1, %arg3 over "data" {reason = "data parallel: mean of the gradients and the loss over 4 ranks"} : tensor<8xf32>, tensor<4xf32>, tensor<f32>
// CHECK-NEXT: kiln.mul %[[R]]#1, %[[R]]#1
// CHECK-NEXT: kiln.mul %[[R]]#0, %[[R]]#0
// CHECK: return %{{.*}}, %{{.*}}, %[[R]]#2

// With 40-byte buckets the 32-byte gradient fills one, and the 16-byte one
// and the loss share the next.
// SMALL-LABEL: func.func @update
// SMALL-NEXT: %[[A:.*]] = kiln.all_reduce mean %arg2 over "data"
// SMALL-NEXT: %[[B:.*]]:2 = kiln.all_reduce mean %arg1, %arg3 over "data"
module attributes {kiln.mesh = {data = 4 : i64}} {
  func.func @update(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %gw: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"},
                    %gv: tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "v"},
                    %loss: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"})
      -> (tensor<4xf32>, tensor<8xf32>, tensor<f32>) {
    %a = kiln.mul %gw, %gw : tensor<4xf32>
    %b = kiln.mul %gv, %gv : tensor<8xf32>
    return %a, %b, %loss : tensor<4xf32>, tensor<8xf32>, tensor<f32>
  }
}

// -----

// Tests that a mesh of one rank is data parallelism over one rank: the
// all-reduce is there (it degenerates at run time, through the same path).
// CHECK-LABEL: func.func @update
// CHECK: kiln.all_reduce mean %{{.*}} over "data" {reason = "data parallel: mean of the gradients over 1 rank"}
// SMALL-LABEL: func.func @update
module attributes {kiln.mesh = {data = 1 : i64}} {
  func.func @update(%g: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
      -> tensor<4xf32> {
    return %g : tensor<4xf32>
  }
}

// -----

// Tests that no mesh changes nothing.
// CHECK-LABEL: func.func @update
// CHECK-NOT: kiln.all_reduce
// SMALL-LABEL: func.func @update
module {
  func.func @update(%g: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
      -> tensor<4xf32> {
    return %g : tensor<4xf32>
  }
}

// -----

// Tests ZeRO-2: a gradient @update takes as this rank's slice (kiln.shard_axis)
// joins no all-reduce; @step reduce-scatters the flattened micro-batch
// gradient before adding it to its accumulator, which becomes a slice too;
// the loss alone is all-reduced.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK-SAME: -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>})
// CHECK: %[[F:.*]] = kiln.reshape %{{.*}} : tensor<4x8xf32> -> tensor<32xf32>
// CHECK: %[[S:.*]] = kiln.reduce_scatter mean %[[F]] over "data" dim = 0 {reason = "ZeRO-2: mean of the gradient over 2 ranks, this rank keeping its shard"} : tensor<32xf32> -> tensor<16xf32>
// CHECK: %[[A:.*]] = kiln.accumulate %[[ACC]], %[[S]] {scale = 5.000000e-01 : f32} : tensor<16xf32>
// CHECK: return %{{.*}}, %[[A]]
// CHECK-LABEL: func.func @update
// CHECK-NEXT: kiln.all_reduce mean %{{[^,]*}} over "data" {reason = "data parallel: mean of the loss over 2 ranks"} : tensor<f32>
// CHECK-NOT: kiln.all_reduce mean
// SMALL-LABEL: func.func @step
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 2>} {
  func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %acc: tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.mul %w, %w : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %2 = kiln.accumulate %acc, %0 {scale = 0.5 : f32} : tensor<4x8xf32>
    return %1, %2 : tensor<f32>, tensor<4x8xf32>
  }
  func.func @update(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %g: tensor<16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w", kiln.shard_axis = "data"},
                    %loss: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"})
      -> (tensor<16xf32>, tensor<f32>) {
    return %g, %loss : tensor<16xf32>, tensor<f32>
  }
}

// -----

// Tests that the step's buckets average each gradient value once: a and b
// have one gradient value (b's is a's), u and v CSE's zero constant, which is
// the same on every rank and is not reduced at all. The value listed twice
// was one buffer twice in an in-place all-reduce, which kiln-run refused
// ("CollectiveCall lists buffer 3 twice"; tools/fuzz/kiln_fuzz.py --mesh
// data=2).
// CHECK-LABEL: func.func @step
// CHECK: %[[Z:.*]] = kiln.constant
// CHECK: %[[G:.*]] = kiln.mul
// CHECK-NEXT: %[[R:.*]] = kiln.all_reduce mean %[[G]] over "data" {reason = "data parallel: mean of the gradients over 2 ranks, as soon as the backward finishes them"} : tensor<4xf32>
// CHECK-NEXT: return %{{.*}}, %[[R]], %[[R]], %[[Z]], %[[Z]]
// SMALL-LABEL: func.func @step
module attributes {kiln.mesh = {data = 2 : i64}} {
  func.func @step(%a: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "a"},
                  %b: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "a"},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "b"},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "u"},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "v"}) {
    %z = kiln.constant dense<0.0> : tensor<4xf32>
    %s = kiln.add %a, %b : tensor<4xf32>
    %l = kiln.reduce_sum %s dims = [0] : tensor<4xf32> -> tensor<f32>
    %g = kiln.mul %s, %s : tensor<4xf32>
    return %l, %g, %g, %z, %z : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  func.func @update(%ga: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "a"},
                    %gb: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "b"},
                    %gu: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "u"},
                    %gv: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "v"},
                    %loss: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"})
      -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
    %x = kiln.add %ga, %gb : tensor<4xf32>
    %y = kiln.add %gu, %gv : tensor<4xf32>
    return %x, %y, %loss : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}
