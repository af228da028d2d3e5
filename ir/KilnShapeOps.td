//===- KilnShapeOps.td - Shape and data-movement ops -------*- tablegen -*-===//
//
// Ops that only move or sum data along dimensions: broadcast, reduce_sum,
// reshape, transpose, slice, pad, concat. Included by KilnOps.td (same
// generated files); builders, verifiers, folders and the pad-sum
// canonicalization in ir/KilnShapeOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SHAPE_OPS_TD
#define KILN_SHAPE_OPS_TD

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Broadcast to a larger shape";
  let description = [{
    Input dimension `i` maps to result dimension `dims[i]` (strictly
    increasing); it must have size 1 (it is then expanded) or the size of
    that result dimension. Result dimensions not named in `dims` are new.

    ```mlir
    // bias [8] added to every row of [4, 8]
    %r = kiln.broadcast %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    // expand a size-1 dimension
    %s = kiln.broadcast %m dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReduceSumOp : Kiln_Op<"reduce_sum", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Sum over dimensions";
  let description = [{
    Sums over `dims` (sorted, unique); the result has those dimensions
    removed (rank 0 when all are reduced).

    ```mlir
    %r = kiln.reduce_sum %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %t = kiln.reduce_sum %a dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [
    // Derives the result type: the input shape with `dims` removed.
    OpBuilder<(ins "::mlir::Value":$input, "::llvm::ArrayRef<int64_t>":$dims)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Reinterpret a row-major tensor with another shape";
  let description = [{
    Same elements in the same row-major order, new shape. Codegen makes the
    result alias the input buffer.

    ```mlir
    %r = kiln.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %r = kiln.transpose %a permutation = [0, 2, 1]
        : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->`
    type($result)
  }];
  let builders = [
    // Derives the result type from the permutation.
    OpBuilder<(ins "::mlir::Value":$input,
                   "::llvm::ArrayRef<int64_t>":$permutation)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "A contiguous range of one dimension";
  let description = [{
    `result[..., i, ...] = input[..., start + i, ...]` along `dim`, for
    `i < result.shape[dim]`; every other dimension is kept whole. Its VJP is
    a `kiln.pad` of the gradient back to the input's shape.

    ```mlir
    %r = kiln.slice %a dim = 1, start = 2 : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, I64Attr:$dim, I64Attr:$start);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `,` `start` `=` $start attr-dict `:` type($input)
    `->` type($result)
  }];
  let builders = [
    // input[..., start:end, ...] along dim.
    OpBuilder<(ins "::mlir::Value":$input, "int64_t":$dim, "int64_t":$start,
                   "int64_t":$end)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_PadOp : Kiln_Op<"pad", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Zeros around a tensor along one dimension";
  let description = [{
    `result[..., before + i, ...] = input[..., i, ...]` along `dim`; every
    other element of the result is zero. The VJP of `kiln.slice`; its own
    VJP is the slice.

    ```mlir
    %r = kiln.pad %a dim = 1, before = 2 : tensor<4x3xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, I64Attr:$dim, I64Attr:$before);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `,` `before` `=` $before attr-dict `:` type($input)
    `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "int64_t":$dim, "int64_t":$before,
                   "int64_t":$after)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [
    DeclareOpInterfaceMethods<DifferentiableOpInterface>]> {
  let summary = "Tensors joined along one dimension";
  let description = [{
    The inputs, in order, along `dim`; they agree on every other dimension
    and on the element type. Its VJP slices the gradient.

    ```mlir
    %r = kiln.concat %a, %b dim = 1
        : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` `(` type($inputs) `)` `->`
    type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "int64_t":$dim)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

#endif // KILN_SHAPE_OPS_TD
