// RUN: kiln-opt %s --split-input-file --kiln-partition | FileCheck %s

// Tests Megatron's MLP as the rules give it: the split parameters become
// their blocks (kiln.shard_axis / shard_dim / whole_shape), the whole input
// of the column-parallel product is marked kiln.mesh_vary over model (its
// VJP is the backward's all-reduce), the split values get their local
// types, and the row-parallel product's partial sums are all-reduced, each
// collective with its line and reason.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W1:[^:]*]]: tensor<64x128xf32> {kiln.name = "w1", kiln.role = #kiln.role<param>, kiln.shard_axis = "model", kiln.shard_dim = 1 : i64
// CHECK-SAME: kiln.whole_shape = array<i64: 64, 256>}
// CHECK-SAME: %[[B1:[^:]*]]: tensor<128xf32> {{[^}]*}}kiln.shard_dim = 0 : i64
// CHECK-SAME: %[[W2:[^:]*]]: tensor<128x64xf32> {{[^}]*}}kiln.shard_dim = 0 : i64
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x64xf32> {kiln.name = "x", kiln.role = #kiln.role<input>}
// CHECK: %[[XV:.*]] = kiln.mesh_vary %[[X]] over "model" {{.*}}reason = "the column-parallel matmul at mlp.kiln:3:7 reads it whole on every rank: its gradient sums the ranks' parts"} : tensor<8x64xf32>
// CHECK: %[[H:.*]] = kiln.matmul %[[XV]], %[[W1]] {{.*}}: tensor<8x64xf32>, tensor<64x128xf32> -> tensor<8x128xf32>
// CHECK: kiln.broadcast %[[B1]] dims = [1] {{.*}}: tensor<128xf32> -> tensor<8x128xf32>
// CHECK: %[[G:.*]] = kiln.gelu %{{.*}} : tensor<8x128xf32>
// CHECK: %[[P:.*]] = kiln.matmul %[[G]], %[[W2]] : tensor<8x128xf32>, tensor<128x64xf32> -> tensor<8x64xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.all_reduce sum %[[P]] over "model" {{.*}}reason = "partial sums of the row-parallel matmul at mlp.kiln:4:7"} : tensor<8x64xf32>
// CHECK-NEXT: kiln.mul %[[Y]], %[[Y]]
// CHECK-NOT: kiln.all_reduce
// CHECK: return
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1", kiln.sharding = ["", "model"]},
                  %arg1: tensor<256xf32> {kiln.role = #kiln.role<param>, kiln.name = "b1", kiln.sharding = ["model"]},
                  %arg2: tensor<256x64xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2", kiln.sharding = ["model", ""]},
                  %arg3: tensor<8x64xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.matmul %arg3, %arg0 {kiln.sharding = [["", "model"]]} : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32> loc("mlp.kiln":3:7)
    %1 = kiln.broadcast %arg1 dims = [1] {kiln.sharding = [["", "model"]]} : tensor<256xf32> -> tensor<8x256xf32>
    %2 = kiln.add %0, %1 {kiln.sharding = [["", "model"]]} : tensor<8x256xf32>
    %3 = kiln.gelu %2 {kiln.sharding = [["", "model"]]} : tensor<8x256xf32>
    %4 = kiln.matmul %3, %arg2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32> loc("mlp.kiln":4:7)
    %5 = kiln.mul %4, %4 : tensor<8x64xf32>
    %6 = kiln.reduce_sum %5 dims = [0, 1] : tensor<8x64xf32> -> tensor<f32>
    return %6 : tensor<f32>
  }
}

// -----

// Tests resharding: an input split by its annotation stays whole in the
// signature (the data loader feeds whole batches) and is cut with
// kiln.local_shard -- along dimension 1 through a transpose, its blocks
// not being contiguous; shard(x, [_, _]) asks for the whole value back: an
// all-gather, the same way round. A split splat constant is rebuilt at its
// local type.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32> {kiln.name = "x", kiln.role = #kiln.role<input>, kiln.sharding = ["", "model"]}
// CHECK: %[[T:.*]] = kiln.transpose %[[X]] permutation = [1, 0] {{.*}}: tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = kiln.local_shard %[[T]] over "model" dim = 0 {{.*}}reason = "the annotation at {{.*}} splits this input"} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[XL:.*]] = kiln.transpose %[[S]] permutation = [1, 0] {{.*}}: tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK: kiln.constant dense<2.000000e+00> : tensor<4x4xf32>
// CHECK: %[[M:.*]] = kiln.mul %[[XL]], %{{.*}} : tensor<4x4xf32>
// CHECK: kiln.transpose %[[M]] permutation = [1, 0] {{.*}}: tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: kiln.all_gather %{{.*}} over "model" dim = 0 {{.*}}reason = "shard(...) at {{.*}} asks for [_, _]"} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: kiln.transpose %{{.*}} permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK-NOT: kiln.sharding_constraint
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x", kiln.sharding = ["", "model"]},
                  %arg1: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %c = kiln.constant dense<2.0> : tensor<4x8xf32> {kiln.sharding = [["", "model"]]}
    %0 = kiln.mul %arg0, %c {kiln.sharding = [["", "model"]]} : tensor<4x8xf32>
    %1 = kiln.sharding_constraint %0 ["", ""] : tensor<4x8xf32>
    %2 = kiln.reduce_sum %1 dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
    %3 = kiln.mul %2, %arg1 : tensor<8xf32>
    %4 = kiln.reduce_sum %3 dims = [0] : tensor<8xf32> -> tensor<f32>
    return %4 : tensor<f32>
  }
}

