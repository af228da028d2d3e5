//===- ParallelismPasses.td - Passes of the ranks of a mesh -*- tablegen -*-===//
//
// The passes that make one rank's program of a mesh: data parallelism
// (gradient averaging, ZeRO-3's gathers) and sharding (propagation, the
// SPMD partition, sequence parallelism's regathers). Included by
// passes/Passes.td, which declares every pass; the pipeline orders them in
// passes/Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PARALLELISM_PASSES_TD
#define KILN_PARALLELISM_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnDataParallel : Pass<"kiln-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Gradients and the loss averaged over the data axis of the mesh";
  let description = [{
    With `kiln.mesh = {data = N}` (N > 1), every rank runs @step on its own
    share of the global batch; before @update reads them, the gradients and
    the loss become their mean over the N ranks. The pass puts, at the top
    of @update, `kiln.all_reduce mean` buckets over the gradient
    arguments -- last parameter first, the order the backward finishes
    them, at most `bucket-bytes` each (PyTorch DDP's 25 MiB by default) --
    and the loss in the last bucket, and makes every reader use the results.
    Codegen reduces each bucket in place, so the global gradient norm,
    clipping, the non-finite guard and the update all see the whole batch,
    every rank applies the same update, and a grad_accum run communicates
    once per step, not per micro-batch. No mesh, or N = 1: nothing changes.

    Before (after `--kiln-optimizer`):
    ```mlir
    func.func @update(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                      %g: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"},
                      %l: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"}, ...) {
      %sq = kiln.mul %g, %g : tensor<4xf32>
      ...
    ```

    After:
    ```mlir
      %r:2 = kiln.all_reduce mean %g, %l over "data"
          {reason = "data parallel: mean of the gradients and loss over 2 ranks"}
          : tensor<4xf32>, tensor<f32>
      %sq = kiln.mul %r#0, %r#0 : tensor<4xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 << 20",
           "Most gradient bytes in one all-reduce (a bucket)">,
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnPropagateSharding : Pass<"kiln-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Gives every value a sharding, from the model file's annotations";
  let description = [{
    Runs on the forward graph (after attention-match, before @eval and
    autodiff). Seeds from `kiln.sharding` on arguments (`shard [...]` of a
    param or input) and `kiln.sharding_constraint` (shard(x, [...])), then
    moves shardings along each op's sharding rule (ShardingRuleOpInterface),
    forward and backward, until nothing changes; user annotations are never
    overridden. Writes `kiln.sharding` on every split argument and op (one
    list per result). Errors, at the op's line with a note at the
    annotation's: a dimension the axis does not divide (it would have to be
    replicated), a split dimension an op needs whole (a softmax's row), and
    conflicting shardings.

    Before (mesh `{model = 2}`):
    ```mlir
    func.func @step(%x: tensor<8x64xf32>,
                    %w: tensor<64x256xf32> {kiln.sharding = ["", "model"]}, ...) {
      %y = kiln.matmul %x, %w : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %g = kiln.gelu %y : tensor<8x256xf32>
    ```

    After:
    ```mlir
      %y = kiln.matmul %x, %w {kiln.sharding = [["", "model"]]} : ...
      %g = kiln.gelu %y {kiln.sharding = [["", "model"]]} : tensor<8x256xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnPartition : Pass<"kiln-partition", "::mlir::ModuleOp"> {
  let summary = "The SPMD program of one rank: local types and collectives";
  let description = [{
    Runs after --kiln-propagate-sharding, before autodiff. Split values get
    their local types; split parameters become their local block
    (`kiln.shard_axis`, `kiln.shard_dim`, `kiln.whole_shape`); the
    collectives each op's sharding rule requires are inserted with the
    model-file line and the reason: `kiln.all_reduce` after a split sum
    (the row-parallel matmul), `kiln.mesh_vary` on a whole operand of
    per-rank work (its VJP is the backward's all-reduce),
    `kiln.local_shard` / `kiln.all_gather` where an operand must be
    resharded, and `kiln.sharding_constraint` replaced by its reshard. An
    embedding of a row-split table and a cross-entropy over class-split
    logits are rewritten vocabulary-parallel (Megatron's).

    Before (mesh `{model = 2}`):
    ```mlir
    func.func @step(%x: tensor<8x64xf32>,
                    %w1: tensor<64x256xf32> {kiln.role = #kiln.role<param>, kiln.sharding = ["", "model"]},
                    %w2: tensor<256x64xf32> {kiln.role = #kiln.role<param>, kiln.sharding = ["model", ""]}) {
      %h = kiln.matmul %x, %w1 {kiln.sharding = [["", "model"]]} : ... -> tensor<8x256xf32>
      %y = kiln.matmul %h, %w2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
    ```

    After:
    ```mlir
    func.func @step(%x: tensor<8x64xf32>,
                    %w1: tensor<64x128xf32> {..., kiln.shard_axis = "model", kiln.shard_dim = 1 : i64,
                                             kiln.whole_shape = array<i64: 64, 256>}, ...) {
      %xv = kiln.mesh_vary %x over "model" {reason = "..."} : tensor<8x64xf32>
      %h = kiln.matmul %xv, %w1 : tensor<8x64xf32>, tensor<64x128xf32> -> tensor<8x128xf32>
      %p = kiln.matmul %h, %w2 : tensor<8x128xf32>, tensor<128x64xf32> -> tensor<8x64xf32>
      %y = kiln.all_reduce sum %p over "model" {reason = "partial sums of the row-parallel matmul at ..."}
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnRegatherActivations : Pass<"kiln-regather-activations", "::mlir::ModuleOp"> {
  let summary = "Activations all-gathered over a tensor axis are gathered again for the backward";
  let description = [{
    In @step, a `kiln.all_gather` over a tensor axis in the forward (sequence
    parallelism's gathered input of a column-parallel product) and the
    transposes, reshapes and casts after it: each such value the backward
    reads is made again -- the gather cloned from its input, the rank's
    part, just before its first backward reader -- so the whole value does
    not live from the forward to the backward. Runs after `--kiln-remat`.

    Before:
    ```mlir
    %g = kiln.all_gather %h over "model" dim = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
    %y = kiln.matmul %g, %w ...            // forward
    ...
    %dw = kiln.matmul %g, %dy {transpose_lhs = true} ...   // backward
    ```

    After:
    ```mlir
    %g = kiln.all_gather %h over "model" dim = 0 ...
    %y = kiln.matmul %g, %w ...
    ...
    %g2 = kiln.all_gather %h over "model" dim = 0 {reason = "...; gathered again for the backward"} ...
    %dw = kiln.matmul %g2, %dy {transpose_lhs = true} ...
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnGatherParams : Pass<"kiln-gather-params", "::mlir::ModuleOp"> {
  let summary = "ZeRO-3: each rank keeps its slice of a parameter, gathered where used";
  let description = [{
    With `zero = 3` in `kiln.train` (and `kiln.mesh = {data = N}`), every
    parameter whose elements split evenly over the N ranks becomes this
    rank's contiguous slice of the flattened tensor in @step and @eval
    (`kiln.shard_axis`, `kiln.whole_shape`; @update, from
    `--kiln-optimizer`, updates the slice in place). Its readers get it
    whole from a `kiln.all_gather` created just before the first of them:
    one for the forward's readers, another for the backward's (the
    recomputes `--kiln-remat` placed there included), so the whole tensor
    is live only while it is used. Runs after `--kiln-remat`.

    Before:
    ```mlir
    func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"}, ...) {
      %y = kiln.matmul %x, %w ...
    ```

    After (2 ranks):
    ```mlir
    func.func @step(%w: tensor<16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w",
                                        kiln.shard_axis = "data",
                                        kiln.whole_shape = array<i64: 4, 8>}, ...) {
      %g = kiln.all_gather %w over "data" dim = 0 : tensor<16xf32> -> tensor<32xf32>
      %w0 = kiln.reshape %g : tensor<32xf32> -> tensor<4x8xf32>
      %y = kiln.matmul %x, %w0 ...
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // KILN_PARALLELISM_PASSES_TD
