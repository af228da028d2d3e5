// RUN: kiln-opt %s --split-input-file --kiln-remat="mode=none memory-budget=0" | FileCheck %s --check-prefix=NONE
// RUN: kiln-opt %s --split-input-file --kiln-remat="mode=selective memory-budget=0" | FileCheck %s --check-prefix=SELECTIVE
// RUN: kiln-opt %s --split-input-file --kiln-remat="mode=pointwise memory-budget=0" | FileCheck %s --check-prefix=POINTWISE
// RUN: kiln-opt %s --split-input-file --kiln-remat="mode=full memory-budget=0" | FileCheck %s --check-prefix=FULL
// RUN: kiln-opt %s --split-input-file --kiln-remat --verify-diagnostics | FileCheck %s --check-prefix=AUTO

// Tests the tiers on one block: none keeps what the backward (the ops that
// depend on the cotangent seed, a constant) reads;
// selective recomputes the gelu (pointwise) from the kept GEMM output; full
// recomputes the GEMM too, from the block's input. Clones sit just before the
// first backward reader, each made once; the block's output %o (read by the
// unblocked loss) is kept by every tier, and the forward ops keep their
// forward uses.
#in_block_a = loc(callsite("m.kiln":3:7 at "Block.0"("m.kiln":9:5)))
#in_block_b = loc(callsite("m.kiln":4:7 at "Block.0"("m.kiln":9:5)))
#in_block_c = loc(callsite("m.kiln":5:7 at "Block.0"("m.kiln":9:5)))
module {
  func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<8x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %h = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc(#in_block_a)
    %g = kiln.gelu %h : tensor<4x8xf32> loc(#in_block_b)
    %o = kiln.add %g, %x : tensor<4x8xf32> loc(#in_block_c)
    %l = kiln.reduce_sum %o dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %d1 = kiln.matmul %g, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %d2 = kiln.matmul %h, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %d3 = kiln.matmul %g, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %s = kiln.add %d1, %d2 : tensor<8x8xf32>
    %dw = kiln.add %s, %d3 : tensor<8x8xf32>
    return %l, %dw : tensor<f32>, tensor<8x8xf32>
  }
}

// NONE: module attributes {kiln.remat = {budget = 0 : i64, extra_flops = 0.000000e+00 : f64, mode = "none", plan = "Block.0 none", step_flops = {{.*}}}}
// NONE-NOT: kiln.recompute

// SELECTIVE: kiln.remat = {{{.*}}mode = "selective", plan = "Block.0 selective"
// SELECTIVE: %[[H:.*]] = kiln.matmul %arg0, %arg1 :
// SELECTIVE-NEXT: %[[G:.*]] = kiln.gelu %[[H]] :
// SELECTIVE-NEXT: %[[O:.*]] = kiln.add %[[G]], %arg0 :
// SELECTIVE-NEXT: kiln.reduce_sum %[[O]]
// SELECTIVE-NEXT: %[[SEED:.*]] = kiln.constant
// SELECTIVE-NEXT: %[[G2:.*]] = kiln.gelu %[[H]] {kiln.recompute} :
// SELECTIVE-NEXT: kiln.matmul %[[G2]], %[[SEED]] {transpose_lhs = true}
// SELECTIVE-NEXT: kiln.matmul %[[H]], %[[SEED]] {transpose_lhs = true}
// SELECTIVE-NEXT: kiln.matmul %[[G2]], %[[SEED]] {transpose_lhs = true}

// Pointwise keeps the GEMM output and recomputes the gelu (as selective:
// the block has no attention).
// POINTWISE: kiln.remat = {{{.*}}mode = "pointwise", plan = "Block.0 pointwise"
// POINTWISE: %[[SEED:.*]] = kiln.constant
// POINTWISE-NEXT: %[[G2:.*]] = kiln.gelu %[[H:.*]] {kiln.recompute} :
// POINTWISE-NEXT: kiln.matmul %[[G2]], %[[SEED]] {transpose_lhs = true}

// FULL: kiln.remat = {{{.*}}mode = "full", plan = "Block.0 full"
// FULL: %[[H:.*]] = kiln.matmul %arg0, %arg1 :
// FULL-NEXT: %[[G:.*]] = kiln.gelu %[[H]] :
// FULL-NEXT: %[[O:.*]] = kiln.add %[[G]], %arg0 :
// FULL-NEXT: kiln.reduce_sum %[[O]]
// FULL-NEXT: %[[SEED:.*]] = kiln.constant
// FULL-NEXT: %[[H2:.*]] = kiln.matmul %arg0, %arg1 {kiln.recompute} :
// FULL-NEXT: %[[G2:.*]] = kiln.gelu %[[H2]] {kiln.recompute} :
// FULL-NEXT: kiln.matmul %[[G2]], %[[SEED]] {transpose_lhs = true}
// FULL-NEXT: kiln.matmul %[[H2]], %[[SEED]] {transpose_lhs = true}
// FULL-NEXT: kiln.matmul %[[G2]], %[[SEED]] {transpose_lhs = true}

// AUTO: kiln.remat = {{{.*}}mode = "auto", plan = "Block.0 none"
// AUTO-NOT: kiln.recompute

// -----

// Tests that plans go block by block in program order: with two instances of
// a block, selective is the same tier for both, and a value the next block
// reads (the residual %o0) stays although its block is recomputed; a value
// outside blocks that an op outside blocks reads too (%e) is never
// recomputed.
#b0_a = loc(callsite("m.kiln":3:7 at "Block.0"("m.kiln":9:5)))
#b0_b = loc(callsite("m.kiln":4:7 at "Block.0"("m.kiln":9:5)))
#b1_a = loc(callsite("m.kiln":3:7 at "Block.1"("m.kiln":9:5)))
#b1_b = loc(callsite("m.kiln":4:7 at "Block.1"("m.kiln":9:5)))
module {
  func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
    %e = kiln.exp %x : tensor<4x8xf32>
    %a0 = kiln.gelu %e : tensor<4x8xf32> loc(#b0_a)
    %o0 = kiln.add %a0, %e : tensor<4x8xf32> loc(#b0_b)
    %a1 = kiln.gelu %o0 : tensor<4x8xf32> loc(#b1_a)
    %o1 = kiln.add %a1, %o0 : tensor<4x8xf32> loc(#b1_b)
    %s = kiln.add %o1, %e : tensor<4x8xf32>
    %l = kiln.reduce_sum %s dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %d1 = kiln.mul %a1, %seed : tensor<4x8xf32>
    %d0 = kiln.mul %a0, %d1 : tensor<4x8xf32>
    %d = kiln.mul %d0, %e : tensor<4x8xf32>
    return %l, %d : tensor<f32>, tensor<4x8xf32>
  }
}

// NONE-LABEL: plan = "Block.0-1 none"
// SELECTIVE-LABEL: plan = "Block.0-1 selective"
// SELECTIVE: %[[E:.*]] = kiln.exp %arg0
// SELECTIVE-NEXT: %[[A0:.*]] = kiln.gelu %[[E]] :
// SELECTIVE-NEXT: %[[O0:.*]] = kiln.add %[[A0]], %[[E]] :
// SELECTIVE-NEXT: %[[A1:.*]] = kiln.gelu %[[O0]] :
// SELECTIVE-NEXT: %[[O1:.*]] = kiln.add %[[A1]], %[[O0]] :
// SELECTIVE-NEXT: %[[S:.*]] = kiln.add %[[O1]], %[[E]] :
// SELECTIVE-NEXT: kiln.reduce_sum %[[S]]
// SELECTIVE-NEXT: %[[SEED:.*]] = kiln.constant
// SELECTIVE-NEXT: %[[A1R:.*]] = kiln.gelu %[[O0]] {kiln.recompute}
// SELECTIVE-NEXT: %[[D1:.*]] = kiln.mul %[[A1R]], %[[SEED]]
// SELECTIVE-NEXT: %[[A0R:.*]] = kiln.gelu %[[E]] {kiln.recompute}
// SELECTIVE-NEXT: %[[D0:.*]] = kiln.mul %[[A0R]], %[[D1]]
// SELECTIVE-NEXT: kiln.mul %[[D0]], %[[E]]
// FULL-LABEL: plan = "Block.0-1 full"
// AUTO-LABEL: plan = "Block.0-1 none"

// -----

// Tests that the first block's input, made outside blocks from arguments
// alone (the token and position embeddings' sum), belongs to the block that
// alone reads it: pointwise and full recompute it from the table and the
// token ids in front of the block's backward, instead of keeping it from
// the step's start to its end; none keeps it.
#e_tok = loc("m.kiln":20:5)
#e_sum = loc("m.kiln":20:9)
#blk_a = loc(callsite("m.kiln":3:7 at "Layer.0"("m.kiln":21:5)))
#blk_b = loc(callsite("m.kiln":4:7 at "Layer.0"("m.kiln":21:5)))
module {
  func.func @step(%wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                  %wpe: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wpe"},
                  %tok: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "wpe"}) {
    %t = kiln.embedding %wte, %tok : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32> loc(#e_tok)
    %x = kiln.add %t, %wpe : tensor<4x8xf32> loc(#e_sum)
    %a = kiln.gelu %x : tensor<4x8xf32> loc(#blk_a)
    %o = kiln.add %a, %x : tensor<4x8xf32> loc(#blk_b)
    %l = kiln.reduce_sum %o dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %g = kiln.gelu_grad %x, %seed : tensor<4x8xf32>
    return %l, %g : tensor<f32>, tensor<4x8xf32>
  }
}

// NONE-LABEL: plan = "Layer.0 none"
// NONE-NOT: kiln.recompute
// NONE: return
// POINTWISE-LABEL: plan = "Layer.0 pointwise"
// POINTWISE: kiln.constant
// POINTWISE-NEXT: %[[T:.*]] = kiln.embedding %arg0, %arg2 {kiln.recompute}
// POINTWISE-NEXT: %[[X:.*]] = kiln.add %[[T]], %arg1 {kiln.recompute}
// POINTWISE-NEXT: kiln.gelu_grad %[[X]],
// FULL-LABEL: plan = "Layer.0 full"
// FULL: kiln.embedding %arg0, %arg2 {kiln.recompute}

// -----

// Tests that under ZeRO-3 the gather from a parameter stays in the forward:
// recomputed, it would need the table gathered whole again in the backward
// (--kiln-gather-params runs after remat), for a 256 MiB input of Llama-3's
// first block against a 1 GiB table.
#z_tok = loc("m.kiln":30:5)
#z_a = loc(callsite("m.kiln":3:7 at "Sharded.0"("m.kiln":31:5)))
#z_b = loc(callsite("m.kiln":4:7 at "Sharded.0"("m.kiln":31:5)))
module attributes {kiln.mesh = {data = 2 : i64}, kiln.train = #kiln.train<
    batch = 1, seq = 1, zero = 3>} {
  func.func @step(%wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                  %tok: tensor<4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
    %x = kiln.embedding %wte, %tok : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32> loc(#z_tok)
    %a = kiln.gelu %x : tensor<4x8xf32> loc(#z_a)
    %o = kiln.add %a, %x : tensor<4x8xf32> loc(#z_b)
    %l = kiln.reduce_sum %o dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %g = kiln.gelu_grad %x, %seed : tensor<4x8xf32>
    return %l, %g : tensor<f32>, tensor<4x8xf32>
  }
}

// FULL-LABEL: plan = "Sharded.0 full"
// FULL-NOT: kiln.embedding {{.*}}kiln.recompute
// FULL: kiln.gelu_grad %0,

// -----

// Tests that planning to kiln.train's budget needs the artifact's planner,
// which only kilnc hands the pass (the modes above read kiln.train when not
// given; without it, auto and no budget).
// expected-error@+1 {{--kiln-remat: a memory budget needs the planned peak; compile with kilnc (--memory-budget)}}
module attributes {kiln.model = "budget-needs-kilnc", kiln.train = #kiln.train<
    batch = 1, seq = 1, memory_budget = 1000, remat = auto>} {
  func.func @step(%x: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
    %l = kiln.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a bf16 copy of an argument (mixed precision rounds each
// parameter once, at the top of @step) belongs to the block instance whose
// forward alone reads it: every tier but none recomputes it in front of its
// backward reader, so the forward's copy dies in the forward (its bytes are
// not live through the step). A copy two instances read (%vb) stays.
#c0 = loc(callsite("m.kiln":3:7 at "Block.0"("m.kiln":9:5)))
#c1 = loc(callsite("m.kiln":3:7 at "Block.1"("m.kiln":9:5)))
module {
  func.func @step(%x: tensor<4x8xbf16> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %v: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "v"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xbf16> {kiln.role = #kiln.role<grad>, kiln.name = "x"}) {
    %wb = kiln.convert %w : tensor<8x8xf32> -> tensor<8x8xbf16> loc("m.kiln":1:1)
    %vb = kiln.convert %v : tensor<8x8xf32> -> tensor<8x8xbf16> loc("m.kiln":2:1)
    %a = kiln.matmul %x, %wb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16> loc(#c0)
    %h0 = kiln.matmul %a, %vb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16> loc(#c0)
    %h1 = kiln.matmul %h0, %vb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16> loc(#c1)
    %f = kiln.convert %h1 : tensor<4x8xbf16> -> tensor<4x8xf32>
    %l = kiln.reduce_sum %f dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xbf16>
    %d1 = kiln.matmul %seed, %vb {transpose_rhs = true} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
    %dx = kiln.matmul %d1, %wb {transpose_rhs = true} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
    return %l, %dx : tensor<f32>, tensor<4x8xbf16>
  }
}

// NONE-LABEL: plan = "Block.0-1 none"
// NONE-NOT: kiln.recompute
// SELECTIVE-LABEL: plan = "Block.0-1 selective"
// SELECTIVE: %[[WB:.*]] = kiln.convert %arg1 :
// SELECTIVE-NEXT: %[[VB:.*]] = kiln.convert %arg2 :
// SELECTIVE: %[[SEED:.*]] = kiln.constant
// SELECTIVE-NEXT: %[[D1:.*]] = kiln.matmul %[[SEED]], %[[VB]] {transpose_rhs = true}
// SELECTIVE-NEXT: %[[WB2:.*]] = kiln.convert %arg1 {kiln.recompute} :
// SELECTIVE-NEXT: kiln.matmul %[[D1]], %[[WB2]] {transpose_rhs = true}
// FULL-LABEL: plan = "Block.0-1 full"
// FULL: %[[D1:.*]] = kiln.matmul %{{.*}}, %[[VB:.*]] {transpose_rhs = true}
// FULL-NEXT: %[[WB2:.*]] = kiln.convert %arg1 {kiln.recompute} :
// FULL-NEXT: kiln.matmul %[[D1]], %[[WB2]] {transpose_rhs = true}
// AUTO-LABEL: plan = "Block.0-1 none"

// -----

// Tests that pointwise and selective keep a value whose recompute would read
// kept values nothing else reads, when those hold at least its bytes: %q's
// GEMM output %p (a projection before its bias add or RoPE) dies in the
// forward once %q is kept, so recomputing %q would save no byte and cost a
// pass over both. %wide, the f32 copy of a bf16 GEMM output, is recomputed:
// the bf16 product kept for it is half its bytes. Full recomputes both from
// the block's inputs.
#e0 = loc(callsite("m.kiln":3:7 at "Proj.0"("m.kiln":9:5)))
module {
  func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %xb: tensor<4x8xbf16> {kiln.role = #kiln.role<input>, kiln.name = "xb"},
                  %w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                  %v: tensor<8x8xbf16> {kiln.role = #kiln.role<param>, kiln.name = "v"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<8x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %p = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc(#e0)
    %q = kiln.exp %p : tensor<4x8xf32> loc(#e0)
    %r = kiln.matmul %xb, %v : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16> loc(#e0)
    %wide = kiln.convert %r : tensor<4x8xbf16> -> tensor<4x8xf32> loc(#e0)
    %o = kiln.add %q, %wide : tensor<4x8xf32> loc(#e0)
    %l = kiln.reduce_sum %o dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %d1 = kiln.mul %wide, %seed : tensor<4x8xf32>
    %d2 = kiln.matmul %q, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %d3 = kiln.matmul %d1, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %dw = kiln.add %d2, %d3 : tensor<8x8xf32>
    return %l, %dw : tensor<f32>, tensor<8x8xf32>
  }
}

// POINTWISE-LABEL: plan = "Proj.0 pointwise"
// POINTWISE: %[[P:.*]] = kiln.matmul %arg0, %arg2 :
// POINTWISE-NEXT: %[[Q:.*]] = kiln.exp %[[P]] :
// POINTWISE-NEXT: %[[R:.*]] = kiln.matmul %arg1, %arg3 :
// POINTWISE: %[[SEED:.*]] = kiln.constant
// POINTWISE-NEXT: %[[WIDE:.*]] = kiln.convert %[[R]] {kiln.recompute} :
// POINTWISE-NEXT: %[[D1:.*]] = kiln.mul %[[WIDE]], %[[SEED]]
// POINTWISE-NEXT: kiln.matmul %[[Q]], %[[SEED]] {transpose_lhs = true}
// POINTWISE-NOT: kiln.exp {{.*}}kiln.recompute
// SELECTIVE-LABEL: plan = "Proj.0 selective"
// SELECTIVE: %[[SEED:.*]] = kiln.constant
// SELECTIVE-NEXT: kiln.convert %{{.*}} {kiln.recompute} :
// SELECTIVE-NOT: kiln.exp {{.*}}kiln.recompute
// FULL-LABEL: plan = "Proj.0 full"
// FULL: %[[SEED:.*]] = kiln.constant
// FULL-NEXT: %[[R2:.*]] = kiln.matmul %arg1, %arg3 {kiln.recompute} :
// FULL-NEXT: kiln.convert %[[R2]] {kiln.recompute} :
// FULL: %[[P2:.*]] = kiln.matmul %arg0, %arg2 {kiln.recompute} :
// FULL-NEXT: kiln.exp %[[P2]] {kiln.recompute} :
// AUTO-LABEL: plan = "Proj.0 none"

// -----

// Tests that a constant is not a kept value recomputing would keep alive:
// %v = exp(%h) * 2 reads the constant and %h, which the backward reads
// itself, so keeping %v frees nothing and pointwise recomputes it (a splat
// is a literal in its kernel; other constants are stored once).
#f0 = loc(callsite("m.kiln":3:7 at "Scale.0"("m.kiln":9:5)))
module {
  func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                  %w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<8x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %h = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc(#f0)
    %e = kiln.exp %h : tensor<4x8xf32> loc(#f0)
    %c = kiln.constant dense<2.000000e+00> : tensor<4x8xf32> loc(#f0)
    %v = kiln.mul %e, %c : tensor<4x8xf32> loc(#f0)
    %o = kiln.add %v, %x : tensor<4x8xf32> loc(#f0)
    %l = kiln.reduce_sum %o dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %seed = kiln.constant dense<1.000000e+00> : tensor<4x8xf32>
    %d1 = kiln.matmul %v, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %d2 = kiln.matmul %h, %seed {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %dw = kiln.add %d1, %d2 : tensor<8x8xf32>
    return %l, %dw : tensor<f32>, tensor<8x8xf32>
  }
}

// POINTWISE-LABEL: plan = "Scale.0 pointwise"
// POINTWISE: %[[H:.*]] = kiln.matmul %arg0, %arg1 :
// POINTWISE: %[[SEED:.*]] = kiln.constant dense<1.000000e+00>
// POINTWISE-NEXT: %[[E2:.*]] = kiln.exp %[[H]] {kiln.recompute}
// POINTWISE-NEXT: %[[V2:.*]] = kiln.mul %[[E2]], %{{.*}} {kiln.recompute}
// POINTWISE-NEXT: kiln.matmul %[[V2]], %[[SEED]] {transpose_lhs = true}
// SELECTIVE-LABEL: plan = "Scale.0 selective"
