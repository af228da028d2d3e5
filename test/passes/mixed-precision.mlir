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
module attributes {kiln.train = {precision = "bf16"}} {
  func.func @step(%w: tensor<8x16xf32> {kiln.role = "param", kiln.name = "w"},
                  %x: tensor<4x8xf32> {kiln.role = "input", kiln.name = "x"})
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
module attributes {kiln.train = {precision = "fp32"}} {
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
module attributes {kiln.train = {precision = "tf32"}} {
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
module attributes {kiln.train = {precision = "bf16"}} {
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
module attributes {kiln.train = {precision = "bf16"}} {
  func.func @users(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>)
      -> (tensor<4x8xf32>, tensor<4x16xf32>) {
    %e = kiln.exp %x : tensor<4x8xf32>
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %e, %y : tensor<4x8xf32>, tensor<4x16xf32>
  }
}
