// RUN: kiln-opt %s --split-input-file --kiln-data-parallel | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-data-parallel=bucket-bytes=40 | FileCheck %s --check-prefix=SMALL

// Tests that @update's gradients and loss are averaged over the data axis in
// one bucket (last gradient first, the loss last) before anything reads
// them, and that every reader uses the averaged values.
// CHECK-LABEL: func.func @update
// CHECK-NEXT: %[[R:.*]]:3 = kiln.all_reduce "mean" %arg2, %arg1, %arg3 over "data" {reason = "data parallel: mean of the gradients and the loss over 4 ranks"} : tensor<8xf32>, tensor<4xf32>, tensor<f32>
// CHECK-NEXT: kiln.mul %[[R]]#1, %[[R]]#1
// CHECK-NEXT: kiln.mul %[[R]]#0, %[[R]]#0
// CHECK: return %{{.*}}, %{{.*}}, %[[R]]#2

// With 40-byte buckets the 32-byte gradient fills one, and the 16-byte one
// and the loss share the next.
// SMALL-LABEL: func.func @update
// SMALL-NEXT: %[[A:.*]] = kiln.all_reduce "mean" %arg2 over "data"
// SMALL-NEXT: %[[B:.*]]:2 = kiln.all_reduce "mean" %arg1, %arg3 over "data"
module attributes {kiln.mesh = {data = 4 : i64}} {
  func.func @update(%w: tensor<4xf32> {kiln.role = "param", kiln.name = "w"},
                    %gw: tensor<4xf32> {kiln.role = "grad", kiln.name = "w"},
                    %gv: tensor<8xf32> {kiln.role = "grad", kiln.name = "v"},
                    %loss: tensor<f32> {kiln.role = "loss", kiln.name = "loss"})
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
// CHECK: kiln.all_reduce "mean" %{{.*}} over "data" {reason = "data parallel: mean of the gradients over 1 rank"}
// SMALL-LABEL: func.func @update
module attributes {kiln.mesh = {data = 1 : i64}} {
  func.func @update(%g: tensor<4xf32> {kiln.role = "grad", kiln.name = "w"})
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
  func.func @update(%g: tensor<4xf32> {kiln.role = "grad", kiln.name = "w"})
      -> tensor<4xf32> {
    return %g : tensor<4xf32>
  }
}