// -----

// Tests sums and means over a split dimension: rows split over model (by
// the input's annotation), the cross-entropy's mean over each rank's rows
// all-reduced with "mean", a sum over them with "sum"; the integer targets
// cut by local_shard like the float input; the whole weight marked
// mesh_vary (its gradient sums the ranks' rows).
// CHECK-LABEL: func.func @step
// CHECK: %[[W:.*]] = kiln.mesh_vary %arg2 over "model"
// CHECK: %[[T:.*]] = kiln.local_shard %arg1 over "model" dim = 0 {{.*}}: tensor<8xi32> -> tensor<4xi32>
// CHECK: %[[X:.*]] = kiln.local_shard %arg0 over "model" dim = 0 {{.*}}: tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[L:.*]] = kiln.matmul %[[X]], %[[W]] {{.*}}-> tensor<4x16xf32>
// CHECK: %[[CE:.*]] = kiln.cross_entropy %[[L]], %[[T]] : tensor<4x16xf32>, tensor<4xi32>
// CHECK-NEXT: kiln.all_reduce mean %[[CE]] over "model" {{.*}}reason = "the mean over the ranks' blocks of the cross_entropy at m.kiln:4:5"}
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[L]] dims = [0, 1]
// CHECK-NEXT: kiln.all_reduce sum %[[S]] over "model" {{.*}}reason = "partial sums of the reduce_sum at m.kiln:5:5"}
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x", kiln.sharding = ["model", ""]},
                  %arg1: tensor<8xi32> {kiln.role = #kiln.role<input>, kiln.name = "t", kiln.sharding = ["model"]},
                  %arg2: tensor<16x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "s"}) {
    %0 = kiln.matmul %arg0, %arg2 {kiln.sharding = [["model", ""]]} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32> loc("m.kiln":3:5)
    %1 = kiln.cross_entropy %0, %arg1 : tensor<8x16xf32>, tensor<8xi32> loc("m.kiln":4:5)
    %2 = kiln.reduce_sum %0 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32> loc("m.kiln":5:5)
    return %1, %2 : tensor<f32>, tensor<f32>
  }
}

// -----

// Tests the rewrites of a split vocabulary (Megatron's vocabulary
// parallelism): the embedding of a table whose rows are split looks up the
// indices in the rank's block of rows (found from its block of iota), the
// others read 0, and an all-reduce sums the ranks' lookups; the
// cross-entropy over logits split by class takes each rank's logsumexp
// (softmax-weighted, no infinity), all-gathers and combines them, and
// all-reduces the target's logit from the rank holding its class; classes
// past valid_classes stay out.
// CHECK-LABEL: func.func @step
// CHECK: %[[ROWS:.*]] = kiln.local_shard %{{.*}} over "model" dim = 0 {{.*}}reason = "the vocabulary-parallel embedding at v.kiln:5:5: the rank's first row"} : tensor<8xi32> -> tensor<4xi32>
// CHECK: %[[START:.*]] = kiln.slice %[[ROWS]] dim = 0, start = 0 : tensor<4xi32> -> tensor<1xi32>
// CHECK: kiln.sub %arg1, %{{.*}} : tensor<2x3xi32>
// CHECK: %[[LOOKUP:.*]] = kiln.embedding %arg0, %{{.*}} : tensor<4x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
// CHECK: %[[MASKED:.*]] = kiln.select %{{.*}}, %[[LOOKUP]], %{{.*}} : tensor<2x3x4xi1>, tensor<2x3x4xf32>
// CHECK-NEXT: kiln.all_reduce sum %[[MASKED]] over "model" {{.*}}reason = "the vocabulary-parallel embedding at v.kiln:5:5: each rank looks up the rows it holds"}
// CHECK: %[[LOGITS:.*]] = kiln.matmul {{.*}} -> tensor<2x3x4xf32>
// CHECK: %[[CLASSES:.*]] = kiln.local_shard %{{.*}} over "model" dim = 0 {{.*}}reason = "the vocabulary-parallel cross_entropy at v.kiln:7:5: each rank's class indices"} : tensor<8xi32> -> tensor<4xi32>
// CHECK: %[[INDEX:.*]] = kiln.broadcast %[[CLASSES]] dims = [2] : tensor<4xi32> -> tensor<2x3x4xi32>
// CHECK: kiln.cmp "lt", %[[INDEX]], %{{.*}} : tensor<2x3x4xi32> -> tensor<2x3x4xi1>
// CHECK: kiln.softmax
// CHECK: %[[LSE:.*]] = kiln.reduce_sum %{{.*}} dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[ONE:.*]] = kiln.reshape %[[LSE]] : tensor<2x3xf32> -> tensor<1x2x3xf32>
// CHECK-NEXT: kiln.all_gather %[[ONE]] over "model" dim = 0 {{.*}}reason = "the vocabulary-parallel cross_entropy at v.kiln:7:5: every rank's logsumexp of its classes"} : tensor<1x2x3xf32> -> tensor<2x2x3xf32>
// CHECK: kiln.cmp "eq", %[[INDEX]], %{{.*}} : tensor<2x3x4xi32> -> tensor<2x3x4xi1>
// CHECK: kiln.all_reduce sum %{{.*}} over "model" {{.*}}reason = "the vocabulary-parallel cross_entropy at v.kiln:7:5: the target's logit, from the rank holding its class"} : tensor<2x3xf32>
// CHECK-NOT: kiln.cross_entropy
// CHECK: return
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<8x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.sharding = ["model", ""]},
                  %arg1: tensor<2x3xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                  %arg2: tensor<2x3xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %0 = kiln.embedding %arg0, %arg1 : tensor<8x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32> loc("v.kiln":5:5)
    %1 = kiln.transpose %arg0 permutation = [1, 0] {kiln.sharding = [["", "model"]]} : tensor<8x4xf32> -> tensor<4x8xf32>
    %2 = kiln.matmul %0, %1 {kiln.sharding = [["", "", "model"]]} : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
    %3 = kiln.cross_entropy %2, %arg2 {valid_classes = 7 : i64} : tensor<2x3x8xf32>, tensor<2x3xi32> loc("v.kiln":7:5)
    return %3 : tensor<f32>
  }
}

