//===- GemmEpilogueWriter.cpp - A kiln.fusion gemm as one GemmCall ------===//
//
// --kiln-fuse-gemm-epilogue builds the region; this reads it back as one
// GemmCall (artifact.fbs, GemmEpilogue) by the shape of its epilogue:
//   matmul, broadcast, add          -> Bias       (bias: the broadcast vector)
//   matmul, broadcast, add, gelu    -> BiasGelu   (aux: the add, when yielded)
//   the bf16 forms of these two (bf16 operands, f32 matmul result):
//   matmul, broadcast, convert (bias bf16 -> f32), add, convert (-> bf16)
//     [, gelu (of the f32 sum), convert (-> bf16)] -> Bias / BiasGelu with
//     C, aux and bias in bf16 (aux: the rounded sum, when yielded)
//   matmul, gelu                    -> Gelu       (aux: the matmul, when yielded)
//   matmul, gelu_grad               -> Dgelu      (aux: gelu_grad's input)
//   matmul, gelu_grad, reduce_sum   -> DgeluBgrad (bias: the sum, written)
//   matmul, reduce_sum of an operand-> BgradA / BgradB (bias: the sum)
//   the bf16 backward forms (bf16 operands, f32 matmul result):
//   matmul, convert (aux bf16 -> f32), gelu_grad, convert (-> bf16)
//                                   -> Dgelu with C and aux in bf16
//   matmul, convert (bf16 operand -> f32), reduce_sum
//                                   -> BgradA / BgradB (bias: the f32 sum)
// C is the value the last pointwise op (or the matmul) computes. Anything
// else is a diagnostic on the fusion: the region verifier allows more
// shapes than a GEMM epilogue computes.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLowering.h"

#include "ir/KilnOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

// reduce_sum over every dim but the last: [..., N] -> [N].
bool sumsLeadingDims(k::ReduceSumOp sum) {
  int64_t rank = cast<RankedTensorType>(sum.getInput().getType()).getRank();
  ArrayRef<int64_t> dims = sum.getDims();
  if (rank < 2 || static_cast<int64_t>(dims.size()) != rank - 1)
    return false;
  for (auto [i, d] : llvm::enumerate(dims))
    if (d != static_cast<int64_t>(i))
      return false;
  return true;
}

} // namespace

