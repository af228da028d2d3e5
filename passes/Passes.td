//===- Passes.td - Kiln compiler passes ----------------------*- tablegen -*-===//
//
// Every pass of the Kiln compiler, one file each in passes/ (the mesh's
// passes declared in ParallelismPasses.td, included here). The pipeline that
// orders them is written down once, in passes/Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"
// Data parallelism and sharding: one file of their own.
include "ParallelismPasses.td"

def KilnAttentionMatch : Pass<"kiln-attention-match", "::mlir::ModuleOp"> {
  let summary = "Rewrites softmax(q @ kᵀ * scale + bias) @ v into kiln.attention";
  let description = [{
    Runs on the forward graph (after pad-dims, before @eval and autodiff, so
    both the eval program and the backward use the flash kernels). A
    `kiln.softmax` over rank-4 f32 scores `[B, H, T, S]` whose only use is
    `p @ v`, and whose input is `q @ kᵀ` followed by a chain of
    single-use `kiln.mul`/`kiln.div` by splat constants (the first, right
    after the matmul, becomes `scale`), `kiln.add`/`kiln.sub` of a bias and `kiln.causal_mask` (fill
    -inf; an added constant that is 0 on and below the diagonal and -inf
    above is recognised as the same mask), becomes one `kiln.attention`.
    The chain is replayed on the scalar score `s` in the score region: a
    bias built from broadcasts, transposes, splat constants and elementwise
    ops is rebuilt from scalars at `(b, h, i, j)`, so the `[T, S]` bias is
    never materialized; inputs, parameters, non-splat constants and other
    computed tensors become captures read with `tensor.extract` at their own
    (broadcast-stripped) indices. A causal mask becomes the mask region
    `j <= i + (S - T)`; `kiln.select(keep, scores, -inf)` and an added
    select between 0 and -inf become the mask region of their condition
    (iota -> the index, cmp -> arith.cmpi/cmpf). k and v repeated from KVH
    heads (reshape of a broadcast to [B, KVH, G, S, D]) are replaced by the
    KVH-head tensors. A softmax that does not match keeps its graph and
    gets `kiln.not_attention = "<reason>"`; kilnc --dump-phases-to lists them
    in attention.txt.

    Before:
    ```mlir
    %kt = kiln.transpose %k permutation = [0, 1, 3, 2]
        : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
    %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>
        -> tensor<2x4x8x8xf32>
    %c = kiln.constant dense<4.0> : tensor<2x4x8x8xf32>
    %d = kiln.div %s, %c : tensor<2x4x8x8xf32>
    %sb = kiln.broadcast %slope dims = [1] : tensor<4xf32> -> tensor<2x4x8x8xf32>
    %a = kiln.add %d, %sb : tensor<2x4x8x8xf32>
    %m = kiln.causal_mask %a fill = 0xFF800000 : tensor<2x4x8x8xf32>
    %p = kiln.softmax %m : tensor<2x4x8x8xf32>
    %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>
        -> tensor<2x4x8x16xf32>
    ```

    After:
    ```mlir
    %out, %lse = kiln.attention %q, %k, %v captures(%slope) {scale = 0.25 : f32}
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>,
           tensor<4xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
      score(%s: f32, %b: index, %h: index, %i: index, %j: index,
            %c0: tensor<4xf32>) {
        %x = tensor.extract %c0[%h] : tensor<4xf32>
        %r = arith.addf %s, %x : f32
        kiln.yield %r : f32
      }
      mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>) {
        %c0_i = arith.constant 0 : index
        %lim = arith.addi %i, %c0_i : index
        %keep = arith.cmpi sle, %j, %lim : index
        kiln.yield %keep : i1
      }
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Also emit each near miss as a remark on the softmax (its "
           "model-file line), besides the kiln.not_attention attribute">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnAutodiff : Pass<"kiln-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff of the loss function (appends gradients)";
  let description = [{
    Differentiates the function whose single result has `kiln.role = #kiln.role<loss>`
    with respect to its `kiln.role = #kiln.role<param>` arguments. The body is walked
    backwards from the return; each op that carries a cotangent builds its
    vector-Jacobian product through `DifferentiableOpInterface`. Fan-out is
    accumulated with `kiln.add`. For every parameter, in argument order, a
    result `kiln.role = #kiln.role<grad>` named after the parameter is appended;
    parameters with no path to the loss get a zero constant. Integer values
    (token ids, targets) are never differentiated.

    Before:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %x: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
      %0 = kiln.mul %w, %x : tensor<4xf32>
      %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```

    After:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %x: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>},
            tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>}) {
      %0 = kiln.mul %w, %x : tensor<4xf32>
      %1 = kiln.reduce_sum %0 dims = [0] : tensor<4xf32> -> tensor<f32>
      %one = kiln.constant dense<1.0> : tensor<f32>             // d loss / d loss
      %2 = kiln.broadcast %one dims = [] : tensor<f32> -> tensor<4xf32>
      %3 = kiln.mul %2, %x : tensor<4xf32>                       // d loss / d w
      return %1, %3 : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnFuseLinearCrossEntropy
    : Pass<"kiln-fuse-linear-cross-entropy", "::mlir::ModuleOp"> {
  let summary = "cross_entropy(x @ w^T) as kiln.linear_cross_entropy";
  let description = [{
    On the forward graph (@step, before @eval and autodiff): a
    `kiln.cross_entropy` whose logits are read by it alone and are the
    product `x @ transpose(w)` of activations x `[..., D]` and a 2-D weight
    w `[V, D]` (a tied embedding, or any output layer stored `[V, D]`), or
    `x @ head` with an untied head `[D, V]` (given a `kiln.transpose` to
    `[V, D]` in front of the fused op), becomes `kiln.linear_cross_entropy`
    of x and targets flattened to
    `[N, D]` and `[N]`, keeping `valid_classes`. The logits then exist one
    chunk of `chunk_rows` rows at a time (see
    --kiln-expand-linear-cross-entropy). `rows` = 0 fuses when the logits
    would take more than 64 MiB in fp32, with Liger-Kernel's chunk size
    ceil(N / ceil(V / D)) rows (a logits chunk the size of x), at least 4096
    (the dw GEMM's K: fewer rows and its fp32 sum's traffic rivals its math); `rows` > 0 fuses always, with that many rows per
    chunk (at most N).
    A cross_entropy that does not match gets `kiln.not_fused_linear` with
    the reason when it reads a GEMM product.
  }];
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Rows per chunk (0: Liger's rule, and only for logits over 64 MiB)">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnExpandLinearCrossEntropy
    : Pass<"kiln-expand-linear-cross-entropy", "::mlir::ModuleOp"> {
  let summary = "Lowers kiln.linear_cross_entropy(_grad) to chunks";
  let description = [{
    After autodiff (and grad-accum), before mixed precision: each
    kiln.linear_cross_entropy and its kiln.linear_cross_entropy_grad become,
    for each block of `chunk_rows` rows of x and targets, the slices of that
    block, its logits `x_c @ w^T` (one GEMM), `cross_entropy_grad` with the
    upstream gradient weighted by rows / N and `with loss`: the block's
    loss from the same kernel (one read of the logits for both; a loop
    without the gradient uses `cross_entropy`), weighted alike,
    `dx_c = d_c @ w` and `d_c^T @ x_c` summed into the
    weight gradient by the GEMM itself (kiln.matmul_accumulate); dx is the
    concat of the dx_c. When the grad op's upstream gradient is known where
    the forward op is (the loss's seed constant), both are computed by one
    pass over the chunks at the forward op, as Liger-Kernel does, so no
    logits are computed twice; otherwise each op is expanded where it is.
    Every logits chunk dies within its block, so the memory plan holds one
    `[chunk_rows, V]` block instead of `[N, V]` logits and their gradient.
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnEvalFunction : Pass<"kiln-eval-function", "::mlir::ModuleOp"> {
  let summary = "Clones the forward loss function into @eval";
  let description = [{
    Before autodiff, clones the function with a `kiln.role = #kiln.role<loss>` result
    (@step) into `@eval`, the artifact's forward-only "eval" program: same
    parameter and input arguments, a single result `kiln.role = #kiln.role<eval_loss>`;
    metric results and the ops that only fed them are dropped. `@eval` is
    never differentiated (autodiff only looks at functions with a "loss"
    result).

    Before:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>},
            tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "w_rms"}) {
      %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
      %1 = ... // rms of %w
      return %0, %1 : tensor<f32>, tensor<f32>
    }
    ```

    After (@step unchanged):
    ```mlir
    func.func @eval(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
        -> (tensor<f32> {kiln.name = "eval_loss", kiln.role = #kiln.role<eval_loss>}) {
      %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnGradAccum : Pass<"kiln-grad-accum", "::mlir::ModuleOp"> {
  let summary = "Turns the loss and gradients into micro-batch accumulators";
  let description = [{
    With `grad_accum = K > 1` in `kiln.train`, appends to the function with a
    "loss" result one argument per loss/grad result (same `kiln.role` and
    `kiln.name`; the loss is named "loss") and returns `acc + value / K`
    through `kiln.accumulate`, which codegen performs in place on the
    argument's buffer. The runtime zeroes the accumulators before the first
    of the K micro-steps. With K = 1 (or no `grad_accum`) nothing changes.

    Before (K = 4, after `--kiln-autodiff`):
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>},
            tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
      ...
      return %loss, %dw : tensor<f32>, tensor<4xf32>
    }
    ```

    After:
    ```mlir
    func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
                    %l: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
                    %g: tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
            tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
      ...
      %0 = kiln.accumulate %l, %loss {scale = 2.500000e-01 : f32} : tensor<f32>
      %1 = kiln.accumulate %g, %dw {scale = 2.500000e-01 : f32} : tensor<4xf32>
      return %0, %1 : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnMixedPrecision : Pass<"kiln-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "bf16 GEMMs and bf16 activations, fp32 accumulation (precision = bf16)";
  let description = [{
    With `precision = "bf16"` in the module attribute `kiln.train`, on the
    joint forward + backward graph (runs after autodiff):

    - every f32 `kiln.matmul` reads bf16 copies of its operands
      (`kiln.convert`, one per value, shared by every GEMM that reads it, also
      through reshapes) with fp32 accumulation;
    - forward GEMMs (those the loss and metrics depend on) write bf16, the
      logits included (as torch.autocast's head GEMM), and so does a backward
      GEMM that makes logits again; cross_entropy and its gradient read bf16
      logits as they are (their kernels widen each element), every other
      reader reads a widening convert;
    - bias adds of forward GEMMs and softmax outputs are stored in bf16 and
      read (forward and backward) through a widening convert;
    - `kiln.attention` reads bf16 q, k, v (the GEMM operands' shared
      converts) and writes a bf16 out (lse stays f32); `kiln.attention_grad`
      reads them and a bf16 copy of dout and writes bf16 dq, dk, dv (f32
      readers read a widening convert; capture gradients stay f32);
    - the residual stream (layer_norm inputs), layer_norm mean/rstd, the
      loss, metrics, gradients, master weights and optimizer state stay f32.

    `precision = "fp32"`, `"tf32"` (a GEMM setting codegen reads) or no
    setting: nothing changes.

    Before:
    ```mlir
    %h = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
        -> tensor<4x16xf32>
    %y = kiln.tanh %h : tensor<4x16xf32>   // the loss depends on %y
    ```

    After:
    ```mlir
    %wb = kiln.convert %w : tensor<8x16xf32> -> tensor<8x16xbf16>
    %xb = kiln.convert %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    %h = kiln.matmul %xb, %wb : tensor<4x8xbf16>, tensor<8x16xbf16>
        -> tensor<4x16xbf16>
    %hf = kiln.convert %h : tensor<4x16xbf16> -> tensor<4x16xf32>
    %y = kiln.tanh %hf : tensor<4x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnReassociateBias : Pass<"kiln-reassociate-bias", "::mlir::ModuleOp"> {
  let summary = "Moves the bias of a residual projection onto its GEMM";
  let description = [{
    `x + y @ w + b` parses as `(x + y @ w) + b`; this rewrites it as
    `x + (y @ w + b)` when the GEMM product is read only by the residual
    add, so that --kiln-fuse-gemm-epilogue gives the GEMM a Bias epilogue.
    Under precision = bf16 (a bf16 GEMM result read through its widening)
    the moved bias sum is stored in bf16, rounded once after the bias as
    torch.autocast stores a bf16 linear. Runs after --kiln-mixed-precision
    and outside the fusion phase, so fused and unfused builds agree.

    Before:
    ```mlir
    %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %r = kiln.add %x, %p : tensor<4x16xf32>
    %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
    %o = kiln.add %r, %bb : tensor<4x16xf32>
    ```

    After:
    ```mlir
    %p = kiln.matmul %y, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %bb = kiln.broadcast %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
    %s = kiln.add %p, %bb : tensor<4x16xf32>
    %o = kiln.add %x, %s : tensor<4x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnOptimizer : Pass<"kiln-optimizer", "::mlir::ModuleOp"> {
  let summary = "Builds @update: gradient norm, clipping, the optimizer step";
  let description = [{
    Reads the module attribute `kiln.train` (`optimizer` = "adamw", "adam" or
    "sgd" with its hyperparameters, `clip`, `decay_norms`, `decay_biases`,
    `decay_embeddings`) and builds `@update`, the artifact's "update"
    program, from the gradients of the loss function:

    - every parameter is classified by its uses in @step ("embedding",
      "norm", "bias" for other rank <= 1 params, "weight"); norms, biases and
      embeddings get no weight decay unless `decay_<kind>s = true`. Both
      decisions are written on the param arguments as `kiln.param_kind` and
      `kiln.weight_decay`;
    - arguments: params, grads, loss, optimizer state (adam_m..., adam_v...
      for adam/adamw; momentum... for sgd with momentum > 0), lr, step;
    - `grad_norm = sqrt(sum_g reduce_sum(g * g))`, then
      `kiln.grad_scale(grad_norm, loss) {max_norm = clip}` (NaN for a
      non-finite loss or norm: every update op then skips the step);
    - one `kiln.adam` / `kiln.sgd` / `kiln.sgd_momentum` per parameter,
      whose `update_sq` / `param_sq` results sum to `update_norm` and
      `param_norm`;
    - results: grad_norm, update_norm, param_norm, params..., state...

    Before (after `--kiln-autodiff`):
    ```mlir
    module attributes {kiln.train = {optimizer = "adamw", beta1 = 0.9 : f32,
        beta2 = 0.95 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.1 : f32,
        clip = 1.0 : f32}} {
      func.func @step(%w: tensor<4x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>},
              tensor<4x4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) { ... }
    }
    ```

    After (@step's param also gets kiln.param_kind and kiln.weight_decay):
    ```mlir
    func.func @update(
        %w: tensor<4x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w",
                             kiln.param_kind = "weight",
                             kiln.weight_decay = 0.1 : f32},
        %g: tensor<4x4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"},
        %loss: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
        %m: tensor<4x4xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "w"},
        %v: tensor<4x4xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "w"},
        %lr: tensor<f32> {kiln.role = #kiln.role<lr>, kiln.name = "lr"},
        %t: tensor<f32> {kiln.role = #kiln.role<step>, kiln.name = "step"})
        -> (grad_norm, update_norm, param_norm, param "w", adam_m "w",
            adam_v "w") {
      %sq = kiln.mul %g, %g : tensor<4x4xf32>
      %ss = kiln.reduce_sum %sq dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
      %norm = kiln.sqrt %ss : tensor<f32>
      %s = kiln.grad_scale %norm, %loss {max_norm = 1.0 : f32}
      %p, %m1, %v1, %du, %pp = kiln.adam %w, %g, %m, %v, %lr, %t, %s
          {decoupled_weight_decay = true, weight_decay = 0.1 : f32, ...}
      %un = kiln.sqrt %du : tensor<f32>
      %pn = kiln.sqrt %pp : tensor<f32>
      return %norm, %un, %pn, %p, %m1, %v1 : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnRemat : Pass<"kiln-remat", "::mlir::ModuleOp"> {
  let summary = "Recomputes forward values in the backward instead of keeping them";
  let description = [{
    Decides, for every forward value of `@step` that the backward reads,
    whether it stays live from the forward to the backward (kept) or is
    recomputed just before its first backward use (a clone of its producer,
    marked `kiln.recompute`, from kept values), so that the planned peak
    meets `kiln.train`'s `memory_budget` at the least recompute.

    Decisions are per block instance (the `Block.<i>` NameLoc of the ops'
    call site), in tiers of growing recompute:
    - `none`: every value the backward reads is kept;
    - `pointwise`: elementwise ops, converts, norms, RoPE and layout ops are
      recomputed; GEMM and attention outputs are kept;
    - `selective` (Megatron's): attention is recomputed too (from q, k, v);
      only GEMM outputs are kept;
    - `full` (torch's "checkpoint every layer"): the block is recomputed from
      its input; GEMMs too.
    A block's outputs (values later blocks read) are always kept, so a
    recompute never reaches past its block; values outside blocks are kept.
    Recomputed ops are pure and read the same operands (dropout included:
    its Philox state is an operand), so they are bit-identical to the
    values they replace.

    `mode` (default: kiln.train's `remat`): `none`, `selective`, `full`, or
    `auto`: with a budget, the least recompute whose planned peak is at most
    the budget (the peak the artifact will have: kilnc hands the pass the
    planner, which runs fusion and codegen's memory plan on a copy), blocks
    moving one tier at a time in program order; without a budget, nothing.
    An unreachable budget is an error naming the least achievable peak.
    The choice is recorded in the module attribute `kiln.remat`.

    Before (`mode = full`, Block.0's `%h` read by the backward):
    ```mlir
    %h = kiln.gelu %x : tensor<4x8xf32>          // loc("Block.0"(...))
    %o = kiln.mul %h, %h : tensor<4x8xf32>
    ...
    %dx = kiln.elementwise_grad "gelu" %x, %dh : tensor<4x8xf32>
    %dw = kiln.matmul %h, %dy {transpose_lhs = true} : ...
    ```

    After:
    ```mlir
    %h = kiln.gelu %x : tensor<4x8xf32>
    %o = kiln.mul %h, %h : tensor<4x8xf32>
    ...
    %dx = kiln.elementwise_grad "gelu" %x, %dh : tensor<4x8xf32>
    %h2 = kiln.gelu %x {kiln.recompute} : tensor<4x8xf32>
    %dw = kiln.matmul %h2, %dy {transpose_lhs = true} : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"\"",
           "none, pointwise, selective, full or auto (default: kiln.train's remat)">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"-1",
           "Peak bytes the step may use (default: kiln.train's "
           "memory_budget; 0: none)">,
    Option<"sweep", "sweep", "bool", /*default=*/"false",
           "Also plan every tier of every block and record the peaks "
           "(kiln.remat_sweep), for kilnc --memory-budget-sweep">,
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnFusion : Pass<"kiln-fusion", "::mlir::ModuleOp"> {
  let summary = "Groups ops of @step, @update and @eval into kiln.fusion kernels";
  let description = [{
    Chooses which ops codegen emits as one kernel and wraps each group in a
    `kiln.fusion` (see the op's description for the kinds). Pointwise chains
    of the same element count become one loop; a row op (layer_norm,
    layer_norm_grad, softmax, softmax_grad, cross_entropy(_grad), reduce_sum
    over trailing dims) absorbs its pointwise prologue and epilogue; the
    optimizer updates of @update become multi-tensor kernels, and so do the
    whole-tensor sums of arguments only (the global norm's squares of each
    gradient). A norm's normalized row (or dx) that only its epilogue reads
    is no result of its kernel. GEMMs, embeddings and transposes stay
    kernels of their own. A candidate that is refused gets a
    `kiln.not_fused` attribute saying why.

    Before:
    ```mlir
    %s = kiln.add %x, %y : tensor<4x8xf32>
    %n:3 = kiln.layer_norm %s, %w, %b {epsilon = 1.0e-05 : f32}
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
        -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
    %g = kiln.gelu %n#0 : tensor<4x8xf32>
    ```

    After:
    ```mlir
    %f:4 = kiln.fusion row (%x, %y, %w, %b) : (...) -> (...) {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<4x8xf32>, %w0: tensor<8xf32>,
         %b0: tensor<8xf32>):
      %s = kiln.add %a, %c : tensor<4x8xf32>
      %n:3 = kiln.layer_norm %s, %w0, %b0 {epsilon = 1.0e-05 : f32} : ...
      %g = kiln.gelu %n#0 : tensor<4x8xf32>
      kiln.yield %s, %n#1, %n#2, %g : ...
    }
    ```
  }];
  let options = [
    Option<"maxOptimizerTensors", "max-optimizer-tensors", "unsigned",
           /*default=*/"64",
           "Most parameters one multi-tensor kernel covers (optimizer "
           "updates; the global norm's sums of squares)">,
    Option<"maxKernelInputs", "max-kernel-inputs", "unsigned",
           /*default=*/"32",
           "Most buffers one pointwise or row kernel reads">,
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnAttentionLayout : Pass<"kiln-attention-layout", "::mlir::ModuleOp"> {
  let summary = "Attention reads and writes [B, T, H, D]: no head transposes";
  let description = [{
    A kiln.attention (and its kiln.attention_grad) of @step and @eval whose
    per-head operands are each a transpose [0, 2, 1, 3] of a [B, T, H, D]
    tensor, or a rope's result (through a convert or not), takes the layout
    bthd: it reads the transposes' inputs (a rope is given a transpose that
    --kiln-fuse-rope, which runs next, folds into it) and its per-head
    results come out [B, T, H, D]; the readers that transposed them back
    read them directly. Eight kernels per layer of a GPT-style model that
    only moved bytes are gone; every value is the same bits. Runs first in
    the fusion phase.

    Before:
    ```mlir
    %q = kiln.transpose %qp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
    %k = kiln.transpose %kp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
    %v = kiln.transpose %vp permutation = [0, 2, 1, 3] : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
    %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32}
        : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
    %y = kiln.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
    ```

    After:
    ```mlir
    %y, %lse = kiln.attention %qp, %kp, %vp {layout = #kiln<attention_layout bthd>, scale = 0.35 : f32}
        : (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>)
        -> (tensor<2x16x4x8xbf16>, tensor<2x4x16xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnFuseRope : Pass<"kiln-fuse-rope", "::mlir::ModuleOp"> {
  let summary = "Folds the transposes and casts around kiln.rope into it";
  let description = [{
    A kiln.rope of @step, @update and @eval takes over, until nothing
    changes: a widening (bf16 -> f32) convert of its input; a transpose of
    its input that keeps the last dim (input_permutation), when the rope is
    its only reader; a narrowing (f32 -> bf16) convert that is its only
    reader; a transpose that is its only reader and keeps the last dim
    (result_permutation). Each fold gives the same bits. So q and k are
    rotated in one pass from the GEMM's output to attention's bf16 input,
    and their gradients in one pass back. Runs first in the fusion phase.

    Before:
    ```mlir
    %t = kiln.transpose %p permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
    %r = kiln.rope %t {inv_freq = array<f32: 1.0, 0.1, 0.01, 0.001>} : tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
    %q = kiln.convert %r : tensor<2x4x16x8xf32> -> tensor<2x4x16x8xbf16>
    ```

    After:
    ```mlir
    %q = kiln.rope %p {input_permutation = array<i64: 0, 2, 1, 3>, inv_freq = array<f32: 1.0, 0.1, 0.01, 0.001>}
        : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnAccumulateGemms : Pass<"kiln-accumulate-gemms", "::mlir::ModuleOp"> {
  let summary = "Sums of GEMM products added by the GEMMs into one buffer";
  let description = [{
    In @step, add(A, B) where B is an f32 matmul product read only by the
    add (2-D rhs, rows from the lhs's leading dims) and A is another such
    product (or the previous link of a chain) becomes
    kiln.matmul_accumulate: B's GEMM adds into A's buffer (beta = 1). The
    backward's input-gradient sums (q, k, v projections; SwiGLU's w1 and
    w3) then write one fp32 buffer instead of one per GEMM, and the row
    kernel that reads the sum reads it once instead of every product. An
    add of a kiln.embedding_grad and another f32 value, each read only by
    the add (a tied embedding's two weight gradients), becomes the
    embedding_grad adding its rows into that value (`plus`, in its buffer).
    Runs in the fusion phase before --kiln-fuse-gemm-epilogue.

    Before:
    ```mlir
    %p = kiln.matmul %dq, %wq {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
    %r = kiln.matmul %dk, %wk {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
    %s = kiln.add %p, %r : tensor<2x4x8xf32>
    ```

    After:
    ```mlir
    %p = kiln.matmul %dq, %wq {transpose_rhs = true} : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xf32>
    %0 = kiln.reshape %p : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %1 = kiln.reshape %dk : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
    %2 = kiln.matmul_accumulate %0, %1, %wk {transpose_rhs = true} : tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xbf16>
    %s = kiln.reshape %2 : tensor<8x8xf32> -> tensor<2x4x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnSinkGemms : Pass<"kiln-sink-gemms", "::mlir::ModuleOp"> {
  let summary = "Backward GEMMs of @step moved down to their first reader";
  let description = [{
    A backward kiln.matmul of @step whose product nothing reads until much
    later (autodiff emits an op's input and weight gradients together:
    SwiGLU's dh = dy @ w2^T before h^T @ dy; under recompute, before the
    block is recomputed) moves right before its first reader, when the
    product is more bytes than the operands whose live ranges the move
    lengthens (those not read at or after that reader; arguments cost
    nothing). A product the function returns stays, and so does a GEMM
    whose operand an op before the reader updates in place (accumulate,
    optimizer updates, embedding_grad with acc, matmul_accumulate,
    all_reduce: codegen gives the result that operand's buffer). The ops and their
    values are unchanged, only the order (the schedule) and with it the
    memory plan. Runs last in the fusion phase.

    Before:
    ```mlir
    %dh = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x4xbf16>, tensor<16x4xbf16> -> tensor<8x16xbf16>
    %dw2 = kiln.matmul %h, %dy {transpose_lhs = true} : tensor<8x16xbf16>, tensor<8x4xbf16> -> tensor<16x4xf32>
    %da = kiln.mul %dh, %b : tensor<8x16xbf16>
    ```

    After:
    ```mlir
    %dw2 = kiln.matmul %h, %dy {transpose_lhs = true} : tensor<8x16xbf16>, tensor<8x4xbf16> -> tensor<16x4xf32>
    %dh = kiln.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x4xbf16>, tensor<16x4xbf16> -> tensor<8x16xbf16>
    %da = kiln.mul %dh, %b : tensor<8x16xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnFuseGemmEpilogue : Pass<"kiln-fuse-gemm-epilogue", "::mlir::ModuleOp"> {
  let summary = "Folds bias, GELU and bias-gradient epilogues into their GEMMs";
  let description = [{
    Wraps a kiln.matmul of @step, @update and @eval together with its
    epilogue in a `kiln.fusion gemm`, which codegen turns into one GEMM
    call with an epilogue (cuBLASLt epilogues on CUDA; on the CPU the same
    formulas as the unfused kernels after sgemm). Matched, for GEMMs that
    are one matrix (batch 1) with an f32 result:
    - `add(P, broadcast(bias [N] along the rows))`, then `gelu` of it (the
      sum is also yielded when the backward reads it: the aux output);
    - `gelu(P)`;
    - `gelu_grad(x, P)` and a `reduce_sum` of it over the rows (bias
      gradient);
    - a `reduce_sum` over the leading dims of a value the GEMM reads as its
      k-side rows (the bias gradient of a linear layer, next to its weight
      gradient).
    Under precision = bf16 (bf16 operands): the forward bias [+ gelu] with a
    bf16 D; `gelu_grad(widen(aux bf16), P)` rounded to bf16 (Dgelu with a
    bf16 D and aux, its bias sums moved onto the bf16 result); bias
    gradients over the GEMM's bf16 operand (its widening, or its rounding of
    the summed f32 value), written in f32; and a GEMM result read only by
    its bf16 rounding is written in bf16 by the GEMM.
    A candidate that is refused gets `kiln.not_fused` on the matmul saying
    why. Runs before --kiln-fusion, which leaves these kernels alone.

    Before:
    ```mlir
    %p = kiln.matmul %x, %w : tensor<64x32xf32>, tensor<32x128xf32>
        -> tensor<64x128xf32>
    %bb = kiln.broadcast %b dims = [1] : tensor<128xf32> -> tensor<64x128xf32>
    %s = kiln.add %p, %bb : tensor<64x128xf32>
    %y = kiln.gelu %s : tensor<64x128xf32>
    ```

    After:
    ```mlir
    %f:2 = kiln.fusion gemm (%x, %w, %b) : (...) -> (...) {
    ^bb0(%x0: tensor<64x32xf32>, %w0: tensor<32x128xf32>,
         %b0: tensor<128xf32>):
      %p = kiln.matmul %x0, %w0 : ...
      %bb = kiln.broadcast %b0 dims = [1] : ...
      %s = kiln.add %p, %bb : tensor<64x128xf32>
      %y = kiln.gelu %s : tensor<64x128xf32>
      kiln.yield %y, %s : tensor<64x128xf32>, tensor<64x128xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

def KilnPadDims : Pass<"kiln-pad-dims", "::mlir::ModuleOp"> {
  let summary = "Pads parameter dims to a tensor-core multiple, masking the padding";
  let description = [{
    Runs on the forward graph (before @eval and autodiff, so both see the
    padded step and the backward is derived from it). A parameter dimension
    that is not a multiple of `multiple` (and larger than it) is padded up
    to the next multiple when every use of the parameter can absorb the
    padding: a `kiln.embedding` table's rows (token ids stay below the true
    size), a `kiln.matmul` producing the padded dimension as M or N
    (e.g. the tied head `x @ transpose(wte)`), `kiln.transpose`,
    `kiln.broadcast`, `kiln.add`/`sub`/`mul`/`neg` whose other operands
    are padded too (a bias parameter of the same size is padded with it),
    ending in a `kiln.cross_entropy` over the padded classes, which gets
    `valid_classes` = the true size (padded logits take no part in the
    softmax, get gradient 0). The padded arguments keep their true shape in
    `kiln.true_shape`; codegen writes it as `Buffer.logical_shape`, so
    checkpoints and reports keep the user's shapes. Any other use leaves the
    parameter unpadded, with the reason in `kiln.pad_dims_refused`.

    Before (`multiple = 64`):
    ```mlir
    func.func @step(%wte: tensor<200x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
                    %tok: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                    %tgt: tensor<2x8xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
      %x = kiln.embedding %wte, %tok : tensor<200x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
      %t = kiln.transpose %wte permutation = [1, 0] : tensor<200x16xf32> -> tensor<16x200xf32>
      %l = kiln.matmul %x, %t : tensor<2x8x16xf32>, tensor<16x200xf32> -> tensor<2x8x200xf32>
      %loss = kiln.cross_entropy %l, %tgt : tensor<2x8x200xf32>, tensor<2x8xi32>
      return %loss : tensor<f32>
    }
    ```

    After:
    ```mlir
    func.func @step(%wte: tensor<256x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte",
                                              kiln.true_shape = array<i64: 200, 16>}, ...) {
      %x = kiln.embedding %wte, %tok : tensor<256x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
      %t = kiln.transpose %wte permutation = [1, 0] : tensor<256x16xf32> -> tensor<16x256xf32>
      %l = kiln.matmul %x, %t : tensor<2x8x16xf32>, tensor<16x256xf32> -> tensor<2x8x256xf32>
      %loss = kiln.cross_entropy %l, %tgt {valid_classes = 200 : i64}
          : tensor<2x8x256xf32>, tensor<2x8xi32>
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64",
           "Pad to a multiple of this many elements (64: a bf16 tensor-core "
           "tile; 50257 -> 50304 is also a multiple of 128)">
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // KILN_PASSES_TD
