//===- GemmEpilogueMatch.cpp - What a GEMM epilogue match asks of values --===//
//
// The value tests of --kiln-fuse-gemm-epilogue; each is described in
// GemmEpilogueMatch.h.
//
//===----------------------------------------------------------------------===//

#include "passes/GemmEpilogueMatch.h"

namespace mlir::kiln::gemm_epilogue {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

bool isF32(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isF32();
}

bool isBf16(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
}

// The only reader of `v` when it is a kiln.convert to `f32` (else to bf16),
// or null.
ConvertOp soleConvert(Value v, bool toF32) {
  if (!v.hasOneUse())
    return nullptr;
  auto convert = dyn_cast<ConvertOp>(*v.getUsers().begin());
  if (!convert || (toF32 ? !isF32(convert.getResult())
                         : !isBf16(convert.getResult())))
    return nullptr;
  return convert;
}

// Why `matmul` cannot carry an epilogue ("" when it can): codegen makes one
// GEMM matrix of it only when the batch folds into the rows (shared rank-2
// rhs, untransposed lhs) or there is no batch.
std::string whyNoEpilogue(MatmulOp matmul, bool bf16Result) {
  if (!isF32(matmul.getResult()) && !(bf16Result && isBf16(matmul.getResult())))
    return "the GEMM result is not f32";
  ArrayRef<int64_t> res = shapeOf(matmul.getResult());
  int64_t batch = 1;
  for (int64_t d : res.drop_back(2))
    batch *= d;
  bool folds = shapeOf(matmul.getRhs()).size() == 2 && !matmul.getTransposeLhs();
  if (batch > 1 && !folds)
    return "a batched GEMM (batch " + std::to_string(batch) +
           ") has no epilogue: the bias and aux are per matrix";
  return "";
}

// cuBLASLt needs the GELU aux matrix's leading dimension (N, the output
// columns) divisible by 8 (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD).
constexpr int64_t kAuxLdMultiple = 8;

bool auxLdOk(Value product) {
  return shapeOf(product).back() % kAuxLdMultiple == 0;
}

// The value under a chain of reshapes (views of the same storage).
Value rootOf(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  return v;
}

// The bf16 value `v` widens exactly (v = convert bf16 -> f32 of it), or null.
Value widenedInput(Value v) {
  auto convert = v.getDefiningOp<ConvertOp>();
  if (convert && isBf16(convert.getInput()) && isF32(convert.getResult()))
    return convert.getInput();
  return nullptr;
}

// Compares up to views and exact widenings: reshapes of one value (the same
// row-major order), transposes with the same permutation of such values,
// converts bf16 -> f32 on either side, and one rounding f32 -> bf16 on v's.
OperandForm operandForm(Value v, Value x) {
  v = rootOf(v);
  x = rootOf(x);
  if (v == x)
    return OperandForm::Same;
  if (Value w = widenedInput(x))
    return operandForm(v, w);
  if (Value w = widenedInput(v))
    return operandForm(w, x);
  if (auto round = v.getDefiningOp<ConvertOp>();
      round && isBf16(round.getResult()) && isF32(round.getInput()))
    return operandForm(round.getInput(), x) == OperandForm::Same
               ? OperandForm::Rounded
               : OperandForm::None;
  auto tv = v.getDefiningOp<TransposeOp>();
  auto tx = x.getDefiningOp<TransposeOp>();
  if (tv && tx && tv.getPermutation() == tx.getPermutation() &&
      shapeOf(tv.getInput()) == shapeOf(tx.getInput()))
    return operandForm(tv.getInput(), tx.getInput());
  return OperandForm::None;
}

// True when `sum` reduces every dim of its input but the last ([.., C] ->
// [C]): a bias gradient.
bool isRowsSum(ReduceSumOp sum) {
  ArrayRef<int64_t> shape = shapeOf(sum.getInput());
  ArrayRef<int64_t> dims = sum.getDims();
  if (shape.size() < 2 || dims.size() != shape.size() - 1)
    return false;
  for (auto [i, d] : llvm::enumerate(dims))
    if (d != static_cast<int64_t>(i))
      return false;
  return true;
}

// `v` broadcast along the rows: a [N] vector to [..., N] (dims = [rank-1]).
Value rowBias(Value v) {
  auto bcast = v.getDefiningOp<BroadcastOp>();
  if (!bcast)
    return nullptr;
  ArrayRef<int64_t> in = shapeOf(bcast.getInput());
  ArrayRef<int64_t> out = shapeOf(bcast.getResult());
  ArrayRef<int64_t> dims = bcast.getDims();
  if (in.size() != 1 || dims.size() != 1 ||
      dims[0] != static_cast<int64_t>(out.size()) - 1 || in[0] != out.back())
    return nullptr;
  return bcast.getResult();
}

} // namespace mlir::kiln::gemm_epilogue
