//===- KilnCollectiveOps.td - Collectives on mesh axes -----*- tablegen -*-===//
//
// Communication between the ranks that run one artifact. The mesh is the
// module attribute `kiln.mesh` (axis name -> number of ranks along it, e.g.
// `kiln.mesh = {data = 2 : i64}`); every collective names one of its axes
// and the verifier checks shapes against that axis' size. Each rank runs the
// same program, so a collective is issued by every rank in the same order --
// the property that lets them stay Pure like every kiln op (CSE and DCE
// treat all ranks alike) -- but remat never recomputes one (a recompute
// would communicate again). `reason` says why a pass inserted it, for the
// artifact and the reports. Included by KilnOps.td; verifiers and VJPs
// (each the adjoint collective) in ir/KilnCollectiveOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COLLECTIVE_OPS_TD
#define KILN_COLLECTIVE_OPS_TD


class Kiln_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, traits> {
  let hasVerifier = 1;
}

def Kiln_AllReduceOp : Kiln_CollectiveOp<"all_reduce", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Sum or mean of each operand over the ranks of a mesh axis";
  let description = [{
    Every rank along `axis` gets, for each operand, the elementwise sum (or
    mean) of that operand over those ranks. Several operands make one call
    -- a bucket: codegen reduces them in place, in one collective step, so
    a bucket of gradients costs one launch. Float operands only.

    ```mlir
    %g:2 = kiln.all_reduce mean %dw, %db over "data" {reason = "data parallel"}
        : tensor<128x512xf32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$inputs,
                       Kiln_ReductionAttr:$reduction, StrAttr:$axis,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat =
      "$reduction $inputs `over` $axis attr-dict `:` type($inputs)";
}

def Kiln_ReduceScatterOp : Kiln_CollectiveOp<"reduce_scatter", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Sum or mean over a mesh axis, each rank keeping one slice";
  let description = [{
    Reduces `input` over the ranks of `axis` like kiln.all_reduce, then rank
    r keeps slice r of dimension `dim` (the result's `dim` is the input's
    divided by the axis size). The VJP is kiln.all_gather (scaled by
    1 / size for the mean).

    ```mlir
    %s = kiln.reduce_scatter sum %g over "data" dim = 0
        : tensor<1024x64xf32> -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_ReductionAttr:$reduction,
                       StrAttr:$axis, I64Attr:$dim,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$reduction $input `over` $axis `dim` `=` $dim "
                       "attr-dict `:` type($input) `->` type($result)";
}

def Kiln_AllGatherOp : Kiln_CollectiveOp<"all_gather", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Concatenation over a mesh axis of every rank's slice";
  let description = [{
    Every rank along `axis` gets the concatenation, along dimension `dim`,
    of the `input` of ranks 0, 1, ...: the result's `dim` is the input's
    times the axis size. The VJP is kiln.reduce_scatter (sum): each rank's
    slice influenced the result on every rank.

    ```mlir
    %w = kiln.all_gather %shard over "data" dim = 0
        : tensor<512x64xf32> -> tensor<1024x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, StrAttr:$axis, I64Attr:$dim,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `over` $axis `dim` `=` $dim attr-dict `:` "
                       "type($input) `->` type($result)";
}

def Kiln_MeshBroadcastOp : Kiln_CollectiveOp<"mesh_broadcast", [
    SameOperandsAndResultType]> {
  let summary = "Rank `root`'s value on every rank of a mesh axis";
  let description = [{
    Every rank along `axis` gets the `input` of rank `root` (along that
    axis): how replicated state starts identical. Not differentiable: it
    starts state outside the loss's graph, and autodiff says so if a loss
    depends on it.

    ```mlir
    %w0 = kiln.mesh_broadcast %w over "data" root = 0 : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, StrAttr:$axis, I64Attr:$root,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `over` $axis `root` `=` $root attr-dict `:` "
                       "type($result)";
}

def Kiln_LocalShardOp : Kiln_CollectiveOp<"local_shard", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "This rank's slice of a replicated value along a mesh axis";
  let description = [{
    Rank r along `axis` keeps slice r of dimension `dim` of `input`, a value
    every rank along `axis` holds alike (the result's `dim` is the input's
    divided by the axis size). Nothing is communicated -- codegen copies the
    slice at the rank's offset -- but the result differs from rank to rank,
    which is why it lives with the collectives: ZeRO's optimizer takes its
    share of a replicated parameter (or gradient) with it, and the
    partitioner a rank's block of a whole value a tensor-parallel op reads
    split. Over a tensor axis its VJP is kiln.all_gather; over the data
    axis it is not differentiable (it appears only in @update).

    ```mlir
    %p = kiln.local_shard %w over "data" dim = 0
        : tensor<1024xf32> -> tensor<512xf32>
    ```
  }];
  // i32 too: an integer input (targets) a tensor axis splits.
  let arguments = (ins StaticShapeTensorOf<[F32, BF16, F16, I32]>:$input,
                       StrAttr:$axis, I64Attr:$dim,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs StaticShapeTensorOf<[F32, BF16, F16, I32]>:$result);
  let assemblyFormat = "$input `over` $axis `dim` `=` $dim attr-dict `:` "
                       "type($input) `->` type($result)";
  // local_shard(all_reduce sum(x)) -> reduce_scatter sum(x), also
  // through a transpose between them (an all-reduce commutes with it): the
  // backward of sequence parallelism's gather (its VJP, local_shard, after
  // the VJP of kiln.mesh_vary, all_reduce) moves half the bytes.
  let hasCanonicalizeMethod = 1;
}

def Kiln_MeshVaryOp : Kiln_CollectiveOp<"mesh_vary", [
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "A value alike on every rank of a tensor axis, read by "
                "per-rank work";
  let description = [{
    The identity, placed by --kiln-partition where a value every rank along
    tensor axis `axis` holds whole feeds a computation each rank does a
    different part of (the input of a column-parallel matmul: Megatron's
    `f`). The value's gradient is then a sum of the ranks' parts, so the
    VJP is `kiln.all_reduce sum` over `axis` -- the one all-reduce of a
    tensor-parallel block's backward. After autodiff it has done its work
    and is dropped (nothing to compute).

    ```mlir
    %h1 = kiln.mesh_vary %h over "model" {reason = "..."} : tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, StrAttr:$axis,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `over` $axis attr-dict `:` type($result)";
}

def Kiln_ShardingConstraintOp : Kiln_Op<"sharding_constraint", [
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "The model file's shard(x, [...]): x, split as it says";
  let description = [{
    The identity, annotated: `sharding` names, for each dimension, the mesh
    axis that splits it ("" : whole). --kiln-propagate-sharding holds the
    value to it (a user annotation outranks anything propagated) and
    --kiln-partition replaces the op by the collective that reshards its
    input, if any.

    ```mlir
    %y = kiln.sharding_constraint %x ["", "", "model"] : tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, StrArrayAttr:$sharding);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // KILN_COLLECTIVE_OPS_TD
