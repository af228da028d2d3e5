// RUN: kiln-opt %s --split-input-file --kiln-pad-dims | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-pad-dims=multiple=128 | FileCheck %s --check-prefix=M128

// Tests that a tied embedding (vocab 200) is padded to 256: the table's
// rows, the transposed head, the logits, with cross_entropy masking the 56
// padded classes and the true shape kept on the argument. wpe (128 rows,
// aligned) and the input are left alone.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<256x16xf32> {kiln.name = "wte", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 200, 16>}
// CHECK-SAME: %[[WPE:[^:]*]]: tensor<128x16xf32> {kiln.name = "wpe", kiln.role = #kiln.role<param>}
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<2x8xi32>
// CHECK: kiln.embedding %[[WTE]], %[[TOK]] : tensor<256x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
// CHECK: %[[T:.*]] = kiln.transpose %[[WTE]] permutation = [1, 0] : tensor<256x16xf32> -> tensor<16x256xf32>
// CHECK: %[[L:.*]] = kiln.matmul %{{.*}}, %[[T]] : tensor<2x8x16xf32>, tensor<16x256xf32> -> tensor<2x8x256xf32>
// CHECK: kiln.cross_entropy %[[L]], %{{.*}} {valid_classes = 200 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>
// With multiple = 128, 200 pads to 256 as well; the option reaches the pass.
// M128-LABEL: func.func @step
// M128-SAME: tensor<256x16xf32> {kiln.name = "wte", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 200, 16>}
func.func @step(%wte: tensor<200x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                %wpe: tensor<128x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wpe"},
                %tok: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %x = kiln.embedding %wte, %tok : tensor<200x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %t = kiln.transpose %wte permutation = [1, 0] : tensor<200x16xf32> -> tensor<16x200xf32>
  %l = kiln.matmul %x, %t : tensor<2x8x16xf32>, tensor<16x200xf32> -> tensor<2x8x200xf32>
  %loss = kiln.cross_entropy %l, %tgt : tensor<2x8x200xf32>, tensor<2x8xi32>
  return %loss : tensor<f32>
}

// -----

