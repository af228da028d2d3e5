// RUN: kiln-opt %s --split-input-file --kiln-propagate-sharding | FileCheck %s

// Tests a column-parallel then row-parallel MLP (Megatron's split): w1's
// columns over model reach the product, the broadcast bias, gelu and the
// second product's contracting dimension; that product's result is a sum of
// partial products and stays whole, as does everything after it.
// CHECK-LABEL: func.func @step
// CHECK: kiln.matmul {{.*}} {kiln.sharding = {{\[\[}}"", "model"]]}
// CHECK-NEXT: kiln.broadcast {{.*}} {kiln.sharding = {{\[\[}}"", "model"]]}
// CHECK-NEXT: kiln.add {{.*}} {kiln.sharding = {{\[\[}}"", "model"]]}
// CHECK-NEXT: kiln.gelu {{.*}} {kiln.sharding = {{\[\[}}"", "model"]]}
// CHECK-NEXT: kiln.matmul %{{[0-9]+}}, %arg2 : tensor<8x256xf32>
// CHECK-NOT: kiln.sharding
// CHECK: return
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1", kiln.sharding = ["", "model"]},
                  %arg1: tensor<256xf32> {kiln.role = #kiln.role<param>, kiln.name = "b1", kiln.sharding = ["model"]},
                  %arg2: tensor<256x64xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2", kiln.sharding = ["model", ""]},
                  %arg3: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.matmul %arg3, %arg0 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %1 = kiln.broadcast %arg1 dims = [1] : tensor<256xf32> -> tensor<8x256xf32>
    %2 = kiln.add %0, %1 : tensor<8x256xf32>
    %3 = kiln.gelu %2 : tensor<8x256xf32>
    %4 = kiln.matmul %3, %arg2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
    %5 = kiln.mul %4, %4 : tensor<8x64xf32>
    %6 = kiln.reduce_sum %5 dims = [0, 1] : tensor<8x64xf32> -> tensor<f32>
    return %6 : tensor<f32>
  }
}

// -----

// Tests backward propagation and the reshape rule: only the output
// projection is annotated (its rows split), so the attention output that
// feeds it is split too -- back through the reshape [B, T, C] <- [B, T, H, D]
// to the heads (the major dim of the split C), through the transpose, to
// the input [B, H, T, D].
// CHECK-LABEL: func.func @step
// CHECK-SAME: kiln.name = "y", kiln.role = #kiln.role<input>, kiln.sharding = ["", "model", "", ""]
// CHECK: kiln.transpose {{.*}} {kiln.sharding = {{\[\[}}"", "", "model", ""]]} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
// CHECK-NEXT: kiln.reshape {{.*}} {kiln.sharding = {{\[\[}}"", "", "model"]]} : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: kiln.matmul
// CHECK-NOT: kiln.sharding
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<2x4x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "y"},
                  %arg1: tensor<64x64xf32> {kiln.role = #kiln.role<param>, kiln.name = "wo", kiln.sharding = ["model", ""]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.transpose %arg0 permutation = [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
    %1 = kiln.reshape %0 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
    %2 = kiln.matmul %1, %arg1 : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
    %3 = kiln.reduce_sum %2 dims = [0, 1, 2] : tensor<2x8x64xf32> -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// -----

// Tests that a splat constant takes the split of the value it is combined
// with (each rank makes its block).
// CHECK-LABEL: func.func @step
// CHECK: kiln.constant {{.*}} {kiln.sharding = {{\[\[}}"", "model", "", ""]]}
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<2x4x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "y"},
                  %arg1: tensor<64x64xf32> {kiln.role = #kiln.role<param>, kiln.name = "wo", kiln.sharding = ["model", ""]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %c = kiln.constant dense<2.0> : tensor<2x4x8x16xf32>
    %y = kiln.mul %arg0, %c : tensor<2x4x8x16xf32>
    %0 = kiln.transpose %y permutation = [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
    %1 = kiln.reshape %0 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
    %2 = kiln.matmul %1, %arg1 : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
    %3 = kiln.reduce_sum %2 dims = [0, 1, 2] : tensor<2x8x64xf32> -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// -----

// Tests sequence parallelism's resolution: the stream x is split by
// position (shard(x, [_, model, _])), the weight w1 by column, both over
// model. At the column-parallel product the weight's annotation decides
// (the position split of its input yields: its result is split by column
// only, the input will be gathered); at the row-parallel product the sum
// over w2's split rows and the position split the add gives its result
// share the axis (its partial sums will be reduce-scattered); the stream
// stays split by position.
// CHECK-LABEL: func.func @step
// CHECK: kiln.sharding_constraint
// CHECK-NEXT: kiln.gelu {{.*}} {kiln.sharding = {{\[\[}}"", "model", ""]]}
// CHECK-NEXT: kiln.matmul {{.*}} {kiln.sharding = {{\[\[}}"", "", "model"]]} : {{.*}} -> tensor<2x8x32xf32>
// CHECK-NEXT: kiln.matmul {{.*}} {kiln.sharding = {{\[\[}}"", "model", ""]]} : {{.*}} -> tensor<2x8x16xf32>
// CHECK-NEXT: kiln.add {{.*}} {kiln.sharding = {{\[\[}}"", "model", ""]]}
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<2x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %arg1: tensor<16x32xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1", kiln.sharding = ["", "model"]},
                  %arg2: tensor<32x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2", kiln.sharding = ["model", ""]})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %x = kiln.sharding_constraint %arg0 ["", "model", ""] : tensor<2x8x16xf32>
    %h = kiln.gelu %x : tensor<2x8x16xf32>
    %0 = kiln.matmul %h, %arg1 : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
    %1 = kiln.matmul %0, %arg2 : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    %2 = kiln.add %x, %1 : tensor<2x8x16xf32>
    %3 = kiln.reduce_sum %2 dims = [0, 1, 2] : tensor<2x8x16xf32> -> tensor<f32>
    return %3 : tensor<f32>
  }
}