LogicalResult StepLowering::planGemmFusion(k::FusionOp fusion) {
  Block &body = fusion.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), fusion.getInputs()))
    bufferOf[arg] = bufferOf.lookup(input);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto matmul = cast<k::MatmulOp>(ops.front()); // the verifier's contract
  auto yield = cast<k::YieldOp>(body.getTerminator());
  auto yielded = [&](Value v) { return llvm::is_contained(yield.getValues(), v); };
  auto isArg = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body;
  };
  auto unknown = [&]() {
    InFlightDiagnostic diag = fusion.emitError()
                              << "codegen knows no GEMM epilogue for";
    for (Operation *op : ArrayRef<Operation *>(ops).drop_front())
      diag << " " << op->getName();
    return diag;
  };

  FailureOr<PlannedGemm> g = gemmOf(matmul);
  if (failed(g))
    return failure();
  if (g->batch != 1)
    return fusion.emitError() << "a GEMM epilogue needs one matrix, but this "
                                 "GEMM has batch "
                              << g->batch;
  Value p = matmul.getResult();
  Value c = p;             // the value written to C
  Value biasIn, auxIn;     // read by the epilogue
  Value biasOut, auxOut;   // written by the epilogue
  ArrayRef<Operation *> rest = ArrayRef<Operation *>(ops).drop_front();
  auto opAt = [&](size_t i) { return i < rest.size() ? rest[i] : nullptr; };
  schema::GemmEpilogue epilogue = schema::GemmEpilogue_None;

  if (auto bcast = dyn_cast_or_null<k::BroadcastOp>(opAt(0))) {
    // bf16 D (the bf16 form of --kiln-fuse-gemm-epilogue): the bf16 bias is
    // widened, the sum and the gelu are rounded once each to bf16.
    auto roundOf = [&](Value v, size_t at) -> k::ConvertOp {
      auto convert = dyn_cast_or_null<k::ConvertOp>(opAt(at));
      return convert && convert.getInput() == v ? convert : nullptr;
    };
    size_t at = 1;
    Value biasValue = bcast.getResult();
    if (auto widen = roundOf(biasValue, at)) {
      biasValue = widen.getResult();
      ++at;
    }
    auto add = dyn_cast_or_null<k::AddOp>(opAt(at++));
    if (!add || !isArg(bcast.getInput()) ||
        !((add.getLhs() == p && add.getRhs() == biasValue) ||
          (add.getRhs() == p && add.getLhs() == biasValue)))
      return unknown();
    bool bf16 = biasValue != bcast.getResult();
    biasIn = bcast.getInput();
    c = add.getResult();
    Value sum = c; // what gelu reads
    if (bf16) {
      k::ConvertOp store = roundOf(c, at++);
      if (!store)
        return unknown();
      c = store.getResult();
    }
    epilogue = schema::GemmEpilogue_Bias;
    if (auto gelu = dyn_cast_or_null<k::GeluOp>(opAt(at))) {
      ++at;
      if (gelu.getInput() != sum)
        return unknown();
      epilogue = schema::GemmEpilogue_BiasGelu;
      if (yielded(c))
        auxOut = c;
      c = gelu.getResult();
      if (bf16) {
        k::ConvertOp store = roundOf(c, at++);
        if (!store)
          return unknown();
        c = store.getResult();
      }
    }
    if (rest.size() != at)
      return unknown();
  } else if (auto gelu = dyn_cast_or_null<k::GeluOp>(opAt(0))) {
    if (gelu.getInput() != p || rest.size() != 1)
      return unknown();
    epilogue = schema::GemmEpilogue_Gelu;
    if (yielded(p))
      auxOut = p;
    c = gelu.getResult();
  } else if (auto grad = dyn_cast_or_null<k::GeluGradOp>(opAt(0))) {
    if (grad.getGrad() != p || !isArg(grad.getInput()))
      return unknown();
    auxIn = grad.getInput();
    c = grad.getResult();
    epilogue = schema::GemmEpilogue_Dgelu;
    if (auto sum = dyn_cast_or_null<k::ReduceSumOp>(opAt(1))) {
      // The rows of C: every dim of [..., N] but the last (batch 1 folds
      // the leading dims into M).
      if (sum.getInput() != c || rest.size() != 2 || !sumsLeadingDims(sum))
        return unknown();
      epilogue = schema::GemmEpilogue_DgeluBgrad;
      biasOut = sum.getResult();
    } else if (rest.size() != 1) {
      return unknown();
    }
  } else if (auto widen = dyn_cast_or_null<k::ConvertOp>(opAt(0));
             widen && isArg(widen.getInput()) &&
             isa_and_nonnull<k::GeluGradOp>(opAt(1))) {
    // bf16 Dgelu: gelu_grad of the widened bf16 aux, rounded once to a bf16
    // C (cuBLASLt's aux has D's type).
    auto grad = cast<k::GeluGradOp>(opAt(1));
    auto store = dyn_cast_or_null<k::ConvertOp>(opAt(2));
    if (grad.getInput() != widen.getResult() || grad.getGrad() != p ||
        !store || store.getInput() != grad.getResult() || rest.size() != 3)
      return unknown();
    auxIn = widen.getInput();
    c = store.getResult();
    epilogue = schema::GemmEpilogue_Dgelu;
  } else if (isa_and_nonnull<k::ReduceSumOp, k::ConvertOp>(opAt(0))) {
    // Sum over k of the operand the GEMM reads: rows of rhs [K, N] or of a
    // transposed lhs [K, M]; a bf16 operand is summed as its fp32 widening.
    Value in;
    size_t at = 0;
    if (auto widen = dyn_cast<k::ConvertOp>(opAt(0))) {
      in = widen.getInput();
      ++at;
    }
    auto sum = dyn_cast_or_null<k::ReduceSumOp>(opAt(at));
    if (!sum || rest.size() != at + 1)
      return unknown();
    if (!in)
      in = sum.getInput();
    else if (sum.getInput() != opAt(0)->getResult(0))
      return unknown();
    bool rows = sumsLeadingDims(sum) &&
                cast<RankedTensorType>(in.getType()).getRank() == 2;
    if (!rows)
      return unknown();
    if (in == matmul.getRhs() && !g->transB)
      epilogue = schema::GemmEpilogue_BgradB;
    else if (in == matmul.getLhs() && g->transA)
      epilogue = schema::GemmEpilogue_BgradA;
    else
      return unknown();
    biasOut = sum.getResult();
  } else if (!rest.empty()) {
    return unknown();
  }
  if (!yielded(c))
    return fusion.emitError() << "the GEMM's result is not an output of the "
                                 "kernel";

  std::string loc = locationString(fusion->getLoc());
  auto output = [&](Value v, StringRef what) -> FailureOr<uint32_t> {
    return addBuffer(v, fusion,
                     ("kiln.matmul:" + what + "@" + loc).str());
  };
  FailureOr<uint32_t> cBuffer = output(c, schema::EnumNameGemmEpilogue(epilogue));
  if (failed(cBuffer))
    return failure();
  g->c = *cBuffer;
  g->epilogue = epilogue;
  if (biasIn)
    g->bias = static_cast<int32_t>(bufferOf.lookup(biasIn));
  if (auxIn)
    g->aux = static_cast<int32_t>(bufferOf.lookup(auxIn));
  if (auxOut) {
    FailureOr<uint32_t> aux = output(auxOut, "gelu-input");
    if (failed(aux))
      return failure();
    g->aux = static_cast<int32_t>(*aux);
    g->auxWritten = true;
  }
  if (biasOut) {
    FailureOr<uint32_t> bias = output(biasOut, "bias-grad");
    if (failed(bias))
      return failure();
    g->bias = static_cast<int32_t>(*bias);
    g->biasWritten = true;
  }
  for (auto [result, value] : llvm::zip(fusion.getResults(), yield.getValues())) {
    if (!bufferOf.count(value))
      return fusion.emitError()
             << "yields a value the GEMM epilogue does not write";
    bufferOf[result] = bufferOf.lookup(value);
  }
  addGemmStep(fusion, *g);
  return success();
}

} // namespace kiln
