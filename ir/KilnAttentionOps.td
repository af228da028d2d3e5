//===- KilnAttentionOps.td - Attention with score/mask regions -*- tablegen -*-===//
//
// kiln.attention and its backward kiln.attention_grad: softmax attention whose
// score modification and mask are small scalar programs (regions) over the
// indices b, h, i, j and any number of captured tensors, so that a bias or a
// mask is computed inside the flash kernel instead of being materialized as a
// [T, S] tensor. Included by KilnOps.td (same generated files); parser,
// printer and verifiers in ir/KilnAttentionOps.cpp, VJP in ir/KilnVJP.cpp.
//
// C++: `b.create<AttentionOp>(loc, outType, lseType, q, k, v, captures,
// b.getF32FloatAttr(scale))` makes the op with both regions empty (identity
// score, keep all); fill one with `b.createBlock(&op.getScore(), {}, types,
// locs)` and end it with `kiln.yield`. AttentionGradOp likewise (result
// types dq, dk, dv, then one per floating capture).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTENTION_OPS_TD
#define KILN_ATTENTION_OPS_TD

// q/k/v and the gradients: rank-4 f32 or bf16.
def Kiln_AttentionTensor : RankedTensorOf<[F32, BF16],
    [HasStaticShapePred, HasAnyRankOfPred<[4]>], "statically shaped 4D tensor">;

// What the two ops share: the operand layout after q, k, v (captures last),
// the scale and the two regions; the checks live in one C++ function.
class Kiln_AttentionLikeOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits, [IsolatedFromAbove])> {
  let regions = (region MaxSizedRegion<1>:$score, MaxSizedRegion<1>:$mask);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  code sharedDeclaration = [{
    /// The entry block of the score region, or null when the score is the
    /// identity (s itself).
    ::mlir::Block *getScoreBlock() {
      return getScore().empty() ? nullptr : &getScore().front();
    }
    /// The entry block of the mask region, or null when every key is kept.
    ::mlir::Block *getMaskBlock() {
      return getMask().empty() ? nullptr : &getMask().front();
    }
    /// The dropout probability (0: none).
    double getDropoutProbability() {
      return getDropout().convertToDouble();
    }
    /// With dropout, the RNG state [seed, micro-step offset] (i64): by
    /// convention the last capture (it is an integer capture, so it gets no
    /// gradient, and the VJP passes it on with the others). Null without.
    ::mlir::Value getRngState() {
      return getDropoutProbability() > 0.0 ? getCaptures().back()
                                           : ::mlir::Value();
    }
    /// Whether q, k, v, out (and the gradients) are [B, T, H, D] in memory
    /// (layout bthd) rather than [B, H, T, D].
    bool isTokensMajor() {
      return getLayout() == ::mlir::kiln::AttentionLayout::Bthd;
    }
    /// The index of the heads dim (1) and of the tokens dim (2) of a
    /// per-head tensor's type; swapped in layout bthd.
    unsigned getHeadsDim() { return isTokensMajor() ? 2 : 1; }
    unsigned getTokensDim() { return isTokensMajor() ? 1 : 2; }
    /// Number of query heads that share one key/value head (H / KVH).
    int64_t getGroupSize() {
      return getQ().getType().getDimSize(getHeadsDim()) /
             getK().getType().getDimSize(getHeadsDim());
    }
  }];
}