// Tests that an untied head [16, 100] with a bias [100] is padded on the
// class dimension together with the bias (both to 128), through the bias
// broadcast and add, into cross_entropy's valid_classes.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x128xf32> {kiln.name = "head", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 16, 100>}
// CHECK-SAME: %[[B:[^:]*]]: tensor<128xf32> {kiln.name = "head_b", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 100>}
// CHECK: %[[L:.*]] = kiln.matmul %{{.*}}, %[[W]] : tensor<2x8x16xf32>, tensor<16x128xf32> -> tensor<2x8x128xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[B]] dims = [2] : tensor<128xf32> -> tensor<2x8x128xf32>
// CHECK: %[[S:.*]] = kiln.add %[[L]], %[[BB]] : tensor<2x8x128xf32>
// CHECK: kiln.cross_entropy %[[S]], %{{.*}} {valid_classes = 100 : i64} : tensor<2x8x128xf32>, tensor<2x8xi32>
func.func @step(%x: tensor<2x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %w: tensor<16x100xf32> {kiln.role = #kiln.role<param>, kiln.name = "head"},
                %b: tensor<100xf32> {kiln.role = #kiln.role<param>, kiln.name = "head_b"},
                %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %l = kiln.matmul %x, %w : tensor<2x8x16xf32>, tensor<16x100xf32> -> tensor<2x8x100xf32>
  %bb = kiln.broadcast %b dims = [2] : tensor<100xf32> -> tensor<2x8x100xf32>
  %s = kiln.add %l, %bb : tensor<2x8x100xf32>
  %loss = kiln.cross_entropy %s, %tgt : tensor<2x8x100xf32>, tensor<2x8xi32>
  return %loss : tensor<f32>
}

// -----

// Tests that the order of the parameters does not matter: starting from the
// bias (listed first), the add's other operand is traced back through the
// matmul to the head, and both are padded.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<128xf32> {kiln.name = "head_b", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 100>}
// CHECK-SAME: tensor<128x16xf32> {kiln.name = "head", kiln.role = #kiln.role<param>, kiln.true_shape = array<i64: 100, 16>}
// CHECK-NOT: kiln.pad_dims_refused
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<128x16xf32> -> tensor<2x8x128xf32>
// CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} {valid_classes = 100 : i64} : tensor<2x8x128xf32>, tensor<2x8xi32>
func.func @step(%b: tensor<100xf32> {kiln.role = #kiln.role<param>, kiln.name = "head_b"},
                %w: tensor<100x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "head"},
                %x: tensor<2x8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %l = kiln.matmul %x, %w {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<100x16xf32> -> tensor<2x8x100xf32>
  %bb = kiln.broadcast %b dims = [2] : tensor<100xf32> -> tensor<2x8x100xf32>
  %s = kiln.add %bb, %l : tensor<2x8x100xf32>
  %loss = kiln.cross_entropy %s, %tgt : tensor<2x8x100xf32>, tensor<2x8xi32>
  return %loss : tensor<f32>
}

// -----

// Tests the negative case: a metric reduces over the logits// Tests the negative case: a metric reduces over the logits, which would sum
// the padded classes, so wte stays [200, 16] and says why (the reduce_sum
// and its location), and cross_entropy gets no valid_classes.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<200x16xf32> {kiln.name = "wte", kiln.pad_dims_refused = "dim 0 (200 -> 256) not padded: used by an op that cannot ignore padded entries (kiln.reduce_sum at {{.*}}pad-dims.mlir{{.*}}:{{[0-9]+}}:{{[0-9]+}})", kiln.role = #kiln.role<param>}
// CHECK-NOT: kiln.true_shape
// CHECK-NOT: valid_classes
// CHECK: return
func.func @step(%wte: tensor<200x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                %tok: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>},
        tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "logit_sum"}) {
  %x = kiln.embedding %wte, %tok : tensor<200x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %t = kiln.transpose %wte permutation = [1, 0] : tensor<200x16xf32> -> tensor<16x200xf32>
  %l = kiln.matmul %x, %t : tensor<2x8x16xf32>, tensor<16x200xf32> -> tensor<2x8x200xf32>
  %loss = kiln.cross_entropy %l, %tgt : tensor<2x8x200xf32>, tensor<2x8xi32>
  %sum = kiln.reduce_sum %l dims = [0, 1, 2] : tensor<2x8x200xf32> -> tensor<f32>
  return %loss, %sum : tensor<f32>, tensor<f32>
}

// -----

// Tests the negative case of a contracted dimension: w [100, 16] is the
// K side of x @ w, so padding it would need x padded too; it stays as is.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<100x16xf32> {kiln.name = "w", kiln.pad_dims_refused = "dim 0 (100 -> 128) not padded: a matmul contracts or batches over the padded dimension (kiln.matmul at {{.*}})", kiln.role = #kiln.role<param>}
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<2x100xf32>, tensor<100x16xf32> -> tensor<2x16xf32>
func.func @step(%x: tensor<2x100xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %w: tensor<100x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %y = kiln.matmul %x, %w : tensor<2x100xf32>, tensor<100x16xf32> -> tensor<2x16xf32>
  %s = kiln.reduce_sum %y dims = [0, 1] : tensor<2x16xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests the negative case of an elementwise partner that cannot be padded:
// the logits are added to an input of the true size, so the head is left
// alone (padding it would need the input padded).
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<16x100xf32> {kiln.name = "head", kiln.pad_dims_refused = "dim 1 (100 -> 128) not padded: another operand of an elementwise op on the padded path cannot be padded (kiln.add at {{.*}})", kiln.role = #kiln.role<param>}
// CHECK-NOT: valid_classes
func.func @step(%x: tensor<2x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                %bias: tensor<2x100xf32> {kiln.role = #kiln.role<input>, kiln.name = "bias"},
                %w: tensor<16x100xf32> {kiln.role = #kiln.role<param>, kiln.name = "head"},
                %tgt: tensor<2xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %l = kiln.matmul %x, %w : tensor<2x16xf32>, tensor<16x100xf32> -> tensor<2x100xf32>
  %s = kiln.add %l, %bias : tensor<2x100xf32>
  %loss = kiln.cross_entropy %s, %tgt : tensor<2x100xf32>, tensor<2xi32>
  return %loss : tensor<f32>
}

// -----

// Tests that already-aligned dims (256 rows) and dims smaller than the
// multiple (a [10, 16] table) are left alone, with no refusal attribute.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %{{[^:]*}}: tensor<256x16xf32> {kiln.name = "wte", kiln.role = #kiln.role<param>}
// CHECK-SAME: %{{[^:]*}}: tensor<10x16xf32> {kiln.name = "small", kiln.role = #kiln.role<param>}
// CHECK-NOT: kiln.pad_dims_refused
// CHECK-NOT: kiln.true_shape
// CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x256xf32>, tensor<2x8xi32>
func.func @step(%wte: tensor<256x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                %small: tensor<10x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "small"},
                %tok: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
  %x = kiln.embedding %wte, %tok : tensor<256x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %y = kiln.embedding %small, %tok : tensor<10x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %z = kiln.add %x, %y : tensor<2x8x16xf32>
  %t = kiln.transpose %wte permutation = [1, 0] : tensor<256x16xf32> -> tensor<16x256xf32>
  %l = kiln.matmul %z, %t : tensor<2x8x16xf32>, tensor<16x256xf32> -> tensor<2x8x256xf32>
  %loss = kiln.cross_entropy %l, %tgt : tensor<2x8x256xf32>, tensor<2x8xi32>
  return %loss : tensor<f32>
}

// -----

// Tests that Adam with epsilon = 0 refuses padding (a padded entry's update
// would be 0 / 0) and says so on the parameter.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<200x16xf32> {kiln.name = "wte", kiln.pad_dims_refused = "dim 0 (200 -> 256) not padded: Adam with epsilon <= 0 would update padded entries by 0 / 0", kiln.role = #kiln.role<param>}
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adamw, epsilon = 0.0 : f32>} {
  func.func @step(%wte: tensor<200x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                  %tok: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %x = kiln.embedding %wte, %tok : tensor<200x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
    %s = kiln.reduce_sum %x dims = [0, 1, 2] : tensor<2x8x16xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
