//===- AccumulateGemms.cpp - Sums of GEMM products formed by the GEMMs -----===//
//
// --kiln-accumulate-gemms: in the backward, a value read by several matmuls
// (h, read by the q, k and v projections; by SwiGLU's w1 and w3) gets the
// sum of their input gradients, add(add(dq @ wq^T, dk @ wk^T), dv @ wv^T):
// each product an f32 [B, T, C] that its GEMM writes and the add (or the row
// kernel the add is fused into, twice when its column pass recomputes it)
// reads back. Here the GEMMs add into one buffer instead (cuBLASLt's
// beta = 1, sgemm's on the CPU): kiln.matmul_accumulate, as the fused
// classifier already does for its weight gradient. Each link of a chain
// saves a write and a read (two with a recomputing column pass) of the
// product, and the products are no longer live at once.
//
// Algorithm, for @step (a single block), each kiln.add S = add(A, B) of f32
// tensors, in program order:
//  1. B (either operand) is a kiln.matmul read only by S, with a 2-D rhs and
//     an lhs that is 2-D or not transposed (its leading dims are the GEMM's
//     rows), not the other operand;
//  2. A, the other operand, is read only by S and is a kiln.matmul or a
//     reshape of a kiln.matmul_accumulate made here (the previous link);
//  3. S becomes reshape(matmul_accumulate(reshape(A) [M, N],
//     reshape(lhs) [M, K], rhs)) placed at S, and B is erased. When both
//     operands qualify as B, the later matmul becomes the accumulation (the
//     earlier one stays where it ran).
//  4. Otherwise, when one operand is a kiln.embedding_grad read only by S
//     and the other an f32 value read only by S (a tied embedding's
//     classifier weight gradient): S becomes that embedding_grad adding its
//     rows into the other operand (`plus`, in its buffer), so no table is
//     zeroed, stored and read back by an add ([V, D] fp32, three times).
// Numerics: the sum is formed in the GEMM's fp32 epilogue (C + the fp32
// accumulator) instead of an fp32 add of the stored product: the same
// arithmetic up to the GEMM's own summation order (cuBLASLt may choose
// another algorithm with beta = 1; sgemm adds into C block by block). The
// embedding rows are added one by one onto the other gradient instead of
// onto zero, then added: the same terms, summed in another order.
// Runs in the fusion phase after --kiln-fuse-rope and before
// --kiln-fuse-gemm-epilogue (these GEMMs have no epilogue).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNACCUMULATEGEMMS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

bool isF32Tensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getElementType().isF32();
}

// Step 1: `value` is a matmul read only by `sum` whose GEMM can add into a
// [M, N] buffer.
MatmulOp accumulable(Value value, Operation *sum) {
  auto matmul = value.getDefiningOp<MatmulOp>();
  if (!matmul || !value.hasOneUse() || *value.getUsers().begin() != sum)
    return nullptr;
  RankedTensorType lhs = matmul.getLhs().getType(),
                   rhs = matmul.getRhs().getType();
  if (rhs.getRank() != 2 || lhs.getRank() < 2)
    return nullptr;
  if (lhs.getRank() > 2 && matmul.getTransposeLhs())
    return nullptr;
  return matmul;
}

// Step 2: `value` may be overwritten by the GEMM adding into it.
bool isAccumulator(Value value, Operation *sum) {
  if (!value.hasOneUse() || *value.getUsers().begin() != sum)
    return false;
  if (value.getDefiningOp<MatmulOp>())
    return true;
  auto view = value.getDefiningOp<ReshapeOp>();
  return view && view.getInput().getDefiningOp<MatmulAccumulateOp>() &&
         view.getInput().hasOneUse();
}

// `value` as a 2-D [rows, last dim] tensor (itself when 2-D).
Value asMatrix(OpBuilder &b, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 2)
    return value;
  int64_t last = type.getShape().back();
  auto matrix = RankedTensorType::get({type.getNumElements() / last, last},
                                      type.getElementType());
  return b.create<ReshapeOp>(value.getLoc(), matrix, value);
}

// Steps 1-3 on `add`; true when rewritten.
bool accumulate(AddOp add) {
  Value lhs = add.getLhs(), rhs = add.getRhs();
  if (!isF32Tensor(add.getResult()) || lhs == rhs ||
      lhs.getType() != rhs.getType())
    return false;
  MatmulOp fromLhs = accumulable(lhs, add), fromRhs = accumulable(rhs, add);
  // The later matmul accumulates into the earlier one's product.
  MatmulOp gemm = fromRhs;
  Value acc = lhs;
  if (fromLhs && (!fromRhs || fromRhs->isBeforeInBlock(fromLhs))) {
    gemm = fromLhs;
    acc = rhs;
  }
  if (!gemm || !isAccumulator(acc, add))
    return false;
  OpBuilder b(add);
  Value accMatrix = asMatrix(b, acc);
  Value lhsMatrix = asMatrix(b, gemm.getLhs());
  auto summed = b.create<MatmulAccumulateOp>(
      add.getLoc(), accMatrix, lhsMatrix, gemm.getRhs(),
      gemm.getTransposeLhs(), gemm.getTransposeRhs());
  Value result = summed.getResult();
  if (result.getType() != add.getType())
    result = b.create<ReshapeOp>(add.getLoc(), add.getType(), result);
  add.replaceAllUsesWith(result);
  add.erase();
  gemm.erase();
  return true;
}

// Step 4 on `add`; true when rewritten.
bool accumulateRows(AddOp add) {
  Value lhs = add.getLhs(), rhs = add.getRhs();
  if (!isF32Tensor(add.getResult()) || lhs == rhs)
    return false;
  auto readOnlyBySum = [&](Value v) {
    return v.hasOneUse() && *v.getUsers().begin() == add.getOperation();
  };
  for (auto [rows, acc] : {std::pair(lhs, rhs), std::pair(rhs, lhs)}) {
    auto scatter = rows.getDefiningOp<EmbeddingGradOp>();
    if (!scatter || scatter.getAcc() || !readOnlyBySum(rows) ||
        !readOnlyBySum(acc) || acc.getType() != add.getType())
      continue;
    OpBuilder b(add);
    auto summed = b.create<EmbeddingGradOp>(scatter.getLoc(), add.getType(),
                                            scatter.getIndices(),
                                            scatter.getGrad(), acc);
    add.replaceAllUsesWith(summed.getResult());
    add.erase();
    scatter.erase();
    return true;
  }
  return false;
}

struct AccumulateGemmsPass
    : public mlir::kiln::impl::KilnAccumulateGemmsBase<AccumulateGemmsPass> {
  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("step");
    if (!func || func.isExternal())
      return;
    SmallVector<AddOp> adds;
    func.walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds)
      if (!accumulate(add))
        accumulateRows(add);
  }
};

} // namespace