def Kiln_AttentionOp : Kiln_AttentionLikeOp<"attention", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Softmax attention with a score region, a mask region and "
                "captured tensors";
  let description = [{
    For q `[B, H, T, D]`, k `[B, KVH, S, D]`, v `[B, KVH, S, Dv]` with
    `H % KVH == 0` (grouped-query: query head h reads kv head `h / (H/KVH)`):

    ```
    s(b,h,i,j)     = scale * dot(q[b,h,i,:], k[b,h/g,j,:])
    score(b,h,i,j) = <score region>(s, b, h, i, j, captures...)   (default s)
    keep(b,h,i,j)  = <mask region>(b, h, i, j, captures...)       (default true)
    out[b,h,i,:]   = sum_{j kept} softmax_j(score) * v[b,h/g,j,:]
    lse[b,h,i]     = log(sum_{j kept} exp(score(b,h,i,j)))
    ```

    With `dropout = p > 0` the probabilities are dropped after the softmax,
    as torch does: `out = sum_j softmax_j(score) * z(b,h,i,j) * v_j` with
    `z = keep / (1 - p)`, keep drawn from Philox4x32-10
    (codegen/PhiloxRandom.inc) at counter (j, i, b*H+h, offset) under key
    seed; `lse` is unaffected. The RNG state `[seed, offset]`
    (`tensor<2xi64>`, a runtime buffer rewritten before every micro-step)
    is then the last capture; regions receive it like any capture.
    `0 <= p < 1`.

    With `layout = #kiln<attention_layout bthd>` the per-head tensors (q,
    k, v, out) have their heads and tokens dims swapped in the type:
    q `[B, T, H, D]`, k `[B, S, KVH, D]`, v `[B, S, KVH, Dv]`, out
    `[B, T, H, Dv]`; the formulas above are unchanged, `lse` stays
    `[B, H, T]`.

    A row with no kept key has `out = 0` and `lse = -inf`. The score region
    receives `(s: f32, b, h, i, j: index, one tensor per capture)` and yields
    an f32; the mask region receives `(b, h, i, j: index, captures...)` and
    yields an i1. Either region may be left out. The regions are isolated
    from above and may only hold arith and math ops on scalars and
    `tensor.extract` of a capture argument, so codegen can inline them into
    the kernel. Captures are tensors of any rank (f32, bf16, i32, i64).
    `lse` is saved for the backward pass; it cannot be differentiated.

    ```mlir
    %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len)
        {scale = 0.125 : f32}
        : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>,
           tensor<2x2x53x64xf32>, tensor<4xf32>, tensor<2xi32>)
        -> (tensor<2x4x37x64xf32>, tensor<2x4x37xf32>)
      score(%s: f32, %b: index, %h: index, %i: index, %j: index,
            %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
        %sl = tensor.extract %c0[%h] : tensor<4xf32>
        %ii = arith.index_cast %i : index to i64
        %jj = arith.index_cast %j : index to i64
        %d = arith.subi %jj, %ii : i64
        %df = arith.sitofp %d : i64 to f32
        %bias = arith.mulf %sl, %df : f32
        %r = arith.subf %s, %bias : f32
        kiln.yield %r : f32
      }
      mask(%b: index, %h: index, %i: index, %j: index,
           %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
        %n = tensor.extract %c1[%b] : tensor<2xi32>
        %jj = arith.index_cast %j : index to i32
        %keep = arith.cmpi slt, %jj, %n : i32
        kiln.yield %keep : i1
      }
    ```
  }];
  let arguments = (ins Kiln_AttentionTensor:$q, Kiln_AttentionTensor:$k,
                       Kiln_AttentionTensor:$v,
                       Variadic<Kiln_Tensor>:$captures, F32Attr:$scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
                       DefaultValuedAttr<Kiln_AttentionLayoutAttr,
                           "::mlir::kiln::AttentionLayout::Bhtd">:$layout);
  let results = (outs Kiln_AttentionTensor:$out,
                      StaticShapeTensorOf<[F32]>:$lse);
  // Without dropout (the attribute stays unset, i.e. 0).
  let builders = [
    OpBuilder<(ins "::mlir::Type":$out, "::mlir::Type":$lse,
                   "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::ValueRange":$captures, "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, out, lse, q, k, v, captures, scale,
            ::mlir::FloatAttr(), ::mlir::kiln::AttentionLayoutAttr());
    }]>
  ];
  let extraClassDeclaration = sharedDeclaration;
  // k and v repeated per query group in memory (Hugging Face's repeat_kv:
  // reshape, expand, reshape) are read unrepeated: the op's own GQA
  // (KilnAttentionOps.cpp).
  let hasCanonicalizeMethod = 1;
}

def Kiln_AttentionGradOp : Kiln_AttentionLikeOp<"attention_grad"> {
  let summary = "Gradients of kiln.attention";
  let description = [{
    The backward of `kiln.attention`, with the same scale, regions and
    captures. From the forward `out` and `lse` and the cotangent `dout` it
    recomputes `p = exp(score - lse)` and returns `dq`, `dk`, `dv` (dk and dv
    summed over the query heads of each kv group) and one gradient per
    floating-point capture, in capture order (integer captures get none).
    With `dropout`, the same keep mask is regenerated from the RNG state
    (the last capture), so the gradient is that of the forward's draw.
    The summation order is fixed, so results are deterministic. Rows with no
    kept key contribute zero.

    ```mlir
    %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse,
        %dout captures(%slope) {scale = 0.125 : f32}
        : (tensor<1x2x5x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x7x8xf32>,
           tensor<1x2x5x8xf32>, tensor<1x2x5xf32>, tensor<1x2x5x8xf32>,
           tensor<2xf32>)
        -> (tensor<1x2x5x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x7x8xf32>,
            tensor<2xf32>)
      score(%s: f32, %b: index, %h: index, %i: index, %j: index,
            %c0: tensor<2xf32>) {
        %sl = tensor.extract %c0[%h] : tensor<2xf32>
        %r = arith.addf %s, %sl : f32
        kiln.yield %r : f32
      }
    ```
  }];
  let arguments = (ins Kiln_AttentionTensor:$q, Kiln_AttentionTensor:$k,
                       Kiln_AttentionTensor:$v, Kiln_AttentionTensor:$out,
                       StaticShapeTensorOf<[F32]>:$lse,
                       Kiln_AttentionTensor:$dout,
                       Variadic<Kiln_Tensor>:$captures, F32Attr:$scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
                       DefaultValuedAttr<Kiln_AttentionLayoutAttr,
                           "::mlir::kiln::AttentionLayout::Bhtd">:$layout);
  let results = (outs Kiln_AttentionTensor:$dq, Kiln_AttentionTensor:$dk,
                      Kiln_AttentionTensor:$dv,
                      Variadic<Kiln_FloatTensor>:$capture_grads);
  let extraClassDeclaration = sharedDeclaration;
}

#endif // KILN_ATTENTION_OPS_TD
