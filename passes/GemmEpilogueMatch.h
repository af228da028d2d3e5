//===- GemmEpilogueMatch.h - What a GEMM epilogue match asks of values ----===//
//
// The value tests --kiln-fuse-gemm-epilogue (FuseGemmEpilogue.cpp) matches
// with: element types, views and exact widenings, bias vectors and sums.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_GEMMEPILOGUEMATCH_H
#define KILN_PASSES_GEMMEPILOGUEMATCH_H

#include "ir/KilnOps.h"

#include <string>

namespace mlir::kiln::gemm_epilogue {

ArrayRef<int64_t> shapeOf(Value v);
bool isF32(Value v);
bool isBf16(Value v);

/// The only reader of `v` when it is a kiln.convert to f32 (`toF32`) or to
/// bf16, else null.
ConvertOp soleConvert(Value v, bool toF32);

/// Why `matmul` cannot carry an epilogue ("" when it can): codegen makes one
/// GEMM matrix of it only when the batch folds into the rows (shared rank-2
/// rhs, untransposed lhs) or there is no batch. `bf16Result` accepts a bf16
/// result besides f32.
std::string whyNoEpilogue(MatmulOp matmul, bool bf16Result = false);

/// Whether cuBLASLt takes `product`'s columns as the GELU aux matrix's
/// leading dimension (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: a multiple of 8).
bool auxLdOk(Value product);

/// The value under a chain of reshapes (views of the same storage).
Value rootOf(Value v);

/// The bf16 value `v` widens exactly (v = convert bf16 -> f32 of it), or null.
Value widenedInput(Value v);

/// How a GEMM operand holds the values a bias-gradient sum reads.
enum class OperandForm {
  None,    // other values
  Same,    // the same values (or their exact bf16 -> f32 widening)
  Rounded, // their bf16 rounding: summing v moves the sum's rounding point
};

/// How `v` holds `x`, compared up to views and exact widenings: reshapes of
/// one value (the same row-major order), transposes with the same
/// permutation of such values, converts bf16 -> f32 on either side, and one
/// rounding f32 -> bf16 on v's.
OperandForm operandForm(Value v, Value x);

/// True when `sum` reduces every dim of its input but the last ([.., C] ->
/// [C]): a bias gradient.
bool isRowsSum(ReduceSumOp sum);

/// `v` when it is a [N] vector broadcast along the rows to [..., N]
/// (dims = [rank-1]), else null.
Value rowBias(Value v);

} // namespace mlir::kiln::gemm_epilogue

#endif // KILN_PASSES_GEMMEPILOGUEMATCH_H