// -----

// Tests sequence parallelism's collectives (the propagation of
// propagate-sharding.mlir's case): the position-split input of the
// column-parallel product all-gathered (along dimension 1, through a
// transpose), the row-parallel product's partial sums reduce-scattered
// into the position-split result.
// CHECK-LABEL: func.func @step
// CHECK: %[[X:.*]] = kiln.local_shard {{.*}} -> tensor<4x2x16xf32>
// CHECK: %[[H:.*]] = kiln.gelu %{{.*}} : tensor<2x4x16xf32>
// CHECK-NEXT: %[[HT:.*]] = kiln.transpose %[[H]] permutation = [1, 0, 2] {{.*}}: tensor<2x4x16xf32> -> tensor<4x2x16xf32>
// CHECK-NEXT: %[[HG:.*]] = kiln.all_gather %[[HT]] over "model" dim = 0 {{.*}}reason = "the column-parallel matmul at {{.*}} reads it whole"} : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// CHECK-NEXT: %[[HW:.*]] = kiln.transpose %[[HG]] permutation = [1, 0, 2] {{.*}}: tensor<8x2x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[HV:.*]] = kiln.mesh_vary %[[HW]] over "model"
// CHECK: %[[A:.*]] = kiln.matmul %[[HV]], %arg1 {{.*}} -> tensor<2x8x16xf32>
// CHECK: %[[P:.*]] = kiln.matmul %[[A]], %arg2 {{.*}}: tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[PT:.*]] = kiln.transpose %[[P]] permutation = [1, 0, 2] {{.*}}: tensor<2x8x16xf32> -> tensor<8x2x16xf32>
// CHECK-NEXT: %[[RS:.*]] = kiln.reduce_scatter sum %[[PT]] over "model" dim = 0 {{.*}}reason = "partial sums of the row-parallel matmul at {{.*}}, each rank keeping its block of the split result"} : tensor<8x2x16xf32> -> tensor<4x2x16xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.transpose %[[RS]] permutation = [1, 0, 2] {{.*}}: tensor<4x2x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[SUM:.*]] = kiln.add %{{.*}}, %[[Y]] {{.*}}: tensor<2x4x16xf32>
// A split value the program returns leaves whole.
// CHECK: kiln.all_gather %{{.*}} over "model" dim = 0 {{.*}}reason = "the program returns it whole"} : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// CHECK: return %{{.*}} : tensor<2x8x16xf32>
module attributes {kiln.mesh = {model = 2 : i64}} {
  func.func @step(%arg0: tensor<2x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %arg1: tensor<16x32xf32> {kiln.role = #kiln.role<param>, kiln.name = "w1", kiln.sharding = ["", "model"]},
                  %arg2: tensor<32x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w2", kiln.sharding = ["model", ""]})
      -> (tensor<2x8x16xf32> {kiln.role = #kiln.role<metric>, kiln.name = "y"}) {
    %x = kiln.sharding_constraint %arg0 ["", "model", ""] : tensor<2x8x16xf32>
    %h = kiln.gelu %x {kiln.sharding = [["", "model", ""]]} : tensor<2x8x16xf32>
    %0 = kiln.matmul %h, %arg1 {kiln.sharding = [["", "", "model"]]} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
    %1 = kiln.matmul %0, %arg2 {kiln.sharding = [["", "model", ""]]} : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    %2 = kiln.add %x, %1 {kiln.sharding = [["", "model", ""]]} : tensor<2x8x16xf32>
    return %2 : tensor<2x8x16xf32>
  }
}
