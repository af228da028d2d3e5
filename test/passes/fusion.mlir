// RUN: kiln-opt %s --split-input-file --kiln-fusion | FileCheck %s

// Tests that a producer -> consumer chain of pointwise ops with one element
// count becomes one "pointwise" kiln.fusion that yields only the value read
// outside, and that the kernel carries its members' locations.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = kiln.fusion pointwise (%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[A]], %[[B]]
// CHECK-NEXT: %[[M:.*]] = kiln.mul %[[S]], %[[S]]
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[M]]
// CHECK-NEXT: kiln.yield %[[G]] : tensor<4x8xf32>
// CHECK: return %[[F]]
func.func @step(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = kiln.add %x, %y : tensor<4x8xf32>
  %m = kiln.mul %s, %s : tensor<4x8xf32>
  %g = kiln.gelu %m : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Tests that a producer also read by a later op outside the group (a GEMM)
// becomes an extra output of the fused kernel (it is written once either
// way, and the tanh no longer reads it back).
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion pointwise
// CHECK: %[[S:.*]] = kiln.add
// CHECK: %[[T:.*]] = kiln.tanh %[[S]]
// CHECK: kiln.yield %[[S]], %[[T]]
// CHECK: kiln.matmul %[[F]]#0, %arg2
// CHECK: return %[[F]]#1
func.func @step(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = kiln.add %x, %y : tensor<4x8xf32>
  %t = kiln.tanh %s : tensor<4x8xf32>
  %mm = kiln.matmul %s, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %t, %mm : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a row op absorbs its pointwise prologue (the residual add
// feeding layer_norm): the kernel writes the sum (read later), mean and
// rstd, and a pointwise epilogue on the normalized output, which only the
// epilogue reads: the kernel hands it over in a register and writes no
// buffer for it (RowOpInterface::hasElementEpilogue).
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:4 = kiln.fusion row (%arg0, %arg1, %arg2, %arg3)
// CHECK: %[[S:.*]] = kiln.add
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = kiln.layer_norm %[[S]]
// CHECK: %[[G:.*]] = kiln.gelu %[[Y]]
// CHECK: kiln.yield %[[S]], %[[MEAN]], %[[RSTD]], %[[G]]
// CHECK: kiln.matmul %[[F]]#3
// CHECK: return %[[F]]#0
func.func @step(%x: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>, %w: tensor<8xf32>,
                %b: tensor<8xf32>, %wm: tensor<8x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %s = kiln.add %x, %r : tensor<2x4x8xf32>
  %y, %mean, %rstd = kiln.layer_norm %s, %w, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %g = kiln.gelu %y : tensor<2x4x8xf32>
  %mm = kiln.matmul %g, %wm : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %s, %mm : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Tests that the normalized output is written when something after the
// kernel reads it too (here the return), and that softmax, whose kernels
// store their row before the epilogue reads it, keeps its output as a
// result even when only its epilogue reads it.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:4 = kiln.fusion row (%arg0, %arg1, %arg2)
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = kiln.layer_norm %arg
// CHECK: %[[G:.*]] = kiln.gelu %[[Y]]
// CHECK: kiln.yield %[[Y]], %[[MEAN]], %[[RSTD]], %[[G]]
// CHECK: %[[P:.*]]:2 = kiln.fusion row (%arg3)
// CHECK: %[[SM:.*]] = kiln.softmax %arg
// CHECK: %[[E:.*]] = kiln.exp %[[SM]]
// CHECK: kiln.yield %[[SM]], %[[E]]
// CHECK: return %[[F]]#0, %[[F]]#3, %[[P]]#1
func.func @step(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>,
                %a: tensor<4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>) {
  %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %g = kiln.gelu %y : tensor<2x4x8xf32>
  %p = kiln.softmax %a : tensor<4x8xf32>
  %e = kiln.exp %p : tensor<4x8xf32>
  return %y, %g, %e : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a pointwise op reading the epilogue values of two row groups
// joins the one it legally can: the residual gradient's add of two norm
// backwards' dx cannot join the first kernel (its sum feeds the GEMM, which
// runs before the add), so it becomes the second kernel's epilogue, which
// then writes no dx of its own.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.*]]:2 = kiln.fusion row (%arg0, %arg1, %arg2, %arg3, %arg4)
// CHECK: %[[DA:.*]], %[[WA:.*]] = kiln.rms_norm_grad
// CHECK: %[[SA:.*]] = kiln.add %arg{{.*}}, %[[DA]]
// CHECK: kiln.yield %[[WA]], %[[SA]]
// CHECK: %[[M:.*]] = kiln.matmul %[[A]]#1
// CHECK: %[[B:.*]]:2 = kiln.fusion row (%arg0, %arg1, %arg2, %[[M]], %[[A]]#1)
// CHECK: %[[DB:.*]], %[[WB:.*]] = kiln.rms_norm_grad
// CHECK: %[[SB:.*]] = kiln.add %arg{{.*}}, %[[DB]]
// CHECK: kiln.yield %[[WB]], %[[SB]]
// CHECK: return %[[B]]#1, %[[A]]#0, %[[B]]#0
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %rstd: tensor<4xf32>,
                %dy: tensor<4x8xf32>, %r: tensor<4x8xf32>, %wm: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %da, %dwa = kiln.rms_norm_grad %x, %w, %rstd, %dy
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<8xf32>)
  %sa = kiln.add %r, %da : tensor<4x8xf32>
  %m = kiln.matmul %sa, %wm : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %db, %dwb = kiln.rms_norm_grad %x, %w, %rstd, %m
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<8xf32>)
  %sb = kiln.add %sa, %db : tensor<4x8xf32>
  return %sb, %dwa, %dwb : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests step 1d: the backward's dh * silu(a) recomputes the stored bf16
// silu(a) from a, which the backward reads anyway (silu's own gradient), so
// the forward's kernel writes only its sum, not silu(a).
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = kiln.fusion sum (%arg0, %arg1)
// CHECK: kiln.silu
// CHECK: kiln.yield %{{.*}} : tensor<f32>
// CHECK: kiln.fusion pointwise (%arg0)
// CHECK: kiln.constant dense<1.0
// CHECK: %[[W:.*]] = kiln.convert %arg{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = kiln.silu %[[W]]
// CHECK: %[[V:.*]] = kiln.convert %[[S]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: kiln.convert %[[V]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: kiln.elementwise_grad
func.func @step(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>)
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32>, tensor<4x8xf32>) {
  %wa = kiln.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %s = kiln.silu %wa : tensor<4x8xf32>
  %v = kiln.convert %s : tensor<4x8xf32> -> tensor<4x8xbf16>
  %wv = kiln.convert %v : tensor<4x8xbf16> -> tensor<4x8xf32>
  %wb = kiln.convert %b : tensor<4x8xbf16> -> tensor<4x8xf32>
  %h = kiln.mul %wv, %wb : tensor<4x8xf32>
  %loss = kiln.reduce_sum %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %seed = kiln.constant dense<1.0> : tensor<4x8xf32>
  %db = kiln.mul %seed, %wv : tensor<4x8xf32>
  %dv = kiln.mul %seed, %wb : tensor<4x8xf32>
  %da = kiln.elementwise_grad %wa, %dv {op = "kiln.silu"} : tensor<4x8xf32>
  return %loss, %db, %da : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that step 1d leaves a stored value alone when recomputing it would
// keep its input alive longer: a (a GEMM's output) is read by nothing in
// the backward, so the forward kernel writes silu(a) and the backward
// reads it.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion sum
// CHECK: kiln.silu
// CHECK: kiln.yield %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<f32>
// CHECK: kiln.fusion pointwise (%[[F]]#0)
// CHECK-NOT: kiln.silu
// CHECK: return
func.func @step(%x: tensor<4x8xbf16>, %w: tensor<8x8xbf16>, %b: tensor<4x8xbf16>)
    -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %wa = kiln.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %s = kiln.silu %wa : tensor<4x8xf32>
  %v = kiln.convert %s : tensor<4x8xf32> -> tensor<4x8xbf16>
  %wv = kiln.convert %v : tensor<4x8xbf16> -> tensor<4x8xf32>
  %wb = kiln.convert %b : tensor<4x8xbf16> -> tensor<4x8xf32>
  %h = kiln.mul %wv, %wb : tensor<4x8xf32>
  %loss = kiln.reduce_sum %h dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %seed = kiln.constant dense<1.0> : tensor<4x8xf32>
  %db = kiln.mul %seed, %wv : tensor<4x8xf32>
  return %loss, %db : tensor<f32>, tensor<4x8xf32>
}

// -----

// Tests step 2e: a * b and a - b, a GEMM apart, become one kernel placed at
// the first (a and b read once; the second's output is no more bytes than
// the inputs it was the last to read); a * q, which reads the GEMM's
// result, stays a kernel of its own.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.*]] = kiln.matmul %arg0, %arg1
// CHECK: %[[B:.*]] = kiln.matmul %arg0, %arg2
// CHECK: %[[F:.*]]:2 = kiln.fusion pointwise (%[[A]], %[[B]])
// CHECK: kiln.mul
// CHECK: kiln.sub
// CHECK: %[[Q:.*]] = kiln.matmul %[[F]]#0, %arg1
// CHECK: %[[T:.*]] = kiln.mul %[[A]], %[[Q]]
// CHECK: return %[[Q]], %[[F]]#1, %[[T]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %u: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %b = kiln.matmul %x, %u : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %p = kiln.mul %a, %b : tensor<4x8xf32>
  %q = kiln.matmul %p, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = kiln.sub %a, %b : tensor<4x8xf32>
  %t = kiln.mul %a, %q : tensor<4x8xf32>
  return %q, %r, %t : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a group step 2e has joined tries the groups before it in turn,
// as in remat's SwiGLU backward: the recomputed product a * b (read by the
// weight gradient's GEMM), dp * a and, a GEMM later, dp * b + a become one
// kernel at the product. dp * a alone cannot join the product (dp and a are
// read after it), the two halves together can: they are the last to read
// a and b (their forward reader comes before) and write fewer bytes.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.*]] = kiln.matmul %arg0, %arg1
// CHECK: %[[B:.*]] = kiln.matmul %arg0, %arg2
// CHECK: %[[P:.*]] = kiln.mul %[[A]], %[[B]]
// CHECK: %[[DP:.*]] = kiln.matmul %arg4, %arg3
// CHECK: %[[F:.*]]:3 = kiln.fusion pointwise (%[[A]], %[[B]], %[[DP]])
// CHECK-COUNT-3: kiln.mul
// CHECK: kiln.add
// CHECK: kiln.yield
// CHECK: kiln.matmul %[[F]]#0, %arg4
// CHECK: kiln.matmul %[[F]]#1, %arg2
// CHECK-NOT: kiln.mul
// CHECK: return
func.func @step(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w3: tensor<8x8xf32>,
                %w2: tensor<8x8xf32>, %g: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %b = kiln.matmul %x, %w3 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %p = kiln.mul %a, %b : tensor<4x8xf32>
  %y = kiln.matmul %p, %w2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dp = kiln.matmul %g, %w2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %pr = kiln.mul %a, %b : tensor<4x8xf32>
  %dw2 = kiln.matmul %pr, %g {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %db = kiln.mul %dp, %a : tensor<4x8xf32>
  %dx = kiln.matmul %db, %w3 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %t = kiln.mul %dp, %b : tensor<4x8xf32>
  %da = kiln.add %t, %a : tensor<4x8xf32>
  return %y, %dw2, %dx, %da : tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that step 2e counts a buffer as dying at the joint kernel only when
// every other reader's kernel runs before it: v is read by k1, which sits
// before the first sibling (e = a * a) but is the prologue of a softmax whose
// kernel runs later. So g1 = a - v and g2 = g1 * v, which write two buffers
// and would free only a, stay a kernel of their own after the softmax's.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.*]] = kiln.matmul %arg0, %arg1
// CHECK: %[[V:.*]] = kiln.matmul %arg0, %arg2
// CHECK: %[[E:.*]] = kiln.mul %[[A]], %[[A]]
// CHECK: kiln.fusion row
// CHECK: kiln.softmax
// CHECK: kiln.fusion pointwise (%[[A]], %[[V]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.sub
// CHECK-NEXT: kiln.mul
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %u: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %v = kiln.matmul %x, %u : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k1 = kiln.mul %v, %v : tensor<4x8xf32>
  %e = kiln.mul %a, %a : tensor<4x8xf32>
  %q = kiln.matmul %e, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k2 = kiln.add %k1, %q : tensor<4x8xf32>
  %r = kiln.softmax %k2 : tensor<4x8xf32>
  %g1 = kiln.sub %a, %v : tensor<4x8xf32>
  %g2 = kiln.mul %g1, %v : tensor<4x8xf32>
  return %r, %g1, %g2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that step 2e leaves a sibling alone when a buffer it reads is made
// by a kernel placed after the first sibling's: k1 * k1 and its add with m
// form one kernel at the add, so a + k1 cannot move up to a * a.
// CHECK-LABEL: func.func @step
// CHECK: %[[P:.*]] = kiln.mul %[[A:.*]], %[[A]]
// CHECK: %[[M:.*]] = kiln.matmul %[[P]]
// CHECK: %[[K:.*]]:2 = kiln.fusion pointwise (%arg1, %[[M]])
// CHECK: kiln.add %[[A]], %[[K]]#0
func.func @step(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k1 = kiln.mul %y, %y : tensor<4x8xf32>
  %p = kiln.mul %a, %a : tensor<4x8xf32>
  %m = kiln.matmul %p, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k2 = kiln.add %k1, %m : tensor<4x8xf32>
  %n = kiln.matmul %k2, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = kiln.add %a, %k1 : tensor<4x8xf32>
  return %n, %r, %m : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a sibling moved up by step 2e keeps the splat constant its
// broadcast reads defined before it.
// CHECK-LABEL: func.func @step
// CHECK: %[[C:.*]] = kiln.constant dense<2.0
// CHECK: kiln.fusion pointwise (%{{.*}}, %[[C]])
// CHECK: kiln.mul
// CHECK: kiln.broadcast
// CHECK: kiln.add
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %p = kiln.mul %a, %a : tensor<4x8xf32>
  %q = kiln.matmul %p, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %c = kiln.constant dense<2.0> : tensor<8xf32>
  %cb = kiln.broadcast %c dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %r = kiln.add %a, %cb : tensor<4x8xf32>
  return %q, %r : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that softmax takes a scaled, masked prologue (splat constant,
// causal_mask) and keeps the broadcast of a kernel input inside the loop.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]]:2 = kiln.fusion row (%arg1, %arg0)
// CHECK: kiln.broadcast
// CHECK: kiln.constant
// CHECK: kiln.mul
// CHECK: %[[MASKED:.*]] = kiln.causal_mask
// CHECK: %[[P:.*]] = kiln.softmax %[[MASKED]]
// CHECK: kiln.yield %[[MASKED]], %[[P]]
// CHECK: return %[[F]]#1
func.func @step(%s: tensor<2x4x4xf32>, %bias: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %bb = kiln.broadcast %bias dims = [2] : tensor<4xf32> -> tensor<2x4x4xf32>
  %c = kiln.constant dense<0.5> : tensor<2x4x4xf32>
  %sc = kiln.mul %s, %c : tensor<2x4x4xf32>
  %sb = kiln.add %sc, %bb : tensor<2x4x4xf32>
  %m = kiln.causal_mask %sb fill = 0xFF800000 : tensor<2x4x4xf32>
  %p = kiln.softmax %m : tensor<2x4x4xf32>
  return %p : tensor<2x4x4xf32>
}

// -----

// Tests that all kiln.adam updates of @update become one "optimizer" kernel
// even though the update-norm sums sit between them, and that the sums
// (scalars) form their own pointwise kernel after it.
// CHECK-LABEL: func.func @update
// CHECK: %[[F:.*]]:10 = kiln.fusion optimizer
// CHECK: kiln.adam
// CHECK: kiln.adam
// CHECK: kiln.yield
// CHECK: kiln.fusion pointwise
// CHECK: kiln.add
// CHECK: kiln.sqrt
func.func @update(%p0: tensor<4x8xf32>, %g0: tensor<4x8xf32>, %m0: tensor<4x8xf32>,
                  %v0: tensor<4x8xf32>, %p1: tensor<8xf32>, %g1: tensor<8xf32>,
                  %m1: tensor<8xf32>, %v1: tensor<8xf32>, %lr: tensor<f32>,
                  %t: tensor<f32>, %scale: tensor<f32>)
    -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %am0, %av0, %du0, %pp0 = kiln.adam %p0, %g0, %m0, %v0, %lr, %t, %scale
      {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
       epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<4x8xf32>
  %a1, %am1, %av1, %du1, %pp1 = kiln.adam %p1, %g1, %m1, %v1, %lr, %t, %scale
      {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
       epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
  %su = kiln.add %du0, %du1 : tensor<f32>
  %un = kiln.sqrt %su : tensor<f32>
  return %un, %a0, %am0, %av0, %a1, %am1, %av1
      : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that nothing fuses across a GEMM: the bias add stays out of the
// matmul, and the matmul records why.
// CHECK-LABEL: func.func @step
// CHECK: kiln.matmul
// CHECK-SAME: kiln.not_fused = "into kiln.add at {{.*}}: kiln.matmul is a GEMM call and stays a kernel of its own"
// CHECK-NOT: kiln.fusion
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<4x8xf32>)
    -> tensor<4x8xf32> {
  %mm = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = kiln.add %mm, %b : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Tests that transpose and embedding stay kernels of their own, each with
// a reason.
// CHECK-LABEL: func.func @step
// CHECK: kiln.embedding
// CHECK-SAME: kiln.not_fused = "into kiln.add at {{.*}}: kiln.embedding gathers rows by index and stays a kernel of its own"
// CHECK: kiln.transpose
// CHECK-SAME: kiln.not_fused = "into kiln.add at {{.*}}: kiln.transpose moves elements between dimensions and stays a kernel of its own"
func.func @step(%wte: tensor<16x4xf32>, %tok: tensor<4xi32>, %y: tensor<4x4xf32>)
    -> tensor<4x4xf32> {
  %e = kiln.embedding %wte, %tok : tensor<16x4xf32>, tensor<4xi32> -> tensor<4x4xf32>
  %t = kiln.transpose %y permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = kiln.add %e, %t : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Tests that a value read by an op that runs before the consumer is not
// fused into it (the kernel would feed an op scheduled before itself: a
// cycle), with the reason on the producer.
// CHECK-LABEL: func.func @step
// CHECK: kiln.exp
// CHECK-SAME: kiln.not_fused = "into kiln.add at {{.*}}: kiln.exp at {{.*}} is also read by kiln.matmul at {{.*}}, which runs earlier
// CHECK-NOT: kiln.fusion
func.func @step(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = kiln.exp %x : tensor<4x4xf32>
  %m = kiln.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %r = kiln.add %a, %m : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Tests that a value computed in a kernel is never broadcast by it: the exp
// stays out, the broadcast of its result and the add form the kernel.
// CHECK-LABEL: func.func @step
// CHECK: %[[E:.*]] = kiln.exp
// CHECK-SAME: kiln.not_fused = "into kiln.broadcast at {{.*}}: a kernel never broadcasts a value it computes itself"
// CHECK: kiln.fusion pointwise (%[[E]], %arg1)
// CHECK: kiln.broadcast
// CHECK: kiln.add
func.func @step(%x: tensor<8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = kiln.exp %x : tensor<8xf32>
  %b = kiln.broadcast %e dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %r = kiln.add %b, %y : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Tests that ops over a different element count never share a loop: a
// pointwise op on layer_norm's per-row mean is not its epilogue.
// CHECK-LABEL: func.func @step
// CHECK: kiln.layer_norm
// CHECK-SAME: kiln.not_fused = "into kiln.neg at {{.*}}: element counts differ (8 vs 2), one loop cannot cover both"
// CHECK-NOT: kiln.fusion
func.func @step(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>)
    -> (tensor<2x4xf32>, tensor<2xf32>) {
  %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
      : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  %n = kiln.neg %mean : tensor<2xf32>
  return %y, %n : tensor<2x4xf32>, tensor<2xf32>
}

// -----

// Tests that the bf16 copies of arguments (parameters rounded for GEMMs)
// move to the function's start and share one pointwise kernel per element
// count: the two [8, 16] and [16, 8] weights in one, the [16] bias in
// another, where each was a kernel of its own.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[W:.*]]:2 = kiln.fusion pointwise (%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<16x8xf32>):
// CHECK-NEXT: %[[AB:.*]] = kiln.convert %[[A]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-NEXT: %[[BB:.*]] = kiln.convert %[[B]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-NEXT: kiln.yield %[[AB]], %[[BB]]
// CHECK: %[[C:.*]] = kiln.convert %arg2 : tensor<16xf32> -> tensor<16xbf16>
// CHECK: kiln.matmul %{{.*}}, %[[W]]#0
// CHECK: kiln.matmul %{{.*}}, %[[W]]#1
// CHECK: return {{.*}}%[[C]]
func.func @step(%w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>, %b: tensor<16xf32>,
                %x: tensor<4x8xbf16>)
    -> (tensor<4x8xf32>, tensor<16xbf16>) {
  %w1b = kiln.convert %w1 : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = kiln.matmul %x, %w1b : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %w2b = kiln.convert %w2 : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = kiln.matmul %h, %w2b : tensor<4x16xbf16>, tensor<16x8xbf16> -> tensor<4x8xf32>
  %bb = kiln.convert %b : tensor<16xf32> -> tensor<16xbf16>
  return %y, %bb : tensor<4x8xf32>, tensor<16xbf16>
}

// -----

// Tests that the copies remat recomputes in the backward (kiln.recompute)
// stay there, not moved to the start with the forward's: those in front of
// one reader share a kernel per element count, at the first of them (the
// [8, 16] and [16, 8] weights), and a copy in front of another reader (%w3r)
// gets its own.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: kiln.fusion pointwise (%arg0, %arg1)
// CHECK: kiln.convert %arg2 :
// CHECK-NEXT: kiln.matmul
// CHECK-NEXT: kiln.matmul
// CHECK-NEXT: %[[S:.*]] = kiln.matmul
// CHECK-NEXT: %[[R:.*]]:2 = kiln.fusion pointwise (%arg1, %arg0)
// CHECK: kiln.convert {{.*}} {kiln.recompute}
// CHECK: kiln.convert {{.*}} {kiln.recompute}
// CHECK: kiln.yield
// CHECK-NEXT: }
// CHECK-NEXT: kiln.matmul %[[S]], %[[R]]#0 {transpose_rhs = true}
// CHECK-NEXT: kiln.matmul %{{.*}}, %[[R]]#1 {transpose_rhs = true}
// CHECK-NEXT: %[[W3R:.*]] = kiln.convert %arg2 {kiln.recompute}
// CHECK-NEXT: kiln.matmul %{{.*}}, %[[W3R]] {transpose_rhs = true}
func.func @step(%w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>, %w3: tensor<8x8xf32>,
                %x: tensor<4x8xbf16>)
    -> (tensor<4x8xbf16>) {
  %w1b = kiln.convert %w1 : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = kiln.matmul %x, %w1b : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %w2b = kiln.convert %w2 : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = kiln.matmul %h, %w2b : tensor<4x16xbf16>, tensor<16x8xbf16> -> tensor<4x8xbf16>
  %w3b = kiln.convert %w3 : tensor<8x8xf32> -> tensor<8x8xbf16>
  %z = kiln.matmul %y, %w3b : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %w2r = kiln.convert %w2 {kiln.recompute} : tensor<16x8xf32> -> tensor<16x8xbf16>
  %w1r = kiln.convert %w1 {kiln.recompute} : tensor<8x16xf32> -> tensor<8x16xbf16>
  %dh = kiln.matmul %z, %w2r {transpose_rhs = true} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  %dx = kiln.matmul %dh, %w1r {transpose_rhs = true} : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xbf16>
  %w3r = kiln.convert %w3 {kiln.recompute} : tensor<8x8xf32> -> tensor<8x8xbf16>
  %d3 = kiln.matmul %dx, %w3r {transpose_rhs = true} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  return %d3 : tensor<4x8xbf16>
}

// -----

// Tests that a whole-tensor sum takes in the pointwise ops computing its
// input ("sum"): the global norm's g * g is summed as it is computed and
// yields no tensor, only the total; a value also read outside (the add,
// read by the return) stays an output.
// CHECK-LABEL: func.func @update
// CHECK: %[[F:.*]]:2 = kiln.fusion sum (%arg0, %arg1)
// CHECK-NEXT: ^bb0(%[[G:[^:]*]]: tensor<64x32xf32>, %[[H:[^:]*]]: tensor<64x32xf32>):
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[G]], %[[H]]
// CHECK-NEXT: %[[Q:.*]] = kiln.mul %[[S]], %[[S]]
// CHECK-NEXT: %[[T:.*]] = kiln.reduce_sum %[[Q]] dims = [0, 1]
// CHECK-NEXT: kiln.yield %[[S]], %[[T]] : tensor<64x32xf32>, tensor<f32>
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @update(%g: tensor<64x32xf32>, %h: tensor<64x32xf32>) -> (tensor<f32>, tensor<64x32xf32>) {
  %s = kiln.add %g, %h : tensor<64x32xf32>
  %q = kiln.mul %s, %s : tensor<64x32xf32>
  %t = kiln.reduce_sum %q dims = [0, 1] : tensor<64x32xf32> -> tensor<f32>
  return %t, %s : tensor<f32>, tensor<64x32xf32>
}

// -----

// Tests that nothing joins a "sum" kernel after its total (the sqrt reads
// the total: one element, another loop).
// CHECK-LABEL: func.func @update
// CHECK: %[[F:.*]] = kiln.fusion sum
// CHECK: kiln.sqrt %[[F]]
// CHECK-NOT: kiln.fusion sum
func.func @update(%g: tensor<64x32xf32>) -> tensor<f32> {
  %q = kiln.mul %g, %g : tensor<64x32xf32>
  %t = kiln.reduce_sum %q dims = [0, 1] : tensor<64x32xf32> -> tensor<f32>
  %r = kiln.sqrt %t : tensor<f32>
  return %r : tensor<f32>
}

// -----

// Tests that whole-tensor sums of arguments only (the global norm's squares
// of each gradient) share one multi-tensor "sum" kernel, moved up before
// the first reader of their totals (the adds in between stay after it),
// while the sum of a GEMM's result keeps a kernel of its own.
// CHECK-LABEL: func.func @update
// CHECK: %[[S:.*]]:3 = kiln.fusion sum (%arg0, %arg1, %arg3)
// CHECK: %[[QA:.*]] = kiln.mul %arg4, %arg4
// CHECK-NEXT: %[[SA:.*]] = kiln.reduce_sum %[[QA]]
// CHECK-NEXT: %[[QB:.*]] = kiln.mul %arg5, %arg5
// CHECK-NEXT: %[[SB:.*]] = kiln.reduce_sum %[[QB]]
// CHECK-NEXT: %[[QD:.*]] = kiln.mul %arg6, %arg6
// CHECK-NEXT: %[[SD:.*]] = kiln.reduce_sum %[[QD]]
// CHECK-NEXT: kiln.yield %[[SA]], %[[SB]], %[[SD]]
// CHECK: %[[MM:.*]] = kiln.matmul %arg2, %arg2
// CHECK: %[[SM:.*]] = kiln.fusion sum (%[[MM]])
// CHECK: %[[U:.*]] = kiln.fusion pointwise (%[[S]]#0, %[[S]]#1, %[[S]]#2)
// CHECK: return %[[U]], %[[SM]], %[[S]]#1
func.func @update(%a: tensor<8xf32>, %b: tensor<16xf32>, %c: tensor<4x4xf32>, %d: tensor<4x4xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %qa = kiln.mul %a, %a : tensor<8xf32>
  %sa = kiln.reduce_sum %qa dims = [0] : tensor<8xf32> -> tensor<f32>
  %qb = kiln.mul %b, %b : tensor<16xf32>
  %sb = kiln.reduce_sum %qb dims = [0] : tensor<16xf32> -> tensor<f32>
  %t = kiln.add %sa, %sb : tensor<f32>
  %mm = kiln.matmul %c, %c : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %qm = kiln.mul %mm, %mm : tensor<4x4xf32>
  %sm = kiln.reduce_sum %qm dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %qd = kiln.mul %d, %d : tensor<4x4xf32>
  %sd = kiln.reduce_sum %qd dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %u = kiln.add %t, %sd : tensor<f32>
  return %u, %sm, %sb : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// Tests that the shared "sum" kernel goes where the earliest total was, not
// where the earliest group begins: %b's group starts with its splat
// constant, placed early and cloned per reader (the second reader is the
// mul after both sums), but its total comes after %a's, whose reader (the
// div) sits between the two sums. The kernel placed at %b's total came after
// that div: "operand #0 does not dominate this use" (a random model of
// tools/fuzz/kiln_fuzz.py).
// CHECK-LABEL: func.func @step
// CHECK: %[[S:.*]]:2 = kiln.fusion sum
// CHECK: kiln.fusion pointwise (%[[S]]#0)
// CHECK: return
func.func @step(%a: tensor<8xf32>, %b: tensor<16xf32>) -> (tensor<f32>, tensor<f32>, tensor<16xf32>) {
  %cb = kiln.constant dense<1.000000e+00> : tensor<16xf32>
  %ca = kiln.constant dense<1.000000e+00> : tensor<8xf32>
  %n = kiln.constant dense<4.800000e+01> : tensor<f32>
  %xa = kiln.mul %a, %ca : tensor<8xf32>
  %sa = kiln.reduce_sum %xa dims = [0] : tensor<8xf32> -> tensor<f32>
  %m = kiln.div %sa, %n : tensor<f32>
  %xb = kiln.mul %b, %cb : tensor<16xf32>
  %sb = kiln.reduce_sum %xb dims = [0] : tensor<16xf32> -> tensor<f32>
  %g = kiln.mul %b, %cb : tensor<16xf32>
  return %m, %sb, %g : tensor<f32>, tensor<f32>, tensor<16xf32>
}
